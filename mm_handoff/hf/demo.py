"""``mm-handoff demo``: TensorRT-LLM #20138 end to end, on a tiny random Qwen3-VL, on the CPU.

The scenario of the bug report: a synthetic 10 s, 24 fps clip; 40 uniformly spaced frames passed
with their metadata (fps, total_num_frames, duration, frames_indices); ``do_sample_frames=False``.
One request runs three ways and the demo prints them side by side:

- ``aggregated``: the HF processor + the whole model (what a single engine does);
- ``stock``: today's TensorRT-LLM E/PD: the PD side rebuilds the prompt from text (one pad run per
  video, no timestamps) and slices the encoder's mRoPE ids to it; the shared validator rejects it,
  and with the validator off it runs and produces different tokens;
- ``fixed``: mm-handoff: the encoder's layout travels in its wire form, the PD side decodes it,
  validates it and prefills exactly the aggregated prompt: bitwise equal hidden states.

The model is random (tiny, seeded), so its tokens mean nothing; equality is what matters.
"""

from __future__ import annotations

import json
import sys
import time

SOURCE_FPS = 24.0
SOURCE_SECONDS = 10.0
#: the reference prompt (15 ids before expansion); the bug report's script asks for JSON events instead
PROMPT = "Describe this video."
REPORT_PROMPT = 'List the events as JSON {"events": [{"start_s", "end_s", "description"}]}.'


def demo_request(frames: int, height: int, width: int, fps: float = SOURCE_FPS, prompt: str = PROMPT):
    """The bug report's input: ``frames`` uniformly spaced frames of a 10 s clip, with metadata."""
    import numpy as np

    from .processors import synthetic_clip, video_messages

    total = int(round(SOURCE_SECONDS * fps))
    indices = np.linspace(0, total - 1, frames).astype(int).tolist()
    video, meta = synthetic_clip(frames, height, width, fps=fps, frames_indices=indices, total_num_frames=total)
    return {"messages": video_messages(prompt), "videos": video, "video_metadata": meta}


def _progress(stream):
    start = time.perf_counter()
    labels = {"load": "building the real tokenizer, the HF processor and a tiny random model",
              "aggregated": "aggregated: processor + vision + language model",
              "encode": "encoder: processor + vision tower -> embeddings + layout",
              "epd": "E/PD fixed: decode the wire form, validate, prefill + decode",
              "epd-rebuild": "E/PD fixed (rebuild fallback): ids from prompt + grid + metadata",
              "epd-stock/validate": "E/PD stock, validator on",
              "epd-stock/run": "E/PD stock, validator off: one run, sliced mRoPE"}

    def report(stage, info):
        if info.get("status") == "start" and stage in labels:
            stream.write(f"[{time.perf_counter() - start:6.1f}s] {labels[stage]} ...\n")
            stream.flush()
    return report


def _ts(values) -> str:
    if values is None:
        return "none"
    if len(values) <= 6:
        return " ".join(f"{v:.1f}" for v in values)
    return " ".join(f"{v:.1f}" for v in values[:3]) + " ... " + " ".join(f"{v:.1f}" for v in values[-2:])


def _toks(tokens, n: int = 4) -> str:
    return " ".join(str(t) for t in tokens[:n]) + (" ..." if len(tokens) > n else "")


