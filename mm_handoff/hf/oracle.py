"""HF's processor as a differential oracle: requests shaped the way users send them, run through the real
processor, and what mm-handoff answers on each.

:func:`requests` draws requests from a seed: text of every kind around and between placeholders (spaces,
punctuation, digits, newlines, CJK, emoji, ``<``/``>`` and markup), bare placeholders or template trios or
chat-template messages in any order, zero to several images and videos, and video metadata as Python,
NumPy and torch numbers with frame indices as lists, tuples and arrays. A request is plain JSON (the numbers
carry their type by name), so a subprocess with another transformers runs the same request
(``replace_wrapper``, transformers <= 5.9) and :mod:`mm_handoff.hf.corpus` keeps it as data.

:func:`run_hf` is the oracle: the processor's ids, grids and ``get_rope_index``. :func:`compare` is what
mm-handoff must answer: ``derive_layout`` of HF's ids, ``rebuild_token_ids`` of the un-expanded prompt equal to
HF's ids, the mRoPE ids and delta equal to HF's, the accept step's prompt check; and, without a tokenizer,
the same ids or a typed error, never other ids. Where HF itself refuses a request (a tuple of frame indices:
its ``indices.tolist()`` fails), the case is reported as refused and skipped.
"""

from __future__ import annotations

import random
import types
from typing import Any

import numpy as np

#: bump when the shape of a request or of a result changes
ORACLE_VERSION = 1

#: text pieces a user's prompt is made of, around and between placeholders
TEXT_PIECES = (
    " ", "  ", "\n", "\n\n", " \n", ".", ",", ":", ";", "!", "?", "(", ")", "[", "]", "{", "}", '"', "'", "<", ">",
    "<b>", "</b>", "<<", ">>", "->", "=", "*", "#", "`", "-", "/", "\\", "|", "<|", "|>", "$", "%", "&", "~", "_",
    "1", "42", "3.5", "0.", "a", "x", "Look at this", " video", "Describe", "clip:", "Watch this clip:",
    "图片", "中文 ", "视频：", "😀", "🎬 ", "é", "e\u0301", "\t", "x<", "<x", "'s", " it's", "12:30", "...", "—",
)

#: number types video metadata may hold (``fps``), by name
FPS_TYPES = ("float", "int", "np.float16", "np.float32", "np.float64", "np.int64", "torch.float32",
             "torch.float64", "none")
#: containers of frame indices, by name
INDEX_TYPES = ("list", "list.np.int64", "list.np.int32", "np.int64", "np.int32", "torch.int64", "tuple")
FPS_VALUES = (24.0, 30.0, 29.97, 25.0, 23.976, 59.94, 2.0, 1.0, 7.5, 12.5, 60.0)


def _typed(kind: str, value):
    """A JSON value as the number or container named by ``kind``."""
    if kind in ("none",):
        return None
    if kind == "float":
        return float(value)
    if kind == "int":
        return int(round(value))
    if kind.startswith("np.") and not isinstance(value, list):
        return np.dtype(kind[3:]).type(value if "float" in kind else int(round(value)))
    if kind.startswith("torch."):
        import torch

        return torch.tensor(value, dtype=getattr(torch, kind[6:]))
    if kind == "list":
        return list(value)
    if kind == "tuple":
        return tuple(value)
    if kind.startswith("list.np."):
        return [np.dtype(kind[8:]).type(v) for v in value]
    return np.asarray(value, dtype=kind[3:])  # np.int64 / np.int32 arrays of frame indices


def video_metadata(video: dict) -> dict:
    """A request's video's metadata in the types it names (what the user hands the processor)."""
    fps = video["fps"]
    return {"fps": _typed(fps["type"], fps["value"]),
            "frames_indices": _typed(video["indices"]["type"], video["indices"]["values"]),
            "total_num_frames": video["total"]}


def _text(rng: random.Random, most: int) -> str:
    return "".join(rng.choice(TEXT_PIECES) for _ in range(rng.randint(0, most)))


def _video(rng: random.Random, temporal: int) -> dict:
    frames = rng.randint(1, 3 * temporal)
    step, start = rng.randint(1, 40), rng.randint(0, 90)
    indices = [start + i * step for i in range(frames)]
    fps_type = rng.choice(FPS_TYPES)
    fps = rng.choice(FPS_VALUES)
    if fps_type in ("int", "np.int64"):
        fps = float(max(1, round(fps)))
    return {"n": frames, "h": rng.choice((32, 48, 64)), "w": rng.choice((32, 64)),
            "fps": {"type": fps_type, "value": fps},
            "indices": {"type": rng.choice(INDEX_TYPES), "values": indices}, "total": indices[-1] + 1}


