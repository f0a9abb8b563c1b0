"""Each benchmark runs once (``--benchmark-disable``): the suite stays runnable without being timed in CI."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_benchmark_runs_once():
    r = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "benchmarks"), "-q", "-p", "no:cacheprovider",
                        "--benchmark-disable"], capture_output=True, text=True, cwd=str(ROOT), timeout=900)
    assert r.returncode == 0, r.stdout[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    passed = int(last.split(" passed")[0].split()[-1])
    assert passed >= 78 and "failed" not in last and "error" not in last, last  # every benchmark, none dropped


def _report_module():
    """``benchmarks/report.py`` (``mm-handoff bench``'s table): it lives with the suite, not in the wheel."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mm_handoff_bench_report", ROOT / "benchmarks" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_summary_and_table():
    """`mm-handoff bench`'s table and goal lines from a pytest-benchmark JSON."""
    report = _report_module()
    format_table, summarize = report.format_table, report.summarize

    def row(group, name, median, **info):
        return {"group": group, "name": name, "stats": {"median": median, "min": median}, "extra_info": info}

    data = {"benchmarks": [
        row("encoder/720p40", "test_encoder_mm_handoff[720p40]", 2e-4, tokens=12054, role="mm-handoff",
            wire_bytes=2700, payload_bytes=389_283_840, wire_fraction=2700 / 389_283_840),
        row("encoder/720p40", "test_encoder_naive_python[720p40]", 2e-3, role="baseline"),
        row("prefill/720p40", "test_prefill_mm_handoff[720p40]", 2.5e-4, tokens=12054, role="mm-handoff"),
        row("prefill/720p40", "test_prefill_stock_trtllm[720p40]", 3.5e-3, role="baseline"),
        row("mrope/720p40", "test_mrope_mm_handoff[720p40]", 1.2e-4, tokens=12054, role="mm-handoff"),
        row("mrope/720p40", "test_mrope_hf_get_rope_index[720p40]", 3e-3, role="baseline"),
    ]}
    cases = summarize(data)
    assert round(cases["720p40"]["mrope_speedup"]) == 25
    table = format_table(cases)
    assert "| 720p40 | 12054 | - | - | 0.200 | 2.000 | 0.250 | - | 3.500 | 0.120 | 3.000 | 25.0x |" in table
    assert "prefill-side work at 12k ids: 0.250 ms (goal <= 0.3 ms: met" in table
    assert "goal >= 20x: met" in table and "goal <= 0.001%: met" in table
