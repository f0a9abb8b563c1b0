"""Every TensorRT-LLM check point counts what it decided (mm_handoff.stats() and the Prometheus registry of
the process), on the stand-in engine: the encoder, the prefill point, admission, worker ingress and the slice."""

import pytest
from trtllm_helpers import PROMPT, video_request

import mm_handoff
import mm_handoff.trtllm as glue
from mm_handoff.errors import MropeLengthError

prometheus_client = pytest.importorskip("prometheus_client")


def _sp():
    from tensorrt_llm.sampling_params import SamplingParams

    return SamplingParams(max_tokens=2)


def _counts() -> dict:
    return {(r["check_point"], r["outcome"]): r["count"] for r in mm_handoff.stats()["checks"]
            if r["engine"] == "trtllm"}


def _prometheus(check_point, outcome, family):
    value = prometheus_client.REGISTRY.get_sample_value("mm_handoff_checks_total", {
        "engine": "trtllm", "family": family, "check_point": check_point, "outcome": outcome})
    return value or 0.0


def test_a_handoff_end_to_end_is_accepted_at_every_check_point(deployment):
    glue.install()
    dep = deployment()
    before = {p: _prometheus(p, "accepted", f) for p, f in (("encoder", "qwen3_vl"), ("prefill", "qwen3_vl"),
                                                            ("admission", "qwen3_vl"), ("ingress", "other"),
                                                            ("slice", "other"))}
    enc = dep.encoder.generate_async(video_request()).result()
    enc.disaggregated_params.request_type = "context_and_generation"
    out = dep.pd.generate_async({"prompt": PROMPT}, sampling_params=_sp(),
                                disaggregated_params=enc.disaggregated_params).result()
    assert len(out.prompt_token_ids) == len(enc.prompt_token_ids)
    counts = _counts()
    for point in ("encoder", "prefill", "admission", "ingress", "slice"):
        assert counts.get((point, "accepted"), 0) >= 1, point
        assert not [k for k in counts if k[0] == point and k[1] != "accepted"], counts
    assert {p: _prometheus(p, "accepted", f) - before[p] for p, f in (
        ("encoder", "qwen3_vl"), ("prefill", "qwen3_vl"), ("admission", "qwen3_vl"), ("ingress", "other"),
        ("slice", "other"))} == {p: counts[(p, "accepted")] for p in before}
    seconds = {r["check_point"]: r for r in mm_handoff.stats()["hook_seconds"] if r["engine"] == "trtllm"}
    assert set(seconds) == {"encoder", "prefill", "admission", "ingress", "slice"}
    assert all(0 < row["sum"] < 1 for row in seconds.values())


def test_refusals_are_counted_by_check_point_and_error_class(deployment):
    glue.install()
    dep = deployment()
    enc = dep.encoder.generate_async(video_request()).result()
    enc.disaggregated_params.request_type = "context_and_generation"
    handle = enc.disaggregated_params.mrope_position_ids_handle
    handle["tensor_size"] = [3, 1, handle["tensor_size"][-1] - 1]
    before = prometheus_client.REGISTRY.get_sample_value("mm_handoff_refusals_total", {
        "engine": "trtllm", "check_point": "admission", "error": "MropeLengthError"}) or 0.0
    with pytest.raises(MropeLengthError):
        dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)
    assert _counts()[("admission", "refused")] == 1 and _counts()[("prefill", "accepted")] == 1
    assert [(r["check_point"], r["error"], r["count"]) for r in mm_handoff.stats()["refusals"]] == [
        ("admission", "MropeLengthError", 1)]
    assert prometheus_client.REGISTRY.get_sample_value("mm_handoff_refusals_total", {
        "engine": "trtllm", "check_point": "admission", "error": "MropeLengthError"}) == before + 1


def test_fallback_and_rebuild_are_counted_where_they_were_decided(deployment):
    glue.install(policy="rebuild")
    dep = deployment()
    enc = dep.encoder.generate_async(video_request()).result()
    enc.disaggregated_params.request_type = "context_and_generation"
    enc.disaggregated_params.multimodal_embedding_handles[0].pop(glue.LAYOUT_KEY)
    ids = dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)[0]
    assert ids == list(enc.prompt_token_ids)
    assert _counts()[("prefill", "rebuilt")] == 1 and _counts()[("admission", "accepted")] == 1
    glue.uninstall()
    glue.install(policy="fallback")
    dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)
    assert _counts()[("prefill", "fallback")] == 1 and _counts()[("admission", "fallback")] == 1


def _failing_engine(params):
    """An engine method (the drift check's parameters) that fails after mm-handoff's check ran: a CUDA error."""
    def failing(self, first, *args, **kwargs):
        raise RuntimeError("CUDA error: out of memory")

    failing.__code__ = failing.__code__.replace(co_varnames=("self", params, "args", "kwargs"))
    return failing


