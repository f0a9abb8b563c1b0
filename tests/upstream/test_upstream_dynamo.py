"""NVIDIA Dynamo's own TensorRT-LLM backend code (``ai-dynamo`` 1.6.1, ``dynamo/trtllm/``) on upstream code.

Dynamo's ``EncodeHandler.generate`` (-> ``EncodeHelper.process_encode_request`` -> ``_process_full_epd_flow``:
upstream's ``MultimodalEncoder.generate``, ``DisaggregatedParamsCodec.encode``, ``asdict``) and
``PrefillHandler.generate`` (-> ``embedding_fetcher.fetch_embeddings_from_encoder``: ``DisaggregatedParams(**d)``
-> ``_setup_disaggregated_params_for_mode`` -> ``MultimodalRequestProcessor.process_openai_request`` -> the
engine's ``generate_async``) run as released. Replaced: Dynamo's request plane between the two handlers (an
in-process client whose ``round_robin`` sends the request through JSON, the stricter of Dynamo's two codecs,
to ``EncodeHandler.generate`` and answers with its JSON-decoded output), the request ``Context`` (a declared
one), and the engine objects around upstream's classes (``TensorRTLLMEngine`` is a declared holder of
upstream's ``MultimodalEncoder`` / ``LLM``). The PD engine's ``generate_async`` records what Dynamo hands it;
upstream's ``BaseLLM._preprocess`` then runs on exactly that.

Three names Dynamo imports from TensorRT-LLM must be real before it is imported:
``tensorrt_llm.llmapi.DisaggregatedParams`` (upstream's ``llmapi/__init__.py`` re-exports the params class
``llm.py`` uses), ``tensorrt_llm.executor.utils.RequestError`` (an exception class; ``executor/utils.py`` is
not in the trees) and ``tensorrt_llm.llmapi.disagg_utils.get_global_disagg_request_id`` (the real one needs
mpi4py).

Dynamo 1.6.1's encode path sends images only (``extract_prompt_and_media_from_request`` reads
``image_url``; ``_process_full_epd_flow`` builds ``{"image": ...}``), so these cases are images. Dynamo is
installed by ``make conformance`` (``MM_HANDOFF_DYNAMO_SITE``); without it the tests are not applicable.
"""

import asyncio
import base64
import dataclasses
import io
import json
import os
import sys

import pytest
from upstream import flows
from upstream.harness import Declared

SITE = os.environ.get("MM_HANDOFF_DYNAMO_SITE", "")
IMAGE_PROMPT = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n"
                "<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def dynamo(upstream):
    if not SITE or not all(os.path.isdir(p) for p in SITE.split(os.pathsep)):
        pytest.skip("not applicable: NVIDIA Dynamo is not installed (make conformance installs ai-dynamo 1.6.1 "
                    "into MM_HANDOFF_DYNAMO_SITE)")
    import types

    import tensorrt_llm.executor as executor_pkg
    import tensorrt_llm.llmapi as llmapi

    llmapi.DisaggregatedParams = flows.params_class(upstream)
    utils = sys.modules.get("tensorrt_llm.executor.utils") or types.ModuleType("tensorrt_llm.executor.utils")

    class RequestError(RuntimeError):
        """``tensorrt_llm.executor.utils.RequestError`` (file not in the trees): an exception class."""

    utils.RequestError = RequestError
    sys.modules["tensorrt_llm.executor.utils"] = utils
    executor_pkg.utils = utils
    counter = iter(range(1, 1 << 30))
    disagg_utils = types.ModuleType("tensorrt_llm.llmapi.disagg_utils")
    disagg_utils.get_global_disagg_request_id = lambda machine_id: next(counter)
    sys.modules["tensorrt_llm.llmapi.disagg_utils"] = disagg_utils
    llmapi.disagg_utils = disagg_utils
    for path in SITE.split(os.pathsep):
        if path not in sys.path:
            sys.path.append(path)
    import importlib

    return types.SimpleNamespace(
        handlers=importlib.import_module("dynamo.trtllm.request_handlers.handlers"),
        base=importlib.import_module("dynamo.trtllm.request_handlers.handler_base"),
        mp=importlib.import_module("dynamo.trtllm.multimodal_processor"),
        constants=importlib.import_module("dynamo.trtllm.constants"),
        fetcher=importlib.import_module("dynamo.trtllm.multimodal.embedding_fetcher"),
        codec=importlib.import_module("dynamo.trtllm.utils.disagg_utils").DisaggregatedParamsCodec)


