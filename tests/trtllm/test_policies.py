"""Each policy at each check point: raise -> typed error; fallback -> warn and pass; rebuild -> rebuild
where possible (the prefill point), elsewhere the same as raise."""

import json
import logging

import numpy as np
import pytest
from trtllm_helpers import PROMPT, video_request

import mm_handoff.trtllm as glue
from mm_handoff import get_adapter
from mm_handoff.errors import HandoffError, MropeLengthError, SkewError

EVENTS = "mm_handoff"  # the logger every check point's events go to


def _events(caplog) -> list:
    """The structured events written (their dicts, as a log pipeline parses them from the message too)."""
    out = []
    for record in caplog.records:
        if hasattr(record, "mm_handoff_event"):
            message = record.getMessage()
            assert message.startswith("mm-handoff event ")
            assert json.loads(message[len("mm-handoff event "):]) == record.mm_handoff_event
            out.append(record.mm_handoff_event)
    return out

POLICIES = ("raise", "fallback", "rebuild")


def _sp():
    from tensorrt_llm.sampling_params import SamplingParams

    return SamplingParams(max_tokens=2)


def _encoded(dep):
    out = dep.encoder.generate_async(video_request()).result()
    out.disaggregated_params.request_type = "context_and_generation"
    return out


def _handle(array):
    from tensorrt_llm._torch.shared_tensor import SharedTensorContainer

    return SharedTensorContainer.from_tensor(np.asarray(array)).dump_to_dict()


def _mrope_data(length):
    return {"mrope_config": {"mrope_position_ids": _handle(np.zeros((3, 1, length), dtype=np.int64)),
                             "mrope_position_deltas": _handle(np.zeros((1, 1), dtype=np.int32))}}


# ------------------------------------------------------------------------------ prefill point
@pytest.mark.parametrize("policy", POLICIES)
def test_prefill_without_a_carried_layout(deployment, caplog, policy):
    """Layout missing, grids + metadata carried: raise names the key, fallback keeps the stock (short)
    prompt, rebuild reproduces the encoder's ids exactly from the grids and video metadata."""
    glue.install(policy=policy)
    dep = deployment()
    enc = _encoded(dep)
    enc.disaggregated_params.multimodal_embedding_handles[0].pop(glue.LAYOUT_KEY)
    call = lambda: dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)  # noqa: E731
    if policy == "raise":
        with pytest.raises(HandoffError) as info:
            call()
        assert info.value.field == "multimodal_embedding_handles[0]['mm_handoff.layout']"
        assert info.value.actual == "absent"
        return
    with caplog.at_level(logging.INFO, logger=EVENTS):
        ids = call()[0]
    events = _events(caplog)
    if policy == "fallback":
        assert len(ids) == len(enc.prompt_token_ids) - 16
        # the prefill point passes the stock prompt on; admission then finds its mRoPE ids too short
        assert [(e["check_point"], e["outcome"]) for e in events] == [("prefill", "fallback"), ("admission",
                                                                                                   "fallback")]
        assert events[0]["actual"] == "absent" and "mm_handoff.layout" in events[0]["field"]
        assert events[1]["field"].startswith("mrope_position_ids") and events[1]["error"] == "MropeLengthError"
        assert all(e["policy"] == "fallback" and e["request_id"] == events[0]["request_id"] for e in events)
        assert events[0]["family"] == "qwen3_vl"  # admission used no adapter for it: "other"
    else:
        assert ids == list(enc.prompt_token_ids)
        assert [(e["check_point"], e["outcome"]) for e in events] == [("prefill", "rebuilt")]


def test_prefill_rebuild_without_grids_behaves_as_raise(deployment):
    """Policy rebuild with nothing to rebuild from raises like raise does."""
    glue.install(policy="rebuild")
    dep = deployment()
    enc = _encoded(dep)
    for key in (glue.LAYOUT_KEY, glue.GRIDS_KEY, glue.VIDEO_METADATA_KEY):
        enc.disaggregated_params.multimodal_embedding_handles[0].pop(key)
    with pytest.raises(HandoffError, match="mm_handoff.layout"):
        dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)


