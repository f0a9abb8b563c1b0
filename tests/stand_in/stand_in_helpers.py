"""Test helpers for the TensorRT-LLM stand-in (NOT part of the mirrored package).

* ``FakeTokenizer``: character-level tokenizer that knows the Qwen3-VL special
  tokens and, like the real Qwen3 tokenizer, spells `` seconds`` as one token (6486), so the
  timestamp text ``<t seconds>`` is one token per character plus that one; callable like an HF tokenizer (``tok(text, return_tensors=...)`` ->
  object with ``.input_ids`` of shape ``[1, L]``), plus ``encode``.
* ``make_qwen3vl_config(...)``: a ``SimpleNamespace`` config with the fields the
  stand-in reads (the Qwen3-VL ids of the released configs and tokenizer: vision_start
  151652, vision_end 151653, image_pad 151655, video_pad 151656).
* ``make_hf_expand(tokenizer, config, transformers_v5=True)``: an ``_hf_expand``
  hook emulating the HF Qwen3-VL processor: each video becomes, per temporal
  patch, ``<{t:.1f} seconds>`` + ``<|vision_start|>`` + pads + ``<|vision_end|>``
  with HF's timestamp expression (``Qwen3VLProcessor._calculate_timestamps`` in
  transformers' ``processing_qwen3_vl.py``: the mean of each temporal patch's frame times); transformers
  >= 5.10.1 keeps the template's outer vision_start/vision_end
  (``transformers_v5=True``), older versions replace the whole trio.
  Images become one run of pads. Grids: ``t = ceil(frames / temporal_patch)``,
  ``h = H // patch_size``, ``w = W // patch_size``.
"""

import math
import re
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

import numpy as np

VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151655, 151656
SPECIAL_TOKENS = {
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|vision_start|>": VISION_START,
    "<|vision_end|>": VISION_END,
    "<|image_pad|>": IMAGE_PAD,
    "<|video_pad|>": VIDEO_PAD,
}
#: words the real Qwen3 vocabulary holds as one token, which the timestamp text uses
WORD_TOKENS = {" seconds": 6486}
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in [*SPECIAL_TOKENS, *WORD_TOKENS]) + ")")
_CHAR_BASE = 1000


class FakeTokenizer:
    """Deterministic char-level tokenizer (specials are single tokens)."""

    vocab_size = 152064

    def encode(self, text: str, add_special_tokens: bool = True, **kwargs) -> List[int]:
        ids: List[int] = []
        for piece in _SPECIAL_RE.split(text):
            if not piece:
                continue
            if piece in SPECIAL_TOKENS:
                ids.append(SPECIAL_TOKENS[piece])
            elif piece in WORD_TOKENS:
                ids.append(WORD_TOKENS[piece])
            else:
                ids.extend(_CHAR_BASE + ord(c) for c in piece)
        return ids

    def __call__(self, text: str, return_tensors: Optional[str] = None, **kwargs):
        return SimpleNamespace(input_ids=np.asarray([self.encode(text)], dtype=np.int64))


def make_qwen3vl_config(
    *,
    hidden_size: int = 8,
    deepstack_visual_indexes=(1, 2, 3),
    patch_size: int = 16,
    spatial_merge_size: int = 2,
    temporal_patch_size: int = 2,
    architecture: str = "Qwen3VLForConditionalGeneration",
    model_type: str = "qwen3_vl",
) -> SimpleNamespace:
    return SimpleNamespace(
        architectures=[architecture],
        model_type=model_type,
        image_token_id=IMAGE_PAD,
        video_token_id=VIDEO_PAD,
        vision_start_token_id=VISION_START,
        vision_end_token_id=VISION_END,
        text_config=SimpleNamespace(hidden_size=hidden_size, vocab_size=FakeTokenizer.vocab_size, dtype="bfloat16"),
        vision_config=SimpleNamespace(
            deepstack_visual_indexes=list(deepstack_visual_indexes),
            patch_size=patch_size,
            spatial_merge_size=spatial_merge_size,
            temporal_patch_size=temporal_patch_size,
        ),
    )


def hf_timestamps(frames_indices: List[int], fps: float, merge_size: int) -> List[float]:
    """HF's per-temporal-patch timestamps: midpoint of first and last frame, exact float order."""
    idx = list(frames_indices)
    while len(idx) % merge_size:
        idx.append(idx[-1])
    secs = [i / fps for i in idx]
    return [(secs[i] + secs[i + merge_size - 1]) / 2 for i in range(0, len(secs), merge_size)]


def make_hf_expand(tokenizer: FakeTokenizer, config: Any, *, transformers_v5: bool = True):
    vc = config.vision_config
    merge_unit = vc.spatial_merge_size**2

    def grid_of(frames, temporal: int):
        first = np.asarray(frames[0])
        h, w = first.shape[0] // vc.patch_size, first.shape[1] // vc.patch_size
        return [max(math.ceil(len(frames) / temporal), 1), h, w]

    def hf_expand(text: str, mm_data: Dict[str, Any]) -> Dict[str, Any]:
        videos = list(mm_data.get("video") or [])
        images = list(mm_data.get("image") or [])
        video_grids, image_grids = [], []
        out = text
        for image in images:
            g = grid_of([image], 1)
            image_grids.append(g)
            out = out.replace("<|image_pad|>", "<|IMG|>" * (g[1] * g[2] // merge_unit), 1)
        for video in videos:
            frames = video.frames
            meta = dict(video.metadata or {})
            g = grid_of(frames, vc.temporal_patch_size)
            video_grids.append(g)
            fps = meta.get("fps") or 24
            indices = list(meta.get("frames_indices") or range(len(frames)))
            stamps = hf_timestamps(indices, fps, vc.temporal_patch_size)
            pads = "<|VID|>" * (g[1] * g[2] // merge_unit)
            groups = "".join(f"<{t:.1f} seconds><|vision_start|>{pads}<|vision_end|>" for t in stamps[: g[0]])
            if transformers_v5:
                out = out.replace("<|video_pad|>", groups, 1)
            else:
                out = out.replace("<|vision_start|><|video_pad|><|vision_end|>", groups, 1)
        out = out.replace("<|IMG|>", "<|image_pad|>").replace("<|VID|>", "<|video_pad|>")
        result: Dict[str, Any] = {"input_ids": np.asarray([tokenizer.encode(out)], dtype=np.int64)}
        if video_grids:
            result["video_grid_thw"] = np.asarray(video_grids, dtype=np.int64)
        if image_grids:
            result["image_grid_thw"] = np.asarray(image_grids, dtype=np.int64)
            result["pixel_values"] = np.zeros((1, 1), dtype=np.float32)
        return result

    return hf_expand