def _image_url():
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 96), (120, 30, 200)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


class _Response:
    def __init__(self, data):
        self._data = data

    def data(self):
        return self._data


class InProcessClient:
    """Dynamo's ``Client`` (the request plane): ``round_robin`` sends the request to the encode handler
    through JSON and streams its JSON-decoded answers."""

    def __init__(self, handler):
        self.handler = handler
        self.sent = []

    async def round_robin(self, request, context=None):
        request = json.loads(json.dumps(request))
        self.sent.append(request)

        async def stream():
            async for out in self.handler.generate(request, _context("encode")):
                yield _Response(json.loads(json.dumps(out)))

        return stream()


def _context(name):
    return Declared("Context", id=lambda: name, is_stopped=lambda: False, is_killed=lambda: False,
                    trace_headers=lambda: None)


class RecordingLLM:
    """The PD ``TensorRTLLMEngine.llm``: records what Dynamo passes to ``generate_async``, then rejects the
    request as upstream's synchronous validation does (a ``ValueError``: Dynamo answers the request with an
    error and carries on; any other exception makes Dynamo exit the process as a fatal engine error)."""

    def __init__(self, llm):
        self.llm = llm
        self.calls = []

    def generate_async(self, **kwargs):
        self.calls.append(kwargs)
        raise ValueError("recorded by the conformance harness")


@dataclasses.dataclass
class SamplingParams:
    """Upstream's ``SamplingParams`` (``sampling_params.py``, not in the trees) is a dataclass; Dynamo calls
    ``dataclasses.replace`` on it and sets these fields (``_override_sampling_params``,
    ``apply_stop_conditions_to_sampling_params``)."""

    max_tokens: int | None = None
    min_tokens: int | None = None
    ignore_eos: bool = False
    stop_token_ids: list | None = None
    logprobs: int | None = None
    prompt_logprobs: int | None = None


def _config(dynamo, mode, engine, processor, client=None):
    base = dynamo.base
    return base.RequestHandlerConfig(engine=engine, default_sampling_params=SamplingParams(),
                                     publisher=None, disaggregation_mode=mode, encode_client=client,
                                     multimodal_processor=processor)


def _processor(dynamo, model):
    return dynamo.mp.MultimodalRequestProcessor(model_type="qwen3_vl", model_dir=str(model.path),
                                                max_file_size_mb=16, tokenizer=model.processor.tokenizer)


def _prefill(dynamo, upstream, model, mp, client):
    pd = RecordingLLM(flows.pd_llm(upstream, model.processor, model.config))
    handler = dynamo.handlers.PrefillHandler(_config(dynamo, dynamo.constants.DisaggregationMode.PREFILL,
                                                     Declared("TensorRTLLMEngine", llm=pd), mp, client))
    return pd, handler


def _run(dynamo, upstream, model):
    constants = dynamo.constants
    tokenizer = model.processor.tokenizer
    mp = _processor(dynamo, model)
    enc_engine = Declared("TensorRTLLMEngine", llm=flows.encoder(upstream, model.processor, model.config),
                          encoder_available=True)
    encode = dynamo.handlers.EncodeHandler(_config(dynamo, constants.DisaggregationMode.ENCODE, enc_engine, mp))
    client = InProcessClient(encode)
    pd, prefill = _prefill(dynamo, upstream, model, mp, client)
    request = {"token_ids": tokenizer(IMAGE_PROMPT).input_ids,
               "multi_modal_data": {"image_url": [{"Url": _image_url()}]},
               "stop_conditions": {"max_tokens": 8}, "sampling_options": {}, "output_options": {}}

    async def drive():
        return [out async for out in prefill.generate(request, _context("prefill"))]

    answered = asyncio.run(drive())
    assert "recorded by the conformance harness" in json.dumps(answered, default=str)
    (call,) = pd.calls
    ids = pd.llm._preprocess(call["inputs"], None, call["disaggregated_params"])[0]
    return client, call, ids


def test_dynamo_handlers_installed_the_stamp_survives_and_pd_gets_the_aggregated_prompt(upstream, model, glue,
                                                                                       dynamo):
    glue.install(policy="raise")
    client, call, ids = _run(dynamo, upstream, model)
    params = call["disaggregated_params"]
    assert params.request_type == "context_only"
    assert glue.LAYOUT_KEY in params.multimodal_embedding_handles[0]  # across Dynamo's codec and JSON
    agg = flows.encoder(upstream, model.processor, model.config).generate_async(
        {"prompt": IMAGE_PROMPT, "multi_modal_data": {"image": [_decoded_image()]}})
    assert ids == agg.prompt_token_ids