@pytest.mark.parametrize("policy", POLICIES)
def test_prefill_with_a_skewed_layout(deployment, policy):
    """A layout from another family: raise -> SkewError; fallback -> stock ids; rebuild -> exact ids."""
    glue.install(policy=policy)
    dep = deployment()
    enc = _encoded(dep)
    handle = enc.disaggregated_params.multimodal_embedding_handles[0]
    grids = handle[glue.GRIDS_KEY]
    skewed = get_adapter("qwen3_vl_moe", tokenizer=dep.tokenizer).derive_layout(
        enc.prompt_token_ids, video_grid_thw=grids["video_grid_thw"], mrope=False)
    handle[glue.LAYOUT_KEY] = skewed.to_wire()
    call = lambda: dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)[0]  # noqa: E731
    if policy == "raise":
        with pytest.raises(SkewError, match="family"):
            call()
    elif policy == "fallback":
        assert len(call()) == len(enc.prompt_token_ids) - 16
    else:
        assert call() == list(enc.prompt_token_ids)


# ------------------------------------------------------------------------------ admission point
@pytest.mark.parametrize("policy", POLICIES)
def test_admission(deployment, caplog, policy):
    """A shortened mRoPE handle at BaseLLM._preprocess."""
    glue.install(policy=policy)
    dep = deployment()
    enc = _encoded(dep)
    handle = enc.disaggregated_params.mrope_position_ids_handle
    handle["tensor_size"] = [3, 1, handle["tensor_size"][-1] - 1]
    call = lambda: dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)  # noqa: E731
    if policy == "fallback":
        with caplog.at_level(logging.WARNING, logger=EVENTS):
            assert call()[0] == list(enc.prompt_token_ids)
        [event] = _events(caplog)
        assert event["check_point"] == "admission" and event["outcome"] == "fallback"
    else:
        with pytest.raises(MropeLengthError):
            call()


# --------------------------------------------------------------------------- worker ingress point
@pytest.mark.parametrize("policy", POLICIES)
def test_worker_ingress(engine, caplog, policy):
    """BaseWorker._enqueue_request with mRoPE ids 16 long for a 10-token prompt."""
    from tensorrt_llm.executor.base_worker import BaseWorker
    from tensorrt_llm.executor.request import GenerationRequest
    from tensorrt_llm.inputs.multimodal import MultimodalParams

    glue.install(policy=policy)
    worker = BaseWorker(hf_model_config=engine.make_qwen3vl_config())
    request = GenerationRequest(list(range(1000, 1010)), sampling_params=_sp(),
                                multimodal_params=MultimodalParams(multimodal_data=_mrope_data(16))).set_id(7)
    if policy == "fallback":
        with caplog.at_level(logging.WARNING, logger=EVENTS):
            assert worker._enqueue_request(request) == 1
        [event] = [e for e in _events(caplog) if e["check_point"] == "ingress"]  # (the in-process worker slices too)
        assert event["request_id"] == 7 and event["actual"] == 16 and event["outcome"] == "fallback"
    else:
        with pytest.raises(MropeLengthError) as info:
            worker._enqueue_request(request)
        assert info.value.request_id == 7 and info.value.actual == 16


# ------------------------------------------------------------------------ context-phase slice
def _context_request(prompt_len, mrope_len):
    from tensorrt_llm._torch.pyexecutor.llm_request import LlmRequest
    from tensorrt_llm.bindings import executor as tllm

    req = tllm.Request(client_id=1, input_token_ids=list(range(prompt_len)), max_tokens=2)
    req.py_multimodal_data = {"mrope_config": {
        "mrope_position_ids": np.arange(3 * mrope_len, dtype=np.int64).reshape(3, 1, mrope_len),
        "mrope_position_deltas": np.zeros((1, 1), dtype=np.int32)}}
    return LlmRequest(request_id=11, executor_request=req)


def _run_decoder_runner(runner_cls):
    from tensorrt_llm._torch.pyexecutor.llm_request import ScheduledRequests

    scheduled = ScheduledRequests(context_requests=[_context_request(10, 16)])
    if runner_cls.__name__ == "DecoderRunner":
        runner = runner_cls(model=None, use_mrope=True, max_num_tokens=64)
        return runner._prepare_tp_inputs(scheduled, None, None, enable_spec_decode=False, runtime_draft_len=0,
                                         is_dummy=False)[0]
    return runner_cls(use_mrope=True, max_num_tokens=64)._prepare_tp_inputs(scheduled, None, None)[0]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("where", ["runner", "model_engine"])
