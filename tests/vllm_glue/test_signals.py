"""vLLM's check point (``admission``: ``Qwen3VLMultiModalProcessor.apply``) counts what it decided, in
mm_handoff.stats() and the process's Prometheus registry, without vLLM (a processor shaped like vLLM's; the
engine suite runs the same wrapper on the real one)."""


import pytest
from vllm_fakes import Inputs, Processor

import mm_handoff
from mm_handoff import get_adapter
from mm_handoff.errors import TokenMismatchError
from mm_handoff.glue.policy import Policy
from mm_handoff.glue.signals import SIGNALS
from mm_handoff.vllm._hooks import HOOKS, apply_wrapper

prometheus_client = pytest.importorskip("prometheus_client")
RAW = [151644, 872, 198, 151652, 151656, 151653, 74785, 13, 151645, 198]
GRID = [4, 4, 6]




@pytest.fixture(autouse=True)
def fresh_signals():
    SIGNALS.reset()


def _apply(ids, carried, policy):
    result = {"mm_placeholders": {"video": [object()]}, "prompt_token_ids": ids}
    inputs = Inputs(list(RAW), {} if carried is None else {"mm_handoff_layout": carried})
    return apply_wrapper(lambda *a, **k: result, Processor(), (inputs,), {}, point=HOOKS[0].point("vllm", policy))


def _sample(name, **labels):
    return prometheus_client.REGISTRY.get_sample_value(name, {"engine": "vllm", **labels}) or 0.0


def test_vllm_counts_accepted_refused_and_fallback():
    adapter = get_adapter("qwen3_vl")
    meta = {"fps": 2.0, "frames_indices": list(range(8)), "total_num_frames": 8}
    layout = adapter.derive_layout(adapter.rebuild_token_ids(RAW, video_grid_thw=[GRID], video_metadata=[meta]),
                                   video_grid_thw=[GRID])
    stock = adapter.stock_token_ids(RAW, video_grid_thw=[GRID])
    labels = {"family": "qwen3_vl", "check_point": "admission"}
    before = {o: _sample("mm_handoff_checks_total", outcome=o, **labels) for o in ("accepted", "refused", "fallback")}
    refusals = _sample("mm_handoff_refusals_total", check_point="admission", error="TokenMismatchError")
    _apply(layout.token_ids.tolist(), layout.to_wire(), Policy.RAISE)
    with pytest.raises(TokenMismatchError):
        _apply(list(stock), layout.to_wire(), Policy.RAISE)
    _apply(list(stock), layout.to_wire(), Policy.FALLBACK)
    counts = {(r["family"], r["check_point"], r["outcome"]): r["count"] for r in mm_handoff.stats()["checks"]}
    assert counts == {("qwen3_vl", "admission", o): 1 for o in ("accepted", "refused", "fallback")}
    assert [(r["engine"], r["error"], r["count"]) for r in mm_handoff.stats()["refusals"]] == [
        ("vllm", "TokenMismatchError", 1)]
    assert {o: _sample("mm_handoff_checks_total", outcome=o, **labels) - before[o] for o in before} == {
        "accepted": 1, "refused": 1, "fallback": 1}
    assert _sample("mm_handoff_refusals_total", check_point="admission", error="TokenMismatchError") == refusals + 1
    assert _sample("mm_handoff_hook_seconds_count", check_point="admission") >= 3