def _image(rng: random.Random) -> dict:
    return {"h": rng.choice((28, 32, 48, 64)), "w": rng.choice((32, 48, 64, 96))}


def requests(family: str, convention: str, count: int, seed: int, *, chat_template) -> list:
    """``count`` requests for ``family`` under ``convention``, drawn from ``seed`` (the same seed, the same
    requests). ``chat_template(messages) -> str`` renders the messages form."""
    from ..adapters.families import FAMILIES

    temporal = FAMILIES[family].default_temporal_patch_size
    rng = random.Random(f"{family}/{convention}/{seed}")
    out = []
    for _ in range(count):
        kinds = [rng.choice("iv") for _ in range(rng.choice((0, 1, 1, 1, 2, 2, 3, 4)))]
        images, videos = [], []
        for k in kinds:
            (images.append(_image(rng)) if k == "i" else videos.append(_video(rng, temporal)))
        if rng.random() < 0.35:  # chat-template messages: the template's trios, text parts in any order
            parts: list = [{"type": "image" if k == "i" else "video"} for k in kinds]
            for _ in range(rng.randint(0, 3)):
                parts.insert(rng.randint(0, len(parts)), {"type": "text", "text": _text(rng, 4) or "Describe"})
            messages = [{"role": "user", "content": parts}]
            if rng.random() < 0.3:
                messages.insert(0, {"role": "system", "content": _text(rng, 3)})
            prompt = chat_template(messages)
        else:  # a raw prompt: bare placeholders or trios, text touching them on either side
            prompt = _text(rng, 4)
            for k in kinds:
                pad = "<|image_pad|>" if k == "i" else "<|video_pad|>"
                prompt += pad if rng.random() < 0.5 else f"<|vision_start|>{pad}<|vision_end|>"
                prompt += _text(rng, 3)
        out.append({"prompt": prompt, "images": images, "videos": videos})
    return out


def _pixels(h: int, w: int, n: int | None = None) -> np.ndarray:
    shape = (h, w, 3) if n is None else (n, h, w, 3)
    return np.full(shape, 127, dtype=np.uint8)


def rope_index(merge_size: int):
    """HF's ``Qwen3VLModel.get_rope_index`` without a model (it reads only the merge size)."""
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    ns = types.SimpleNamespace(config=types.SimpleNamespace(
        vision_config=types.SimpleNamespace(spatial_merge_size=merge_size)))
    ns.get_vision_position_ids = types.MethodType(Qwen3VLModel.get_vision_position_ids, ns)
    return types.MethodType(Qwen3VLModel.get_rope_index, ns)


def run_hf(processor, request: dict, *, merge_size: int = 2) -> dict:
    """HF's answer to one request: ids, grids, mm token types, the printed timestamps' metadata and the mRoPE
    ids and delta; ``{"refused": "<error type>: <message>"}`` where the processor itself refuses it."""
    call: dict[str, Any] = {"text": [request["prompt"]], "return_tensors": "pt", "return_mm_token_type_ids": True}
    if request["images"]:
        call["images"] = [_pixels(im["h"], im["w"]) for im in request["images"]]
    if request["videos"]:
        call["videos"] = [_pixels(v["h"], v["w"], v["n"]) for v in request["videos"]]
        call["video_metadata"] = [video_metadata(v) for v in request["videos"]]
        call["do_sample_frames"] = False
        call["return_metadata"] = True
    try:
        res = processor(**call)
    except Exception as exc:  # HF refuses the request: reported, not compared
        return {"refused": f"{type(exc).__name__}: {exc}"[:300]}
    image_grid = res.get("image_grid_thw")
    video_grid = res.get("video_grid_thw")
    try:
        pos, delta = rope_index(merge_size)(res["input_ids"], res["mm_token_type_ids"], image_grid_thw=image_grid,
                                            video_grid_thw=video_grid)
    except Exception as exc:  # HF's model would refuse it
        return {"refused": f"get_rope_index: {type(exc).__name__}: {exc}"[:300], "prompt": request["prompt"]}
    printed = []  # per video, the texts the processor printed: its own expression on the metadata it used
    temporal = getattr(processor.video_processor, "temporal_patch_size", 2)
    for meta, (t, _, _) in zip(res.get("video_metadata") or [], video_grid.tolist() if video_grid is not None
                               else [], strict=True):
        seconds = processor._calculate_timestamps(meta.frames_indices, meta.fps, temporal)
        printed.append([f"<{s:.1f} seconds>" for s in seconds[:t]])
    return {"input_ids": res["input_ids"][0].tolist(),
            "image_grid_thw": image_grid.tolist() if image_grid is not None else [],
            "video_grid_thw": video_grid.tolist() if video_grid is not None else [],
            "mrope": pos[:, 0, :].tolist(), "delta": int(delta.reshape(-1)[0]), "timestamps": printed}


