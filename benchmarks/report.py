"""``mm-handoff bench`` (from a clone): run the CPU benchmark suite and print tables a user can compare.

It lives next to the suite (``benchmarks/``, not shipped in the wheel); the CLI verb loads it from
the clone. It runs the suite in a subprocess with ``--benchmark-json``, then prints, per prompt
size, the median of each row, the ratio against its baseline, and how far each goal is met (the
hooks' table in multiples of F, the list conversion timed in the same run). ``--plot`` saves
per-request overhead against prompt length.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["run_bench", "summarize", "format_table", "format_hooks"]

#: goals from the benchmarks issue
PREFILL_GOAL_MS = 0.3
MROPE_GOAL_X = 20.0
WIRE_GOAL_FRACTION = 1e-5  # 0.001 %


def find_benchmarks() -> Path | None:
    here = Path(__file__).resolve().parent
    return here if (here / "test_bench_cpu.py").exists() else None


def summarize(data: dict) -> dict:
    """Per case: median ms of every row, ratios, goal verdicts (from pytest-benchmark's JSON)."""
    cases: dict = {}
    for bench in data["benchmarks"]:
        group, _, case = bench["group"].partition("/")
        if group == "scale":  # its own table and plot (scale_rows)
            continue
        row = bench["name"].split("[")[0].replace("test_", "")
        source = (bench.get("params") or {}).get("source")
        row = f"{row}_{source}" if source else row
        entry = cases.setdefault(case, {"tokens": None, "rows": {}})
        entry["rows"][f"{group}:{row}"] = {"median_ms": bench["stats"]["median"] * 1e3,
                                           "min_ms": bench["stats"]["min"] * 1e3}
        info = bench.get("extra_info", {})
        if info.get("tokens") and info.get("role") == "mm-handoff":
            entry["tokens"] = info["tokens"]
        for key in ("wire_bytes", "payload_bytes", "wire_fraction"):
            if key in info:
                entry[key] = info[key]
    for entry in cases.values():
        def med(key, rows=entry["rows"]):
            return rows.get(key, {}).get("median_ms")

        if med("prefill:prefill_mm_handoff_dataclass") and med("prefill:prefill_stock_trtllm"):
            entry["prefill_vs_stock"] = (med("prefill:prefill_mm_handoff_dataclass")
                                         / med("prefill:prefill_stock_trtllm"))
        if med("mrope:mrope_mm_handoff") and med("mrope:mrope_hf_get_rope_index"):
            entry["mrope_speedup"] = med("mrope:mrope_hf_get_rope_index") / med("mrope:mrope_mm_handoff")
        if med("encoder:encoder_mm_handoff") and med("encoder:encoder_naive_python"):
            entry["encoder_speedup"] = med("encoder:encoder_naive_python") / med("encoder:encoder_mm_handoff")
        if med("roundtrip:roundtrip_mm_handoff") and med("roundtrip:roundtrip_naive_python"):
            entry["roundtrip_speedup"] = med("roundtrip:roundtrip_naive_python") / med("roundtrip:roundtrip_mm_handoff")
        if med("prefill:prefill_mm_handoff") and entry["tokens"]:
            entry["prefill_us_per_1k_tokens"] = med("prefill:prefill_mm_handoff") * 1e3 / (entry["tokens"] / 1000)
    return cases


def _fmt(value, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def format_table(cases: dict) -> str:
    order = sorted(cases, key=lambda c: cases[c]["tokens"] or 0)
    lines = ["| case | tokens | derive+validate+wire round trip (ms) | same, naive Python derivation (ms) | "
             "encoder derive+wire (ms) | naive Python (ms) | prefill mm-handoff (ms) | "
             "prefill mm-handoff + TRT dataclass (ms) | prefill stock (ms) | mRoPE numpy (ms) | "
             "HF get_rope_index (ms) | mRoPE speed-up | wire / payload |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in order:
        e = cases[c]

        def ms(key, r=e["rows"]):
            v = r.get(key, {}).get("median_ms")
            return "-" if v is None else f"{v:.3f}"

        lines.append(
            f"| {c} | {e['tokens'] or '-'} | {ms('roundtrip:roundtrip_mm_handoff')} | "
            f"{ms('roundtrip:roundtrip_naive_python')} | {ms('encoder:encoder_mm_handoff')} | "
            f"{ms('encoder:encoder_naive_python')} | "
            f"{ms('prefill:prefill_mm_handoff')} | {ms('prefill:prefill_mm_handoff_dataclass')} | "
            f"{ms('prefill:prefill_stock_trtllm')} | {ms('mrope:mrope_mm_handoff')} | "
            f"{ms('mrope:mrope_hf_get_rope_index')} | "
            f"{_fmt(e.get('mrope_speedup'), '{:.1f}x')} | {_fmt(e.get('wire_fraction'), '{:.6%}')} |")
    lines.append("")
    lines.append("Goals (medians; the 12k case is 720p40):")
    small = cases.get("720p40")
    if small:
        p = small["rows"].get("prefill:prefill_mm_handoff", {}).get("median_ms")
        if p is not None:
            lines.append(f"- prefill-side work at 12k ids: {p:.3f} ms (goal <= {PREFILL_GOAL_MS} ms: "
                         f"{'met' if p <= PREFILL_GOAL_MS else 'NOT met'}, {p / PREFILL_GOAL_MS:.2f}x the budget)")
    if small:
        rt = small["rows"].get("roundtrip:roundtrip_mm_handoff", {}).get("median_ms")
        if rt is not None:
            lines.append(f"- derivation + validation + wire round trip at 12k ids: {rt:.3f} ms (goal <= "
                         f"{PREFILL_GOAL_MS} ms: {'met' if rt <= PREFILL_GOAL_MS else 'NOT met'}, "
                         f"{rt / PREFILL_GOAL_MS:.2f}x the budget)")
    for c in order:
        if "prefill_vs_stock" in cases[c]:
            lines.append(f"- prefill with TensorRT-LLM's dataclass vs the stock rebuild at {c}: "
                         f"{cases[c]['prefill_vs_stock']:.2f}x the stock time")
    per_k = [f"{c}: {cases[c]['prefill_us_per_1k_tokens']:.1f} us" for c in order
             if "prefill_us_per_1k_tokens" in cases[c]]
    if per_k:
        lines.append(f"- prefill cost per 1k ids (linearity): {', '.join(per_k)}")
    for c in order:
        if "mrope_speedup" in cases[c]:
            x = cases[c]["mrope_speedup"]
            lines.append(f"- mRoPE vs HF at {c}: {x:.1f}x (goal >= {MROPE_GOAL_X:.0f}x: "
                         f"{'met' if x >= MROPE_GOAL_X else 'NOT met'})")
    for c in order:
        if "wire_fraction" in cases[c]:
            f = cases[c]["wire_fraction"]
            lines.append(f"- wire bytes at {c}: {cases[c]['wire_bytes']} B = {f * 100:.6f}% of the "
                         f"{cases[c]['payload_bytes'] / 1e6:.0f} MB embedding payload (goal <= 0.001%: "
                         f"{'met' if f <= WIRE_GOAL_FRACTION else 'NOT met'})")
    return "\n".join(lines)


#: goals of the hooks' table: multiples of F at 12k ids, ms and ratio at 384 groups
ENCODER_GOAL_F = 2.0
PREFILL_GOAL_F = 1.0
MANY_GROUPS = "768f-official"


def _hook_ratios(rows: dict) -> dict:
    def med(key):
        return rows.get(key, {}).get("median_ms")

    out = {}
    for key, unit in (("hooks:encoder_hook", "hooks:F_fromiter"), ("hooks:prefill_hook", "hooks:F_fromiter"),
                      ("hooks:prefill_hook_dataclass", "hooks:prefill_stock")):
        if med(key) and med(unit):
            out[key] = med(key) / med(unit)
    for source in ("list", "array"):
        ours, hf = med(f"mrope-io:mrope_ours_{source}"), med(f"mrope-io:mrope_hf_{source}")
        if ours and hf:
            out[f"mrope_{source}"] = hf / ours
    return out


def format_hooks(cases: dict) -> str:
    """The hooks' whole work from the engine's input types, as multiples of F (see test_bench_hooks.py)."""
    order = sorted(cases, key=lambda c: cases[c]["tokens"] or 0)
    lines = ["| case | F (ms) | encoder hook (ms, xF) | prefill hook (ms, xF) | + TRT dataclass / stock | "
             "mRoPE list: ours / HF (ms) | mRoPE array: ours / HF (ms) |", "|---|---|---|---|---|---|---|"]
    goals = []
    for c in order:
        r, x = cases[c]["rows"], _hook_ratios(cases[c]["rows"])
        if "hooks:F_fromiter" not in r:
            continue

        def ms(key, r=r):
            v = r.get(key, {}).get("median_ms")
            return "-" if v is None else f"{v:.3f}"

        lines.append(f"| {c} | {ms('hooks:F_fromiter')} | {ms('hooks:encoder_hook')}, "
                     f"{_fmt(x.get('hooks:encoder_hook'), '{:.2f}')} | {ms('hooks:prefill_hook')}, "
                     f"{_fmt(x.get('hooks:prefill_hook'), '{:.2f}')} | "
                     f"{_fmt(x.get('hooks:prefill_hook_dataclass'), '{:.2f}x')} | "
                     f"{ms('mrope-io:mrope_ours_list')} / {ms('mrope-io:mrope_hf_list')} "
                     f"({_fmt(x.get('mrope_list'), '{:.1f}x')}) | {ms('mrope-io:mrope_ours_array')} / "
                     f"{ms('mrope-io:mrope_hf_array')} ({_fmt(x.get('mrope_array'), '{:.1f}x')}) |")
        goals += _hook_goals(c, r, x)
    return "\n".join(lines + ["", "Goals:"] + goals)


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _hook_goals(case: str, rows: dict, x: dict) -> list:
    out = []
    if case == "720p40":
        for key, goal, label in (("hooks:encoder_hook", ENCODER_GOAL_F, "encoder hook from a list"),
                                 ("hooks:prefill_hook", PREFILL_GOAL_F, "prefill hook")):
            if key in x:
                out.append(f"- {label} at 12k ids: {x[key]:.2f} F (goal <= {goal:.0f} F: {_verdict(x[key] <= goal)})")
    for source in ("list", "array"):
        if f"mrope_{source}" in x:
            v = x[f"mrope_{source}"]
            out.append(f"- mRoPE from a {source} at {case}: {v:.1f}x HF (goal >= {MROPE_GOAL_X:.0f}x: "
                       f"{_verdict(v >= MROPE_GOAL_X)})")
    if case == MANY_GROUPS:
        p = rows.get("hooks:prefill_hook", {}).get("median_ms")
        if p is not None:
            out.append(f"- prefill hook at 384 groups: {p:.3f} ms (goal <= {PREFILL_GOAL_MS} ms: "
                       f"{_verdict(p <= PREFILL_GOAL_MS)})")
        if "hooks:prefill_hook_dataclass" in x:
            v = x["hooks:prefill_hook_dataclass"]
            out.append(f"- prefill hook + TRT dataclass at 384 groups: {v:.2f}x the stock rebuild (goal <= 1: "
                       f"{_verdict(v <= 1.0)})")
    return out


def plot(cases: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = sorted((e["tokens"], e["rows"]) for e in cases.values() if e["tokens"])
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in (("prefill:prefill_mm_handoff", "prefill, mm-handoff (layer)"),
                       ("prefill:prefill_mm_handoff_dataclass", "prefill, mm-handoff + TRT dataclass"),
                       ("prefill:prefill_stock_trtllm", "prefill, stock TensorRT-LLM"),
                       ("encoder:encoder_mm_handoff", "encoder, mm-handoff")):
        xs = [t for t, r in pts if key in r]
        ys = [r[key]["median_ms"] for t, r in pts if key in r]
        if xs:
            ax.plot(xs, ys, marker="o", label=label)
    _finish_log_plot(fig, ax, path, "median per request (ms)", "mm-handoff per-request overhead (CPU, 1 thread)")


def _finish_log_plot(fig, ax, path: str, ylabel: str, title: str) -> None:
    """Log-log axes against the prompt length, a grid and a legend, saved to ``path``."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("prompt length (ids)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


_SCALE_ROLES = ("unit", "encoder hook", "prefill hook")


def scale_rows(data: dict) -> list:
    """The scale benchmark per request size: ids, runs, items, and per role its median/min ms."""
    by_case: dict = {}
    for bench in data["benchmarks"]:
        group, _, case = bench["group"].partition("/")
        info = bench.get("extra_info", {})
        if group != "scale" or info.get("role") not in _SCALE_ROLES:
            continue
        row = by_case.setdefault(case, {"case": case, "tokens": info["tokens"], "runs": info["runs"],
                                        "items": info["items"]})
        row[info["role"]] = {"median_ms": bench["stats"]["median"] * 1e3, "min_ms": bench["stats"]["min"] * 1e3}
    return sorted(by_case.values(), key=lambda r: (r["tokens"], r["runs"]))


def format_scale(rows: list) -> str:
    """Per request size: each hook's median (and minimum) in us, as multiples of F, and the requests per
    second one core sustains on that hook alone (1 / median)."""
    lines = ["| request | ids | runs | F (us) | encoder hook: us (min), xF, req/s "
             "| prefill hook: us (min), xF, req/s |", "|---|---|---|---|---|---|"]
    for r in rows:
        f = r.get("unit", {}).get("median_ms")
        cells = []
        for role in ("encoder hook", "prefill hook"):
            m = r.get(role)
            if m is None or not f:
                cells.append("-")
                continue
            cells.append(f"{m['median_ms'] * 1e3:.1f} ({m['min_ms'] * 1e3:.1f}), {m['median_ms'] / f:.2f} F, "
                         f"{1e3 / m['median_ms']:,.0f}")
        lines.append(f"| {r['case']} | {r['tokens']:,} | {r['runs']} | {f * 1e3:.1f} | {cells[0]} | {cells[1]} |"
                     if f else f"| {r['case']} | {r['tokens']:,} | {r['runs']} | - | - | - |")
    return "\n".join(lines)


def plot_scale(rows: list, path: str) -> None:
    """Cost per request against ids, log-log, one line per hook and F (the prompt list converted at all)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for role, label in (("encoder hook", "encoder hook"), ("prefill hook", "prefill hook"),
                        ("unit", "F: the id list to int32")):
        pts = [(r["tokens"], r[role]["median_ms"] * 1e3) for r in rows if role in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                linestyle=":" if role == "unit" else "-")
    for r in rows:
        ax.annotate(r["case"], (r["tokens"], r["prefill hook"]["median_ms"] * 1e3), fontsize=7,
                    textcoords="offset points", xytext=(3, -10)) if "prefill hook" in r else None
    _finish_log_plot(fig, ax, path, "median per request (us)", "mm-handoff hooks: cost per request (CPU, 1 thread)")


def run_bench(args) -> int:
    from mm_handoff.errors import UsageError

    where = find_benchmarks()
    if where is None:
        raise UsageError("the benchmark suite (benchmarks/) is not next to this installation; "
                       "run from a clone after `make setup`")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [sys.executable, "-m", "pytest", str(where), "-q", "-p", "no:cacheprovider",
               f"--benchmark-json={out}", "--benchmark-columns=min,median,rounds"]
        if getattr(args, "quick", False):
            cmd += ["-k", "720p40"]
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   TOKENIZERS_PARALLELISM="false", RAYON_NUM_THREADS="1")
        print("running the CPU suite (pytest-benchmark, 1 thread) ...", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, env=env, cwd=str(where.parent), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        if proc.returncode != 0 or not os.path.exists(out):
            sys.stderr.write(proc.stdout[-4000:])
            raise UsageError(f"the benchmark suite failed (exit {proc.returncode})")
        data = json.load(open(out))
    cases = summarize(data)
    print(f"machine: {data['machine_info'].get('cpu', {}).get('brand_raw', '?')}, "
          f"{data['machine_info'].get('python_version')}, numpy {__import__('numpy').__version__}")
    print(format_table(cases))
    print()
    print(format_hooks(cases))
    rows = scale_rows(data)
    if rows:
        print()
        print(format_scale(rows))
    if getattr(args, "json", None):
        with open(args.json, "w") as fh:
            json.dump({"cases": cases, "machine_info": data["machine_info"]}, fh, indent=1)
    if getattr(args, "plot", None):
        plot(cases, args.plot)
        print(f"plot saved to {args.plot}")
        if rows:
            scale_path = os.path.splitext(args.plot)[0] + "_scale.png"
            plot_scale(rows, scale_path)
            print(f"scale plot saved to {scale_path}")
    return 0