@pytest.mark.parametrize("point", ["ingress", "slice"])
def test_a_worker_check_that_passed_is_counted_when_the_engine_then_fails(engine, monkeypatch, point):
    """The worker's checks run before the engine's method: a request they accepted is counted accepted, also
    when the engine fails afterwards (upstream's conformance suite stops the real runner after its context
    loop; a GPU fails with CUDA errors), and the engine's error reaches the caller unchanged."""
    import numpy as np
    from tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner import DecoderRunner
    from tensorrt_llm._torch.pyexecutor.llm_request import LlmRequest, ScheduledRequests
    from tensorrt_llm.bindings import executor as tllm
    from tensorrt_llm.executor.base_worker import BaseWorker
    from tensorrt_llm.executor.request import GenerationRequest
    from tensorrt_llm.inputs.multimodal import MultimodalParams

    mrope = {"mrope_config": {"mrope_position_ids": np.zeros((3, 1, 10), dtype=np.int64),
                              "mrope_position_deltas": np.zeros((1, 1), dtype=np.int32)}}
    if point == "ingress":
        monkeypatch.setattr(BaseWorker, "_enqueue_request", _failing_engine("request"))
        glue.install()
        request = GenerationRequest(list(range(1000, 1010)), sampling_params=_sp(),
                                    multimodal_params=MultimodalParams(multimodal_data=mrope)).set_id(7)
        call = lambda: BaseWorker(hf_model_config=None)._enqueue_request(request)  # noqa: E731
    else:
        monkeypatch.setattr(DecoderRunner, "_prepare_tp_inputs", _failing_engine("scheduled_requests"))
        glue.install()
        req = tllm.Request(client_id=1, input_token_ids=list(range(10)), max_tokens=2)
        req.py_multimodal_data = mrope
        scheduled = ScheduledRequests(context_requests=[LlmRequest(request_id=11, executor_request=req)])
        call = lambda: DecoderRunner(model=None, use_mrope=True, max_num_tokens=64)._prepare_tp_inputs(  # noqa: E731
            scheduled, None, None, enable_spec_decode=False, runtime_draft_len=0, is_dummy=False)
    before = _prometheus(point, "accepted", "other")
    with pytest.raises(RuntimeError, match="CUDA error"):
        call()
    assert _counts() == {(point, "accepted"): 1}
    assert _prometheus(point, "accepted", "other") == before + 1


@pytest.mark.parametrize("carrier", ["upstream", "mm-handoff"])
def test_an_admission_refusal_is_counted_under_the_family_it_was_checked_with(deployment, carrier):
    """A refusal at admission is labelled with the family whose adapter refused it, as the accepted requests
    are: upstream's own carrier (``DisaggregatedParams.multimodal_layout``, read with the family's adapter) and
    mm-handoff's layout read from the handles when the prefill point answered nothing (an image-only stock
    result, a prefill method not wrapped) are both checked with the family's adapter, never counted ``other``."""
    from types import SimpleNamespace

    from mm_handoff.errors import LayoutError
    from mm_handoff.glue.checkpoint import CheckPoint
    from mm_handoff.glue.policy import Policy
    from mm_handoff.layout import HandoffLayout
    from mm_handoff.trtllm._admission import admission_wrapper
    from mm_handoff.trtllm._upstream_layout import embed_mask_cumsum

    glue.install(policy="raise")
    dep = deployment()
    out = dep.encoder.generate_async(video_request()).result()
    handles = out.disaggregated_params.multimodal_embedding_handles
    layout = HandoffLayout.from_wire(handles[0][glue.LAYOUT_KEY])
    params = SimpleNamespace(multimodal_embedding_handles=handles, disagg_request_id="r9",
                             mrope_position_ids_handle=(3, 1, layout.prompt_len - 5))
    if carrier == "upstream":
        fields = dict(layout.to_disagg_prefill_inputs(), encoder_token_lengths=None,
                      multimodal_embed_mask_cumsum=embed_mask_cumsum(layout))
        fields["item_types"] = [0] * len(fields["item_types"])  # the video claimed an image
        params.multimodal_layout = SimpleNamespace(**fields)
        params.mrope_position_ids_handle = None
        error = LayoutError
    else:
        error = MropeLengthError
    point = CheckPoint("trtllm", "admission", Policy.RAISE, "BaseLLM._preprocess")
    llm = SimpleNamespace(input_processor=dep.pd.input_processor)
    with pytest.raises(error) as info:
        admission_wrapper(lambda *a, **k: (layout.token_ids.tolist(), None), llm, ({"prompt": PROMPT}, None, params),
                          {}, point=point)
    assert info.value.request_id == "r9"
    assert [(r["family"], r["outcome"]) for r in mm_handoff.stats()["checks"]
            if r["engine"] == "trtllm" and r["check_point"] == "admission"] == [("qwen3_vl", "refused")]
