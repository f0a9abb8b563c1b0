"""Worker ingress on upstream code: ``BaseWorker._enqueue_request`` (``executor/base_worker.py``) runs for real.

Only the compiled pieces are replaced: the bindings module's ``tllm.Request`` (a recorder of the keyword
arguments upstream builds the C++ request from), the PyExecutor (:class:`FakePyExecutor`, which takes the
enqueued request) and upstream's ``SamplingParams`` (not in the tree: a :class:`harness.Declared` with the
attributes ``_enqueue_request`` reads). The ``GenerationRequest`` carries the real ``MultimodalParams`` and
``DisaggregatedParams`` that upstream's PD ``_preprocess`` produced from the encoder's handoff; upstream's
``to_tensor("multimodal_data")`` restores the real ``SharedTensorContainer`` handles in this process.

Not applicable to a tree without ``executor/base_worker.py``.
"""

import pytest
import torch
from upstream import flows
from upstream.flows import upstream_module
from upstream.harness import Declared, UpstreamArgs, upstream_object

from mm_handoff.errors import HandoffError

MODULE = "tensorrt_llm.executor.base_worker"


@pytest.fixture
def base_worker(upstream):
    return upstream_module(upstream, MODULE, "executor/base_worker.py")


class RecordingRequest:
    """``tllm.Request`` (compiled): keeps the keyword arguments upstream passes, and the py_* attributes."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class FakePyExecutor:
    """The engine behind the worker: takes what ``_enqueue_request`` hands it."""

    kv_cache_transceiver = object()  # disaggregated serving configured

    def __init__(self):
        self.enqueued = []

    def enqueue_request(self, executor_request, *args, **kwargs):
        self.enqueued.append(executor_request)
        return len(self.enqueued)


def _sampling_params(upstream):
    """Upstream's own ``SamplingParams`` where the tree has ``sampling_params.py``; else a declared one with
    what ``_enqueue_request`` reads (``_decoder_output_token_prefix`` since base_worker.py @ 000bd1a6)."""
    import importlib

    module = importlib.import_module("tensorrt_llm.sampling_params")
    if upstream.tree.report().get("tensorrt_llm.sampling_params", ("stub",))[0] == "upstream":
        return module.SamplingParams(max_tokens=1, end_id=2, pad_id=2)
    return Declared("SamplingParams", _decoder_output_token_prefix=(), return_routed_experts=False, max_tokens=1,
                    ignore_eos=False, end_id=2,
                    pad_id=2, logprobs=None,
                    logprobs_mode=None, logprobs_simple_format=False, lookahead_config=None, embedding_bias=None,
                    logits_processor=None, apply_batched_logits_processor=False,
                    _get_sampling_config=lambda: None, _get_output_config=lambda **kw: None,
                    _get_guided_decoding_params=lambda: None, _get_bad_words=lambda: [], _get_stop_words=lambda: [])


def _worker(base_worker, upstream, monkeypatch):
    monkeypatch.setattr(base_worker.tllm, "Request", RecordingRequest)
    return upstream_object(base_worker.BaseWorker, engine=FakePyExecutor(), llm_args=UpstreamArgs(upstream.tree.root),
                           _lora_manager=None, _is_pytorch_backend=True, _executor_config=None, max_seq_len=8192,
                           mapping=Declared("Mapping", cp_size=1),
                           doing_shutdown=True)  # never started: upstream's __del__ -> shutdown() returns at once


def _generation_request(upstream, request_id, prompt_token_ids, mm_params, params):
    return Declared("GenerationRequest", id=request_id, lora_request=None, prompt_adapter_request=None,
                    prompt_token_ids=list(prompt_token_ids), multimodal_params=mm_params,
                    disaggregated_params=params, sampling_params=_sampling_params(upstream), query_token_ids=None,
                    streaming=False, kv_cache_retention_config=None, encoder_input_token_ids=None, cache_salt=None,
                    cache_salt_id=None,
                    priority=0.5, scheduling_params=None, conversation_params=None, arrival_time=None)


def _pd_request(upstream, model, request_id, short_mrope=False):
    """Encoder -> PD ``_preprocess`` on upstream code; the worker's request from what it returned.

    ``short_mrope``: between the PD frontend and the worker the request's mRoPE handle is replaced by one
    five ids shorter (a handle of another request: admission already passed, so only ingress can see it)."""
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async(flows.video_inputs(fps=2.0))
    params = flows.pd_params(upstream, out)
    pd = flows.pd_llm(upstream, model.processor, model.config)
    result = pd._preprocess({"prompt": flows.PROMPT}, None, params)
    ids, mm_params = result[0], flows.multimodal_params_of(result)
    if short_mrope:
        container = upstream.shared_tensor.SharedTensorContainer
        mm_params.multimodal_data["mrope_config"]["mrope_position_ids"] = container.from_tensor(
            torch.zeros(3, 1, len(ids) - 5, dtype=torch.int64)).dump_to_dict()
    return out, _generation_request(upstream, request_id, ids, mm_params, params)


def test_ingress_installed_a_correct_request_passes_through_upstream_untouched(upstream, model, glue, base_worker,
                                                                               monkeypatch):
    glue.install(policy="raise")
    worker = _worker(base_worker, upstream, monkeypatch)
    out, request = _pd_request(upstream, model, request_id=41)
    assert worker._enqueue_request(request) == 1
    (enqueued,) = worker.engine.enqueued
    assert enqueued.kwargs["input_token_ids"] == out.prompt_token_ids  # the aggregated prompt reaches C++
    assert enqueued.kwargs["mrope_config"] is None  # upstream sends mRoPE through py_multimodal_data only
    mrope = enqueued.py_multimodal_data["mrope_config"]["mrope_position_ids"]
    assert isinstance(mrope, torch.Tensor) and tuple(mrope.shape) == (3, 1, len(out.prompt_token_ids))


def test_ingress_installed_a_too_short_mrope_is_refused_naming_the_request(upstream, model, glue, base_worker,
                                                                           monkeypatch):
    glue.install(policy="raise")
    worker = _worker(base_worker, upstream, monkeypatch)
    _, request = _pd_request(upstream, model, request_id=7, short_mrope=True)
    with pytest.raises(HandoffError, match=r"request 7\b|request '7'") as info:
        worker._enqueue_request(request)
    assert "mrope_position_ids" in str(info.value)
    assert worker.engine.enqueued == []  # refused before upstream built or enqueued anything


def test_ingress_uninstalled_upstream_enqueues_the_mismatch_silently(upstream, model, glue, base_worker,
                                                                     monkeypatch):
    """#20138 at the real ingress: the stock PD prompt (one pad run) with the encoder's longer mRoPE ids is
    enqueued without a word; the context-phase slice later cuts the ids to the prompt."""
    worker = _worker(base_worker, upstream, monkeypatch)
    out, request = _pd_request(upstream, model, request_id=9)
    assert worker._enqueue_request(request) == 1
    (enqueued,) = worker.engine.enqueued
    prompt = enqueued.kwargs["input_token_ids"]
    mrope = enqueued.py_multimodal_data["mrope_config"]["mrope_position_ids"]
    assert len(prompt) < mrope.shape[-1] == len(out.prompt_token_ids)


def test_ingress_hook_is_patched_on_upstreams_class(upstream, glue, base_worker):
    report = glue.install()
    rows = {row["target"]: row["state"] for row in report["hooks"]}
    assert rows[f"{MODULE}:BaseWorker._enqueue_request"] == "patched"
