"""The PD side's cost next to the peers': mm-handoff vs vLLM's and SGLang's own PD-side work, same requests.

The job on the prefill side of an E/PD handoff is the same for every engine: from a description of the
request's images and videos that came from the encoder, make the engine's inputs. mm-handoff's is the
carried layout (its wire form, already parsed from JSON) accepted (:func:`mm_handoff.accept_layout`:
decode, checksum, skew, grids, the mRoPE delta, this request's grids and embedding rows) and turned into
the engine's inputs; each peer's is its own code for that request:

- **vLLM** (0.32, ``.venv-vllm``): its multimodal processor on the embeds path
  (``Qwen3VLMultiModalProcessor`` built by vLLM's registry from a tiny checkpoint, called as the engine
  calls it: the raw prompt + ``video_embeds`` / ``image_embeds``, grids and timestamps -> the expanded
  ``prompt_token_ids`` and placeholders). mm-handoff's side: ``accept_layout`` + the ids as a list + the
  placeholder runs (vLLM computes the mRoPE ids later, in its model runner, on either path).
- **SGLang** (0.5.23, ``.venv-sglang``): ``QwenVLImageProcessor.get_mm_data`` (prompt + grids + the encoder's
  ``video_timestamps`` -> ids, one item per pad run with its embedding rows, mRoPE ids and delta).
  mm-handoff's side: ``accept_layout`` + :func:`mm_handoff.sglang.output_from_layout` (SGLang's own
  ``MultimodalProcessorOutput``: the ids, one item per pad run with its embedding rows, mRoPE ids and delta;
  the embedding rows checked per modality there, as the engine's hook checks them, not twice).

Both sides' outputs are checked equal before anything is timed. In each engine's venv, one process runs
every request; per round the two sides run back to back, alternating which goes first (interleaved, so
drift hits both alike); medians and the ratio mm-handoff / peer are reported (< 1: mm-handoff is faster).

Run everything (each engine's venv must exist: ``make test-vllm``, ``make test-sglang``)::

    .venv/bin/python benchmarks/peers.py --json docs/results/peers_cpu.json

or one engine in its venv: ``.venv-sglang/bin/python benchmarks/peers.py --engine sglang --json out.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from cases import CASES as VIDEO_CASES  # noqa: E402  (benchmarks/ is not a package)

#: one 1280x720 image at the default budget: 736x1280 after resizing -> grid [1, 46, 80], 920 pads
IMAGE_GRID = (1, 46, 80)
IMAGE_TEXT = "<|im_start|>user\n{}Describe {}.<|im_end|>\n<|im_start|>assistant\n"
VIDEO_TEXT = ("<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n"
              "<|im_start|>assistant\n")
#: width of the embedding rows handed to the peers (their PD-side processors only slice the rows)
ROW_WIDTH = 8


@dataclass(frozen=True)
class Request:
    name: str
    text: str
    images: tuple = ()
    videos: tuple = ()          # ((grid, fps, frames), ...)
    rounds: int = 50


def requests(scale: float = 1.0) -> list:
    image = "<|vision_start|><|image_pad|><|vision_end|>"
    out = [Request("1 image", IMAGE_TEXT.format(image, "this image"), images=(IMAGE_GRID,), rounds=200),
           Request("16 images", IMAGE_TEXT.format(image * 16, "these images"), images=(IMAGE_GRID,) * 16,
                   rounds=100)]
    rounds = {"720p40": 50, "768f-official": 20, "768f-720p": 5}
    for name, case in VIDEO_CASES.items():
        out.append(Request(name, VIDEO_TEXT, videos=((case.grid, case.fps, case.frames),), rounds=rounds[name]))
    return [Request(r.name, r.text, r.images, r.videos, max(1, round(r.rounds * scale))) for r in out]


# --------------------------------------------------------------------------- the request, encoder side
def encoder_side(req: Request, tokenizer, config):
    """``(adapter, layout, wire dict, raw prompt ids, per-video HF timestamps)`` built without pixels."""
    import mm_handoff

    adapter = mm_handoff.get_adapter(config, tokenizer=tokenizer)
    raw = tokenizer.encode(req.text, add_special_tokens=False)
    images = [list(g) for g in req.images] or None
    videos = [list(g) for g, _, _ in req.videos] or None
    metadata = [{"fps": fps, "frames_indices": list(range(frames)), "total_num_frames": frames}
                for _, fps, frames in req.videos] or None
    ids = adapter.rebuild_token_ids(raw, image_grid_thw=images, video_grid_thw=videos, video_metadata=metadata)
    layout = adapter.derive_layout(ids, image_grid_thw=images, video_grid_thw=videos)
    wire = json.loads(json.dumps(layout.to_wire()))
    timestamps = [adapter.video_timestamps(m, j) for j, m in enumerate(metadata or [])]
    return adapter, layout, wire, raw, timestamps


def _grids(layout, modality):
    return [list(i.grid_thw) for i in layout.items if i.modality == modality] or None


# --------------------------------------------------------------------------- the timing loop
def interleaved(ours, theirs, rounds: int) -> dict:
    """Median seconds of each side over ``rounds`` rounds, the two run back to back, first one alternating."""
    ours(), theirs()  # warm
    a, b = [], []
    gc.collect()
    for r in range(rounds):
        for side in ((ours, a), (theirs, b)) if r % 2 == 0 else ((theirs, b), (ours, a)):
            t0 = time.perf_counter()
            side[0]()
            side[1].append(time.perf_counter() - t0)
    ma, mb = statistics.median(a), statistics.median(b)
    return {"rounds": rounds, "mm_handoff_ms": round(ma * 1e3, 4), "peer_ms": round(mb * 1e3, 4),
            "ratio": round(ma / mb, 4)}


# --------------------------------------------------------------------------- SGLang
def _sglang_sides(proc, req: Request, tokenizer, config) -> tuple:
    """``(layout, mm-handoff's side, SGLang's side)`` for one request; their outputs are checked equal."""
    import numpy as np
    import torch
    from sglang.srt.managers.schedule_batch import Modality

    import mm_handoff
    import mm_handoff.sglang as glue

    adapter, layout, wire, raw, timestamps = encoder_side(req, tokenizer, config)
    images, videos = _grids(layout, "image"), _grids(layout, "video")
    emb = {}
    for modality, key in ((Modality.IMAGE, "image"), (Modality.VIDEO, "video")):
        n = sum(i.embedding_length for i in layout.items if i.modality == key)
        if n:
            emb[modality] = torch.zeros(n, ROW_WIDTH)
    meta = {"img_grid_thw": None if images is None else torch.tensor(images),
            "video_grid_thw": None if videos is None else torch.tensor(videos)}
    if timestamps:
        meta["video_timestamps"] = timestamps

    def theirs():
        return proc.get_mm_data(raw, emb, **meta)

    def ours():  # (the embedding rows: per modality in output_from_layout, as the engine's hook checks them)
        accepted = mm_handoff.accept_layout(wire, adapter, image_grid_thw=images, video_grid_thw=videos)
        return glue.output_from_layout(proc, accepted, emb, adapter)

    out, mine = theirs(), ours()  # the same inputs, or nothing is timed
    if out.input_ids != mine.input_ids or glue.output_runs(out) != glue.output_runs(mine) \
            or not np.array_equal(out.mrope_positions.numpy(), mine.mrope_positions.numpy()) \
            or not np.array_equal(out.mrope_position_delta.numpy(), mine.mrope_position_delta.numpy()) \
            or not all(a.precomputed_embeddings.shape == b.precomputed_embeddings.shape
                       for a, b in zip(out.mm_items, mine.mm_items, strict=True)):
        raise RuntimeError(f"{req.name}: SGLang's inputs differ from mm-handoff's; nothing to compare")
    return layout, ours, theirs


def run_sglang(scale: float = 1.0) -> list:
    import importlib.util

    # the tests' way of building SGLang's processor (tests/sglang_engine/conftest.py)
    spec = importlib.util.spec_from_file_location("_sglang_engine_conftest",
                                                  os.path.join(ROOT, "tests", "sglang_engine", "conftest.py"))
    assert spec is not None and spec.loader is not None
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mm_handoff_peers_") as directory:  # the tiny checkpoint
        proc, hf, config = helpers.build_processor("qwen3_vl", directory)
        for req in requests(scale):
            layout, ours, theirs = _sglang_sides(proc, req, hf.tokenizer, config)
            rows.append({"engine": "sglang", "request": req.name, "ids": layout.prompt_len,
                         "runs": len(layout.runs), **interleaved(ours, theirs, req.rounds)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


# --------------------------------------------------------------------------- vLLM
def _vllm_sides(proc, req: Request, tokenizer, config) -> tuple:
    """``(layout, mm-handoff's side, vLLM's side)`` for one request; their outputs are checked equal."""
    import numpy as np
    import torch

    import mm_handoff

    adapter, layout, wire, raw, timestamps = encoder_side(req, tokenizer, config)
    images, videos = _grids(layout, "image"), _grids(layout, "video")
    data: dict = {}
    if images:
        n = sum(i.embedding_length for i in layout.items if i.modality == "image")
        data["image"] = {"image_embeds": torch.zeros(n, ROW_WIDTH), "image_grid_thw": torch.tensor(images)}
    if videos:
        n = sum(i.embedding_length for i in layout.items if i.modality == "video")
        data["video"] = {"video_embeds": torch.zeros(n, ROW_WIDTH), "video_grid_thw": torch.tensor(videos),
                         "timestamps": timestamps}

    def theirs():
        return proc(raw, proc.info.parse_mm_data(data), hf_processor_mm_kwargs={})

    def ours():
        accepted = mm_handoff.accept_layout(wire, adapter, embedding_rows=layout.num_pads, image_grid_thw=images,
                                            video_grid_thw=videos)
        return accepted.token_id_list(), accepted.runs

    out, (ids, _) = theirs(), ours()
    placeholders = [r for ranges in out["mm_placeholders"].values() for r in ranges]
    embeds = sum(int(np.count_nonzero(np.asarray(r.is_embed))) if r.is_embed is not None else r.length
                 for r in placeholders)
    if list(out["prompt_token_ids"]) != ids or embeds != layout.num_pads:
        raise RuntimeError(f"{req.name}: vLLM's ids differ from mm-handoff's; nothing to compare")
    return layout, ours, theirs


def run_vllm(scale: float = 1.0) -> list:
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    from mm_handoff.vllm.demo import save_tiny_checkpoint

    rows = []
    with tempfile.TemporaryDirectory(prefix="mm_handoff_peers_") as directory:  # the tiny checkpoint
        _, hf, _ = save_tiny_checkpoint("qwen3_vl", directory)
        config = ModelConfig(model=directory, dtype="float32", max_model_len=4096, enable_mm_embeds=True,
                             limit_mm_per_prompt={"video": 1, "image": 16})
        proc = MULTIMODAL_REGISTRY.create_processor(config)
        for req in requests(scale):
            layout, ours, theirs = _vllm_sides(proc, req, hf.tokenizer, proc.info.get_hf_config())
            rows.append({"engine": "vllm", "request": req.name, "ids": layout.prompt_len,
                         "runs": len(layout.runs), **interleaved(ours, theirs, req.rounds)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


# --------------------------------------------------------------------------- driver
VENVS = {"vllm": ".venv-vllm", "sglang": ".venv-sglang"}


def _machine() -> dict:
    import numpy

    return {"python": platform.python_version(), "numpy": numpy.__version__, "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine()}


def table(rows: list) -> str:
    lines = ["| request | ids | pad runs | engine | mm-handoff (ms) | peer (ms) | mm-handoff / peer |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['request']} | {r['ids']:,} | {r['runs']:,} | {r['engine']} | {r['mm_handoff_ms']:.3f} | "
                     f"{r['peer_ms']:.3f} | {r['ratio']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=sorted(VENVS), help="run one engine here (in its venv)")
    parser.add_argument("--table", metavar="JSON", help="print the table of an earlier run's JSON and exit")
    parser.add_argument("--json", help="write the rows (and the machine) here")
    parser.add_argument("--rounds-scale", type=float, default=1.0, help="scale every request's rounds (smoke: 0.01)")
    args = parser.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(table(json.load(f)["rows"]))
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.engine:
        import torch

        torch.set_num_threads(1)
        rows = (run_vllm if args.engine == "vllm" else run_sglang)(args.rounds_scale)
        result = {"engine": args.engine, "machine": _machine(), "rows": rows}
    else:  # one process per engine venv, one after the other
        rows, machines = [], {}
        for engine, venv in VENVS.items():
            with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
                subprocess.run([os.path.join(ROOT, venv, "bin", "python"), os.path.abspath(__file__), "--engine",
                                engine, "--json", tmp.name, "--rounds-scale", str(args.rounds_scale)], check=True)
                part = json.load(open(tmp.name))
            rows += part["rows"]
            machines[engine] = part["machine"]
        order = [r.name for r in requests()]
        rows.sort(key=lambda r: (order.index(r["request"]), r["engine"]))
        result = {"machine": machines, "rows": rows}
        print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