def format_report(r: dict) -> str:
    agg, stock = r["layouts"]["aggregated"], r["layouts"]["stock"]
    L = r["lengths"]

    def runs(lay):
        lens = lay["trtllm"]["multimodal_run_lengths"]
        return f"{len(lens)} x {lens[0]}" if len(set(lens)) == 1 else str(lens)

    def markers(lay):
        return f"{len(lay['vision_start'])} / {len(lay['vision_end'])}"

    rows = [
        ("prompt length", L["aggregated"], L["epd-stock"], L["epd"]),
        ("pad runs", runs(agg), runs(stock), runs(agg)),
        ("<|vision_start|> / <|vision_end|>", markers(agg), markers(stock), markers(agg)),
        ("timestamps (s)", _ts(agg["items"][0]["timestamps"]), _ts(stock["items"][0]["timestamps"]),
         _ts(agg["items"][0]["timestamps"])),
        ("mRoPE delta", r["mrope"]["aggregated_delta"], r["mrope"]["epd-stock_delta"], r["mrope"]["epd_delta"]),
        ("validator", "-", r["validator"]["epd-stock (validator on)"].split(":")[0], r["validator"]["epd"]),
        ("first greedy tokens", _toks(r["tokens"]["aggregated"]), _toks(r["tokens"]["epd-stock"]),
         _toks(r["tokens"]["epd"])),
        ("same tokens as aggregated", "-", r["tokens_equal"]["epd-stock"], r["tokens_equal"]["epd"]),
        ("hidden states bitwise equal", "-", r["hidden_bitwise_equal"]["epd-stock"], r["hidden_bitwise_equal"]["epd"]),
        ("max |logit diff|", "-", f"{r['max_abs_logit_diff']['epd-stock']:.3g}",
         f"{r['max_abs_logit_diff']['epd']:.3g}"),
    ]
    head = ("", "aggregated", "E/PD stock (TRT-LLM today)", "E/PD fixed (mm-handoff)")
    width = [max(len(str(row[i])) for row in rows + [head]) for i in range(4)]
    width = [min(w, 40) for w in width]

    def line(row):
        return "  ".join(str(c)[:40].ljust(width[i]) for i, c in enumerate(row))

    out = [f"family {r['family']} ({r['convention']} convention): one video, grid {agg['items'][0]['grid_thw']}",
           line(head), line(tuple("-" * w for w in width))]
    out += [line(row) for row in rows]
    ctx = r.get("first_difference_context") or {}
    if r["first_difference"] is not None:
        out.append("")
        out.append(f"first differing prompt index: {r['first_difference']} "
                   f"(aggregated - stock = {L['aggregated_minus_stock']} tokens)")
        out.append(f"  aggregated from {ctx.get('starts_at')}: {' '.join(ctx.get('aggregated', []))}")
        out.append(f"  stock      from {ctx.get('starts_at')}: {' '.join(ctx.get('epd-stock', []))}")
    out.append("")
    out.append(f"validator on the stock path: {r['validator']['epd-stock (validator on)']}")
    verdict = ("FIXED: E/PD equals aggregated bitwise" if r["hidden_bitwise_equal"]["epd"] and r["tokens_equal"]["epd"]
               else "NOT EQUAL")
    out.append(f"result: {verdict}; stock path {'caught' if r['stock_error'] else 'NOT caught'} by the validator")
    return "\n".join(out)


def run_demo(args) -> int:
    from ..errors import UsageError

    try:
        from .report import run_three_modes
    except ImportError as exc:
        raise UsageError(f"the demo needs the hf extra (pip install 'mm-handoff[hf]'): {exc}") from None
    height, width = (720, 1280) if args.hd else (args.height, args.width)
    if args.frames < 1 or height < 32 or width < 32:
        raise UsageError("--frames must be >= 1 and the frame size at least 32x32")
    stream = sys.stderr
    stream.write(f"mm-handoff demo: {args.frames} frames of a {SOURCE_SECONDS:.0f} s {args.fps:g} fps clip at "
                 f"{width}x{height}, family {args.family}\n")
    t0 = time.perf_counter()
    req = demo_request(args.frames, height, width, args.fps, REPORT_PROMPT if args.report_prompt else PROMPT)
    report = run_three_modes(args.family, messages=req["messages"], videos=req["videos"],
                             video_metadata=req["video_metadata"], max_new_tokens=args.max_new_tokens,
                             include_rebuild=True, progress=_progress(stream), request_id="demo-0",
                             do_sample_frames=False)
    report["wall_s"] = round(time.perf_counter() - t0, 2)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(format_report(report))
        print(f"({report['wall_s']:.1f} s)")
    ok = report["hidden_bitwise_equal"]["epd"] and report["tokens_equal"]["epd"] and report["stock_error"]
    return 0 if ok else 1