def test_context_phase_slice(engine, caplog, policy, where):
    """DecoderRunner / PyTorchModelEngine._prepare_tp_inputs with a 16-long mRoPE for a 10-token prompt."""
    if where == "runner":
        from tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner import DecoderRunner as cls
    else:
        from tensorrt_llm._torch.pyexecutor.model_engine import PyTorchModelEngine as cls
    glue.install(policy=policy)
    if policy == "fallback":
        with caplog.at_level(logging.WARNING, logger=EVENTS):
            inputs = _run_decoder_runner(cls)
        assert inputs["position_ids"].shape == (3, 1, 10)  # the original ran, untouched
        [event] = _events(caplog)
        assert event["check_point"] == "slice" and event["request_id"] == 11 and event["family"] == "other"
    else:
        with pytest.raises(MropeLengthError) as info:
            _run_decoder_runner(cls)
        assert info.value.request_id == 11
        assert info.value.expected == "prompt length 10" and info.value.actual == 16


def test_slice_precheck_passes_matching_requests_untouched(engine):
    """A consistent request goes through the wrapped runner with the same result as the original."""
    from tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner import DecoderRunner
    from tensorrt_llm._torch.pyexecutor.llm_request import ScheduledRequests

    glue.install()
    original = glue.get_original((DecoderRunner, "_prepare_tp_inputs"))
    runner = DecoderRunner(model=None, use_mrope=True, max_num_tokens=64)
    kw = dict(enable_spec_decode=False, runtime_draft_len=0, is_dummy=False)
    scheduled = ScheduledRequests(context_requests=[_context_request(10, 10)])
    wrapped = runner._prepare_tp_inputs(scheduled, None, None, **kw)
    stock = original(runner, ScheduledRequests(context_requests=[_context_request(10, 10)]), None, None, **kw)
    np.testing.assert_array_equal(wrapped[0]["position_ids"], stock[0]["position_ids"])


def test_rebuild_replaces_a_corrupted_layout_and_admission_checks_the_rebuilt_one(deployment):
    """Policy rebuild: a payload failing its checksum is replaced by the rebuild; admission accepts it."""
    glue.install(policy="rebuild")
    dep = deployment()
    enc = _encoded(dep)
    wire = enc.disaggregated_params.multimodal_embedding_handles[0][glue.LAYOUT_KEY]
    wire["checksum"] = "0" * 32
    ids = dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)[0]
    assert ids == list(enc.prompt_token_ids)


# ------------------------------------------------------------------------------------ encoder
@pytest.mark.parametrize("policy", POLICIES)
def test_encoder_ships_the_grids_when_the_layout_does_not_derive(caplog, policy, monkeypatch):
    """A layout that does not derive from the encoder's ids: raise fails the request there; fallback and
    rebuild ship the grids and metadata only (so the PD side can rebuild), and say so."""
    from mm_handoff.glue.checkpoint import CheckPoint
    from mm_handoff.glue.policy import Policy
    from mm_handoff.trtllm._encoder import build_carried

    adapter = get_adapter("qwen3_vl")
    error = HandoffError("token_ids", "an expanded prompt", "something else")

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(type(adapter), "derive_layout", broken)
    grids = {"video_grid_thw": [[2, 4, 4]]}
    def call():
        with CheckPoint("trtllm", "encoder", Policy(policy)).visit("e1") as visit:
            visit.uses(adapter)
            return build_carried(adapter, [1, 2, 3], grids, {}, visit=visit, request_id="e1")

    if policy == "raise":
        with pytest.raises(HandoffError) as info:
            call()
        assert info.value.args == error.args and info.value.request_id == "e1"
        assert error.request_id is None  # the adapter's own error is left as it was
        return
    with caplog.at_level(logging.INFO, logger=EVENTS):
        stamp = call()
    assert glue.LAYOUT_KEY not in stamp and stamp[glue.GRIDS_KEY]["video_grid_thw"] == [[2, 4, 4]]
    [event] = _events(caplog)  # it says it ships the grids; it never claims to rebuild a layout
    assert (event["outcome"], event["check_point"], event["request_id"]) == ("shipped_grids", "encoder", "e1")