def _decoded_image():
    from PIL import Image

    data = base64.b64decode(_image_url().split(",", 1)[1])
    return Image.open(io.BytesIO(data)).convert("RGB")


def test_dynamo_handlers_without_mm_handoff_image_prompt_is_unchanged(upstream, model, glue, dynamo):
    """The same run on stock code: no stamp crosses, and for an image the PD prompt is the aggregated one
    anyway (#20138 is a video matter)."""
    client, call, ids = _run(dynamo, upstream, model)
    assert glue.LAYOUT_KEY not in (call["disaggregated_params"].multimodal_embedding_handles[0] or {})
    agg = flows.encoder(upstream, model.processor, model.config).generate_async(
        {"prompt": IMAGE_PROMPT, "multi_modal_data": {"image": [_decoded_image()]}})
    assert ids == agg.prompt_token_ids


class VideoEncodeClient:
    """The encoder step Dynamo 1.6.1 does not take for video, supplied by the test: what
    ``_process_full_epd_flow`` does for an image, on a video -- upstream's ``MultimodalEncoder.generate`` on
    ``{"prompt_token_ids": <the frontend's ids>, "multi_modal_data": {"video": ...}}``, then Dynamo's own
    ``DisaggregatedParamsCodec.encode`` and ``asdict``, the decoded prompt and the ids, through JSON."""

    def __init__(self, dynamo, encoder, tokenizer):
        self.dynamo, self.encoder, self.tokenizer = dynamo, encoder, tokenizer
        self.outputs = []

    async def round_robin(self, request, context=None):
        ids = list(request["token_ids"])
        (out,) = self.encoder.generate([{"prompt_token_ids": ids,
                                         "multi_modal_data": flows.video_inputs(fps=2.0)["multi_modal_data"]}])
        self.outputs.append(out)
        answer = {"ep_disaggregated_params": dataclasses.asdict(self.dynamo.codec.encode(out.disaggregated_params)),
                  "processed_prompt": self.tokenizer.decode(ids, skip_special_tokens=False),
                  "prompt_token_ids": ids}

        async def stream():
            yield _Response(json.loads(json.dumps(answer)))

        return stream()


def _run_video(dynamo, upstream, model):
    """Dynamo's ``fetch_embeddings_from_encoder`` (no cache) and ``PrefillHandler.generate_locally`` (what
    ``PrefillHandler.generate`` calls with the params it fetched; for a video request 1.6.1 does not
    fetch, so the test makes the call ``generate`` makes for an image)."""
    tokenizer = model.processor.tokenizer
    mp = _processor(dynamo, model)
    client = VideoEncodeClient(dynamo, flows.encoder(upstream, model.processor, model.config), tokenizer)
    pd, prefill = _prefill(dynamo, upstream, model, mp, client)
    request = {"token_ids": tokenizer(flows.PROMPT).input_ids, "stop_conditions": {"max_tokens": 8},
               "sampling_options": {}, "output_options": {}}

    async def drive():
        params = await dynamo.fetcher.fetch_embeddings_from_encoder(["video"], request, client)
        return [out async for out in prefill.generate_locally(request, _context("prefill"), None, params)]

    asyncio.run(drive())
    (call,) = pd.calls
    ids = pd.llm._preprocess(call["inputs"], None, call["disaggregated_params"])[0]
    (out,) = client.outputs
    return out, call, ids


def test_dynamo_video_installed_pd_prompt_is_the_aggregated_one(upstream, model, glue, dynamo):
    glue.install(policy="raise")
    out, call, ids = _run_video(dynamo, upstream, model)
    assert call["disaggregated_params"].request_type == "context_only"
    assert glue.LAYOUT_KEY in call["disaggregated_params"].multimodal_embedding_handles[0]
    assert ids == out.prompt_token_ids


def test_dynamo_video_without_mm_handoff_pd_prompt_is_the_short_one(upstream, model, glue, dynamo):
    out, _, ids = _run_video(dynamo, upstream, model)
    assert len(ids) < len(out.prompt_token_ids)  # #20138 through Dynamo's own code
