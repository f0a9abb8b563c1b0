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
