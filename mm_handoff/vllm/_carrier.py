"""Encoder side: the request vLLM's precomputed-embeddings path needs, built from a layout.

vLLM's Qwen3-VL embeds path (``LLM(..., enable_mm_embeds=True)``) expands the placeholders itself,
so it must get the *un-expanded* prompt: one ``<|image_pad|>`` per image and one
``<|vision_start|><|video_pad|><|vision_end|>`` per video. Handing it the encoder's expanded ids is
accepted silently and expanded a second time (measured with vLLM 0.32: 238 ids become 461). The
embeddings are the vision tower's rows with the deepstack levels concatenated after them (vLLM's
``Qwen3_VisionTransformer.forward`` returns ``cat([merged] + deepstack, dim=1)``), per modality in
item order, with the grids and, for videos, HF's per-group timestamps: vLLM prints them itself with
``f"<{t:.1f} seconds>"``, the expression HF uses, so HF's unrounded values (or the values the
layout read back from the prompt, which print the same) give the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from ..adapters.base import typed_adapter
from ..adapters.timestamps import format_timestamp
from ..checks import accept_layout
from ..errors import GridMismatchError, HandoffError
from ..layout import HandoffLayout
from ..layout.items import IMAGE
from ..layout.spec import PAD_ONLY

#: the ``mm_processor_kwargs`` key that carries the encoder's layout (wire form) to the in-engine check
LAYOUT_KWARG = "mm_handoff_layout"


@attrs.frozen(eq=False)
class EmbedsRequest:
    """One request for vLLM's embeds path, and the layout it must expand to."""

    #: the un-expanded prompt (int32, read-only)
    prompt_token_ids: np.ndarray
    #: ``{"image": {...}, "video": {...}}`` as vLLM's ``multi_modal_data`` takes it
    multi_modal_data: dict
    #: the encoder's layout: what vLLM's expansion must equal
    layout: HandoffLayout

    def prompt(self, *, carry_layout: bool = False) -> dict:
        """The dict to pass to ``LLM.generate``; ``carry_layout`` adds the layout for the in-engine check."""
        out: dict[str, Any] = {"prompt_token_ids": self.prompt_token_ids.tolist(),
                               "multi_modal_data": self.multi_modal_data}
        if carry_layout:
            out["mm_processor_kwargs"] = {LAYOUT_KWARG: self.layout.to_wire()}
        return out


def raw_prompt_ids(layout: HandoffLayout) -> np.ndarray:
    """The prompt before expansion: each item's span back to one placeholder.

    A video's span runs from its first timestamp to its last group's ``<|vision_end|>``; it becomes
    ``<|video_pad|>`` under ``pad_only`` (the template's outer markers are still around it) and the
    whole ``<|vision_start|><|video_pad|><|vision_end|>`` trio under ``replace_wrapper``.
    """
    spec, ids = layout.spec, layout.token_ids
    parts, cursor = [], 0
    for item in layout.items:
        if item.modality == IMAGE:
            lo, hi, piece = item.first_offset, item.end, [spec.image_pad]
        else:
            lo = int(item.span_array[0, 0]) if item.span_array is not None else item.first_offset - 1
            hi = item.end + 1
            piece = [spec.video_pad] if layout.convention == PAD_ONLY else \
                [spec.vision_start, spec.video_pad, spec.vision_end]
        parts += [ids[cursor:lo], np.asarray(piece, dtype=np.int32)]
        cursor = hi
    parts.append(ids[cursor:])
    out = np.concatenate(parts).astype(np.int32, copy=False)
    out.flags.writeable = False
    return out


def item_embeddings(rows, deepstack: Sequence = (), item_rows: Sequence[int] | None = None) -> list:
    """Per-item tensors ``(rows_i, hidden * (1 + levels))``: the deepstack levels concatenated after the
    vision tower's rows, in the model's level order, split by ``item_rows`` (rows in sequence order)."""
    import torch

    full = torch.cat([torch.as_tensor(rows)] + [torch.as_tensor(d) for d in deepstack], dim=1)
    sizes = [int(full.shape[0])] if item_rows is None else [int(n) for n in item_rows]
    return list(torch.split(full, sizes, dim=0))


def video_timestamps(layout: HandoffLayout, adapter, video_metadata, request_id, *, engine: str = "vLLM") -> list:
    """Per video, HF's per-group seconds (from the metadata when given), checked against the layout (what
    vLLM's embeds path and SGLang's EPD rebuild print, ``f"<{t:.1f} seconds>"``, one per temporal group)."""
    videos = [item for item in layout.items if item.modality != IMAGE]
    metas = list(video_metadata) if video_metadata is not None else [None] * len(videos)
    if len(metas) != len(videos):
        raise HandoffError("video_metadata", f"{len(videos)} entries (one per video)", len(metas),
                           request_id=request_id)
    out = []
    for j, (item, meta) in enumerate(zip(videos, metas, strict=False)):
        printed = item.timestamps
        seconds = printed if meta is None else typed_adapter(adapter).video_timestamps(meta, j,
                                                            request_id=request_id)
        if seconds is None:
            raise HandoffError(f"video {j} timestamps", "video_metadata or a layout with timestamps", None,
                               request_id=request_id, hint=f"{engine} needs them for a Qwen3-VL video")
        if len(seconds) != item.grid_thw[0]:
            raise GridMismatchError(f"video {j} timestamps", f"{item.grid_thw[0]} (one per temporal group)",
                                    len(seconds), request_id=request_id)
        if printed is not None and [format_timestamp(s) for s in seconds] != [format_timestamp(s) for s in printed]:
            raise HandoffError(f"video {j} timestamps", [format_timestamp(s) for s in printed],
                               [format_timestamp(s) for s in seconds], request_id=request_id,
                               hint="the metadata is not the one the encoder's prompt was built from")
        out.append([float(s) for s in seconds])
    return out


def embeds_request(layout: HandoffLayout, embeddings: Sequence, adapter, *, video_metadata=None,
                   request_id=None) -> EmbedsRequest:
    """The embeds-path request for ``layout`` (see the module doc); checks everything it can first.

    ``embeddings``: one tensor per item in layout order, ``(rows, hidden * (1 + levels))`` (see
    :func:`item_embeddings`). ``video_metadata``: the processor's returned metadata, one per video
    (HF's timestamps are computed from it); without it the layout's printed timestamps are used.
    """
    import torch

    layout = accept_layout(layout, adapter, embeddings=list(embeddings), request_id=request_id)
    raw = raw_prompt_ids(layout)
    typed_adapter(adapter).check_prompt(layout, raw, request_id=request_id)
    data: dict[str, dict] = {}
    for modality in (IMAGE, "video"):
        picked = [(item, emb) for item, emb in zip(layout.items, embeddings, strict=True) if item.modality == modality]
        if picked:
            data[modality] = {f"{modality}_embeds": torch.cat([torch.as_tensor(e) for _, e in picked], dim=0),
                              f"{modality}_grid_thw": torch.tensor([list(i.grid_thw) for i, _ in picked])}
    if "video" in data:
        data["video"]["timestamps"] = video_timestamps(layout, adapter, video_metadata, request_id)
    return EmbedsRequest(raw, data, layout)
