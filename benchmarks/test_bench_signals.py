"""What the check point's observers cost per hooked call: Prometheus on against off, side by side in one run.

Each group times the same hooked call ``N[hook]`` times per round, so a row's time / N is one call:

- ``bare``: the engine's function called directly (no mm-handoff at all), the floor;
- ``metrics_off``: the check point with ``MM_HANDOFF_METRICS=0`` (the in-process figures only, mm_handoff.stats());
- ``metrics_on``: the same with the Prometheus side on: in memory (a collector on the default registry that reads
  the in-process figures when scraped), or, with ``PROMETHEUS_MULTIPROC_DIR`` set when pytest starts (as SGLang
  with ``--enable-metrics`` and trtllm-serve run), multiprocess mode: the figures written to the files at most
  every ``FLUSH_SECONDS``, from the hooked call that finds the write due or from the flusher thread, inside the
  timed rounds. Run both::

      pytest benchmarks/test_bench_signals.py
      PROMETHEUS_MULTIPROC_DIR=$(mktemp -d) pytest benchmarks/test_bench_signals.py

Two hooks: ``visit`` is the check point alone around an engine call (what every wrapper adds), ``vllm`` is vLLM's
whole wrapper on its accepted path (a carried layout accepted, held to the raw prompt, the expansion compared),
on a processor shaped like vLLM's. The goal (docs/benchmarks.md): on - off at most 2 us per hook.
"""

import os

import pytest
from vllm_fakes import Inputs, Processor

from mm_handoff import get_adapter
from mm_handoff.glue.checkpoint import CheckPoint
from mm_handoff.glue.policy import Policy
from mm_handoff.glue.signals import Signals
from mm_handoff.vllm._hooks import apply_wrapper

#: hooked calls per round, per hook (vLLM's whole wrapper takes milliseconds here, the check point alone microseconds)
N = {"visit": 1000, "vllm": 20}
ROUNDS = 30
RAW = [151644, 872, 198, 151652, 151656, 151653, 74785, 13, 151645, 198]
GRID = [4, 4, 6]


def _signals(mode):
    signals = Signals()
    signals.configure({"MM_HANDOFF_METRICS": "1" if mode == "metrics_on" else "0"})
    return signals


def _engine():
    return None


def _visit_hook(point):
    def hooked():
        with point.visit() as visit:
            return visit.call(_engine)

    return hooked


def _vllm_hook(point):
    adapter = get_adapter("qwen3_vl")
    meta = {"fps": 2.0, "frames_indices": list(range(8)), "total_num_frames": 8}
    layout = adapter.derive_layout(adapter.rebuild_token_ids(RAW, video_grid_thw=[GRID], video_metadata=[meta]),
                                   video_grid_thw=[GRID])
    result = {"mm_placeholders": {"video": [object()]}, "prompt_token_ids": layout.token_ids.tolist()}
    wire, processor = layout.to_wire(), Processor()

    def engine(*args, **kwargs):
        return result

    def hooked():
        inputs = Inputs(RAW, {"mm_handoff_layout": wire})
        return apply_wrapper(engine, processor, (inputs,), {}, point=point)

    return hooked


def _bare_vllm():
    result = {"mm_placeholders": {}, "prompt_token_ids": RAW}
    return lambda: result


@pytest.mark.parametrize("mode", ["bare", "metrics_off", "metrics_on"])
@pytest.mark.parametrize("hook", ["visit", "vllm"])
def test_hook(benchmark, hook, mode):
    prometheus_mode = "multiprocess" if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else "memory"
    benchmark.group = f"signals/{hook}/{prometheus_mode}"
    benchmark.extra_info.update(calls_per_round=N[hook], role="baseline" if mode != "metrics_on" else "mm-handoff",
                                prometheus_mode=prometheus_mode)
    if mode == "bare":
        fn = _engine if hook == "visit" else _bare_vllm()
    else:
        signals = _signals(mode)
        point = CheckPoint("vllm", "admission", Policy.RAISE, "Qwen3VLMultiModalProcessor.apply", signals=signals)
        fn = _visit_hook(point) if hook == "visit" else _vllm_hook(point)

    def many():
        for _ in range(N[hook]):
            fn()

    benchmark.pedantic(many, rounds=ROUNDS, iterations=1, warmup_rounds=2)
    if mode != "bare":
        figures = signals.snapshot()
        assert figures["prometheus"] is (mode == "metrics_on")
        assert figures["checks"][0]["outcome"] == "accepted"
        if mode == "metrics_on" and prometheus_mode == "multiprocess":
            signals.flush()
            files = os.listdir(os.environ["PROMETHEUS_MULTIPROC_DIR"])
            assert figures["prometheus"] and any(name.endswith(".db") for name in files)
