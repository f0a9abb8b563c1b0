"""One description of a layout, for people and for JSON: ``mm-handoff inspect`` and the demo report.

Engine-free: it reads only the layout.
"""

from __future__ import annotations

from .contract import HandoffLayout


def layout_summary(layout: HandoffLayout) -> dict:
    """A JSON-safe description: identity, length, markers, items (grid, rows, runs, timestamps) and the
    keyword arguments TensorRT-LLM's prefill takes (without the ids)."""
    return {
        "family": layout.family,
        "convention": layout.convention,
        "length": layout.prompt_len,
        "fingerprint": layout.fingerprint(),
        "vision_start": layout.vision_start_positions.tolist(),
        "vision_end": layout.vision_end_positions.tolist(),
        "items": [
            {
                "modality": item.modality,
                "grid_thw": list(item.grid_thw),
                "embedding_length": item.embedding_length,
                "runs": [[r.offset, r.length] for r in item.runs],
                "timestamps": None if item.timestamps is None else list(item.timestamps),
                "timestamp_spans": None if item.timestamp_spans is None else [list(s) for s in item.timestamp_spans],
            }
            for item in layout.items
        ],
        "trtllm": {k: v for k, v in layout.to_disagg_prefill_inputs().items() if k != "prompt_token_ids"},
    }


def _short_runs(runs) -> str:
    if len(runs) <= 4:
        return " ".join(f"[{o},{o + n})" for o, n in runs)
    lens = {n for _, n in runs}
    size = f"{lens.pop()} each" if len(lens) == 1 else "mixed"
    return f"{len(runs)} runs ({size}) from {runs[0][0]} to {runs[-1][0] + runs[-1][1]}"


def format_layout(summary: dict) -> str:
    """:func:`layout_summary` as a few lines of text: a header, then one line per item."""
    lines = [f"family {summary['family']}  convention {summary['convention']}  length {summary['length']}  "
             f"fingerprint {summary['fingerprint']}",
             f"vision_start x{len(summary['vision_start'])}  vision_end x{len(summary['vision_end'])}"]
    for k, item in enumerate(summary["items"]):
        ts = item["timestamps"]
        ts_text = "-" if ts is None else (" ".join(f"{t:.1f}" for t in ts[:8]) + (" ..." if len(ts) > 8 else ""))
        lines.append(f"  item {k}: {item['modality']:5s} grid {item['grid_thw']}  rows {item['embedding_length']}  "
                     f"runs {_short_runs(item['runs'])}  timestamps {ts_text}")
    return "\n".join(lines)