_TRIO, _PAD = "<|vision_start|><|video_pad|><|vision_end|>", "<|video_pad|>"


def out_of_order(adapter, prompt: str) -> bool:
    """transformers <= 5.9 (``replace_wrapper``, the Qwen processor) gives each video the first trio left, and a
    bare ``<|video_pad|>`` only when none is: a trio after a bare pad gets an earlier video than the pad."""
    if adapter.convention != "replace_wrapper" or getattr(adapter, "fixed_convention", None) is not None:
        return False
    marked = prompt.replace(_TRIO, "\0")  # every trio as one character
    bare = marked.find(_PAD)
    return bare != -1 and "\0" in marked[bare:]


def compare(adapter, bare_adapter, tokenizer, request: dict, hf: dict) -> list:
    """What differs between mm-handoff's answers and HF's on one request (empty: none).

    ``adapter`` has the tokenizer; ``bare_adapter`` is the same family without one (the released vocabulary's
    facts only; None to skip): it must give HF's ids too, or a typed error naming why, never other ids.
    (long: one check after another, each naming what differs.)
    """
    from ..adapters.timestamps import format_timestamp
    from ..errors import HandoffError

    if "refused" in hf:
        return []
    ids = hf["input_ids"]
    grids = {"image_grid_thw": hf["image_grid_thw"], "video_grid_thw": hf["video_grid_thw"]}
    metas = [video_metadata(v) for v in request["videos"]]
    raw = tokenizer(request["prompt"], add_special_tokens=False)["input_ids"]
    if out_of_order(adapter, request["prompt"]):  # HF's own ids hold the videos out of order: refused, typed
        try:
            adapter.rebuild_token_ids(raw, **grids, video_metadata=metas)
        except HandoffError:
            return []
        return ["a trio after a bare <|video_pad|> (transformers <= 5.9 fills it first) is not refused"]
    problems = []
    try:
        layout = adapter.derive_layout(ids, **grids)
    except HandoffError as exc:
        return [f"derive_layout refuses HF's ids: {exc}"]
    if layout.token_ids.tolist() != ids:
        problems.append("derive_layout changed the ids")
    ours = [[format_timestamp(t) for t in it.timestamps] for it in layout.items if it.modality == "video"]
    if ours != hf["timestamps"]:
        problems.append(f"timestamps differ: {ours} vs HF {hf['timestamps']}")
    pos, delta = adapter.mrope_positions(ids, **grids)
    if pos.tolist() != hf["mrope"] or int(delta) != hf["delta"] or layout.mrope_position_delta != hf["delta"]:
        problems.append(f"mRoPE differs (delta {int(delta)} vs HF {hf['delta']})")
    try:
        rebuilt = adapter.rebuild_token_ids(raw, **grids, video_metadata=metas).tolist()
        if rebuilt != ids:
            at = next((i for i, (a, b) in enumerate(zip(rebuilt, ids, strict=False)) if a != b),
                      min(len(rebuilt), len(ids)))
            problems.append(f"rebuild_token_ids differs at {at}: {rebuilt[at:at + 4]} vs HF {ids[at:at + 4]}")
    except HandoffError as exc:
        problems.append(f"rebuild_token_ids refuses: {exc}")
    try:
        adapter.check_prompt(layout, raw)
        if metas:
            adapter.check_video_metadata(layout, metas)
    except HandoffError as exc:
        problems.append(f"the accept step's checks refuse HF's request: {exc}")
    if bare_adapter is None:  # (Cosmos3-Edge: its vocabulary is not public, the Qwen3 tokenizer stands in)
        return problems
    try:
        bare = bare_adapter.rebuild_token_ids(raw, **grids, video_metadata=metas).tolist()
        if bare != ids:
            problems.append("without a tokenizer rebuild_token_ids gives other ids than HF (not a typed error)")
    except HandoffError:
        pass  # a typed error: the side lacks what exactness needs
    try:
        bare_adapter.derive_layout(ids, **grids)
    except HandoffError as exc:
        problems.append(f"without a tokenizer derive_layout refuses HF's ids: {exc}")
    return problems
