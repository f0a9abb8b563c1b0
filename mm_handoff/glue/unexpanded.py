"""What an engine that expands the placeholders itself needs from a layout (vLLM's precomputed-embeddings
path and SGLang's EPD rebuild both do): the prompt before expansion, HF's per-group timestamps checked
against the layout, and the ``mm_processor_kwargs`` key the layout rides under to the in-engine check."""

from __future__ import annotations

import numpy as np

from ..adapters.base import typed_adapter
from ..adapters.timestamps import format_timestamp
from ..errors import EmbeddingCountError, GridMismatchError, HandoffError
from ..layout import HandoffLayout
from ..layout.items import IMAGE
from ..layout.spec import PAD_ONLY
from ..reading import plain_sequence, video_metadata_of

#: the ``mm_processor_kwargs`` key that carries the encoder's layout (wire form) to the in-engine check
LAYOUT_KWARG = "mm_handoff_layout"


def raw_prompt_ids(layout, *, limits=None, request_id=None) -> np.ndarray:
    """The prompt before expansion: each item's span back to one placeholder. ``layout``: a
    :class:`~mm_handoff.layout.HandoffLayout` or its wire form (decoded within ``limits``).

    A video's span runs from its first timestamp to its last group's ``<|vision_end|>``; it becomes
    ``<|video_pad|>`` under ``pad_only`` (the template's outer markers are still around it) and the
    whole ``<|vision_start|><|video_pad|><|vision_end|>`` trio under ``replace_wrapper``.

    A video whose first ``<`` HF's tokenizer merged with the text before it (``Ġ<`` after a space) has no
    such prompt: the text's own last token is inside the merged one. An engine that expands placeholders
    token by token cannot give HF's ids there, so that is a typed error naming the item.
    """
    if not isinstance(layout, HandoffLayout):
        if not isinstance(layout, (dict, str, bytes)):
            raise HandoffError("layout", "a HandoffLayout or its wire form", type(layout).__name__,
                               request_id=request_id)
        layout = HandoffLayout.from_wire(layout, limits=limits, request_id=request_id)
    spec, ids = layout.spec, layout.token_ids
    parts, cursor = [], 0
    for k, item in enumerate(layout.items):
        if item.modality == IMAGE:
            lo, hi, piece = item.first_offset, item.end, [spec.image_pad]
        else:
            lo = int(item.span_array[0, 0]) if item.span_array is not None else item.first_offset - 1
            if item.span_array is not None and spec.timestamps is not None and ids[lo] != spec.timestamps.open:
                raise HandoffError(f"items[{k}] first timestamp", "'<' as a token of its own",
                                   f"token {int(ids[lo])}, '<' merged with the text before it", request_id=request_id,
                                   hint="HF tokenized the text before this video together with its first timestamp; "
                                   "an engine that expands placeholders token by token cannot give these ids "
                                   "(serve it from the expanded prompt, or put a newline before the video)")
            hi = item.end + 1
            piece = [spec.video_pad] if layout.convention == PAD_ONLY else \
                [spec.vision_start, spec.video_pad, spec.vision_end]
        parts += [ids[cursor:lo], np.asarray(piece, dtype=np.int32)]
        cursor = hi
    parts.append(ids[cursor:])
    out = np.concatenate(parts).astype(np.int32, copy=False)
    out.flags.writeable = False
    return out


def embedding_tensors(embeddings, request_id) -> list:
    """The accepted embeddings (one per item, their shapes checked) as torch tensors of floats: a tensor as
    it is, an array of floats as a tensor over it; anything else (a shape, a handle, an array of objects or
    ints) is refused by name, not converted."""
    import torch

    out = []
    for i, e in enumerate(plain_sequence(embeddings)):
        if isinstance(e, torch.Tensor) and e.dtype.is_floating_point:
            out.append(e)
        elif isinstance(e, np.ndarray) and e.dtype.kind == "f":  # in native byte order, with forward strides
            native = e if e.dtype.isnative else e.astype(e.dtype.newbyteorder("="))
            out.append(torch.from_numpy(np.ascontiguousarray(native)))
        else:
            raise EmbeddingCountError(f"embeddings[{i}]", "a tensor or an array of floats",
                                      f"{type(e).__name__} of dtype {getattr(e, 'dtype', None)}",
                                      request_id=request_id)
    return out


def video_timestamps(layout: HandoffLayout, adapter, video_metadata, request_id, *, engine: str = "vLLM",
                     limits=None) -> list:
    """Per video, HF's per-group seconds (from the metadata when given), checked against the layout (what
    vLLM's embeds path and SGLang's EPD rebuild print, ``f"<{t:.1f} seconds>"``, one per temporal group).
    The metadata's frame lists are bounded by ``limits.max_frames``, all videos together, before any is read."""
    videos = [item for item in layout.items if item.modality != IMAGE]
    snapshots = video_metadata_of(video_metadata, limits, request_id=request_id)  # read once, bounded first
    metas = snapshots if snapshots is not None else [None] * len(videos)
    if len(metas) != len(videos):
        raise HandoffError("video_metadata", f"{len(videos)} entries (one per video)", len(metas),
                           request_id=request_id)
    typed = typed_adapter(adapter, request_id=request_id)
    out = []
    for j, (item, meta) in enumerate(zip(videos, metas, strict=False)):
        printed = item.timestamps
        seconds = printed if meta is None else typed.video_timestamps(meta, j, limits=limits, request_id=request_id)
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
