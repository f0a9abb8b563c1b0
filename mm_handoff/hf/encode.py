"""The E side of the Hugging Face reference engine: processor + vision tower + layout, on CPU.

:func:`encode` runs the real processor (which expands the prompt), then the vision tower
(``model.model.get_image_features`` / ``get_video_features(..., return_dict=True)``) for the visual
rows and, for deepstack families, the rows of every deepstack level. Rows of mixed images and videos
are put in **sequence order**: HF scatters image and video rows into one joint tensor by position, so
a video before an image contributes its rows first. The family adapter derives the
:class:`~mm_handoff.layout.HandoffLayout` (with mRoPE ids) from the expanded ids.

:func:`handoff` is what crosses the E -> PD boundary: the layout's wire form after a JSON round trip
(proof that it survives a JSON transport) plus the tensors and the rows per item.

HF caches ``model.model.rope_deltas`` on the module and reuses it when a KV cache is present or when
only ``inputs_embeds`` is passed; every entry point of the engine resets it to ``None`` before and after.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..checks import check_embedding_rows
from ..errors import EmbeddingCountError
from ..layout import HandoffLayout
from . import processors as _procs


@dataclass
class EncoderOutput:
    """What the E side produced for one request (everything the PD side may be handed)."""

    request_id: Any
    family: str
    #: the rendered (un-expanded) prompt text
    prompt: str
    #: the un-expanded prompt's ids, int32 (what a PD side would tokenize from the text)
    raw_prompt_ids: np.ndarray
    #: the processor's expanded ids, int32 (1-D)
    input_ids: np.ndarray
    #: 0 text / 1 image / 2 video per token, as the processor returned them (1-D int64)
    mm_token_type_ids: np.ndarray | None
    #: grids as lists of [t, h, w] (None when the modality is absent)
    image_grid_thw: list | None
    video_grid_thw: list | None
    #: the processor's returned video metadata (return_metadata=True), deep-copied; None without videos
    video_metadata: list | None
    #: (N, D) visual rows in prompt/sequence order across images and videos
    embeddings: torch.Tensor
    #: per deepstack level, an (N, D) tensor in the same order; empty for families without deepstack
    deepstack: list
    #: the adapter's layout of ``input_ids`` (with mRoPE ids and delta)
    layout: HandoffLayout
    #: rows per item in prompt order, as the vision tower split them
    item_rows: list
    timings: dict = field(default_factory=dict)

    @property
    def mrope_position_ids(self) -> np.ndarray | None:
        return self.layout.mrope_position_ids

    @property
    def mrope_position_delta(self) -> int | None:
        return self.layout.mrope_position_delta


# ------------------------------------------------------------------------------------------ helpers
def process_request(processor, *, text: str | None = None, messages=None, images=None, videos=None,
                    video_metadata=None, **proc_kw) -> tuple:
    """``(rendered prompt, processor outputs)`` for one request given as ``text=`` or chat ``messages=``.

    ``return_metadata=True`` is added when videos are given, so the (possibly sampled)
    ``frames_indices`` the processor used travel with the request.
    """
    if (text is None) == (messages is None):
        raise ValueError("pass exactly one of text= (a rendered prompt) or messages= (chat messages)")
    prompt = text
    if prompt is None:
        prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt = prompt[0] if isinstance(prompt, list) else prompt
    if videos is not None:
        proc_kw.setdefault("return_metadata", True)
    inputs = _procs.run_processor(processor, prompt, images=images, videos=videos, video_metadata=video_metadata,
                                  **proc_kw)
    return prompt, inputs


def grid_list(value) -> list | None:
    """Grids (a tensor or nested sequence) as a list of ``[t, h, w]`` int lists; None when empty."""
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    out = [[int(v) for v in g] for g in value]
    return out or None


def ids_array(value) -> np.ndarray:
    """One request's ids (a tensor or array, 1-D or a batch of one) as 1-D int32."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim == 2:
        if arr.shape[0] != 1:
            raise ValueError(f"one request at a time (batch {arr.shape[0]})")
        arr = arr[0]
    return arr.astype(np.int32)


def reset_rope_deltas(model) -> None:
    """Drop the rope deltas HF caches on the module, so no call reuses another request's."""
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "rope_deltas"):
        inner.rope_deltas = None


def _cat(parts) -> torch.Tensor | None:
    parts = list(parts or [])
    return torch.cat(parts, dim=0) if parts else None


def _tower(model, inputs) -> tuple:
    """The vision tower's outputs for the request's images and videos (None for an absent modality)."""
    inner = model.model
    img = vid = None
    if inputs.get("pixel_values") is not None:
        img = inner.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"], return_dict=True)
    if inputs.get("pixel_values_videos") is not None:
        vid = inner.get_video_features(inputs["pixel_values_videos"], inputs["video_grid_thw"], return_dict=True)
    return img, vid


def _visual_rows(model, inputs, spec) -> tuple:
    """Run the vision tower; ``(rows, deepstack levels, rows per item)`` in sequence order."""
    ids = inputs["input_ids"][0]
    img_mask, vid_mask = ids == spec.image_pad, ids == spec.video_pad
    img, vid = _tower(model, inputs)
    img_rows = _cat(img.pooler_output) if img is not None else None
    vid_rows = _cat(vid.pooler_output) if vid is not None else None
    for name, rows, mask in (("image", img_rows, img_mask), ("video", vid_rows, vid_mask)):
        have = 0 if rows is None else int(rows.shape[0])
        if have != int(mask.sum()):
            raise EmbeddingCountError(f"{name} rows", f"{int(mask.sum())} (pads in the prompt)", have)
    sizes = {"image": [int(t.shape[0]) for t in img.pooler_output] if img is not None else [],
             "video": [int(t.shape[0]) for t in vid.pooler_output] if vid is not None else []}
    ref = img_rows if img_rows is not None else vid_rows
    if ref is None:
        return torch.zeros(0, 0), [], sizes
    visual = img_mask | vid_mask
    img_joint, vid_joint = img_mask[visual], vid_mask[visual]

    def joint(a, b):
        out = ref.new_empty(int(visual.sum()), ref.shape[-1])
        if a is not None:
            out[img_joint] = a
        if b is not None:
            out[vid_joint] = b
        return out

    img_ds = getattr(img, "deepstack_features", None) if img is not None else None
    vid_ds = getattr(vid, "deepstack_features", None) if vid is not None else None
    deepstack = [joint(_cat(img_ds[k]) if img_ds else None, _cat(vid_ds[k]) if vid_ds else None)
                 for k in range(len(img_ds or vid_ds or []))]
    return joint(img_rows, vid_rows), deepstack, sizes


def _rows_in_item_order(layout: HandoffLayout, sizes: dict, request_id) -> list:
    """The tower's per-item row counts, interleaved in the layout's item order."""
    queues = {m: list(v) for m, v in sizes.items()}
    counts = {m: sum(1 for i in layout.items if i.modality == m) for m in queues}
    for modality, queue in queues.items():
        if len(queue) != counts[modality]:
            raise EmbeddingCountError(f"{modality} items", f"{counts[modality]} (in the layout)",
                                      f"{len(queue)} (from the vision tower)", request_id=request_id)
    return [queues[item.modality].pop(0) for item in layout.items]


# ------------------------------------------------------------------------------------------ E side
def encode(model, processor, adapter, *, text: str | None = None, messages=None, images=None, videos=None,
           video_metadata=None, request_id=None, **proc_kw) -> EncoderOutput:
    """The E side: processor + vision tower + layout (see the module docstring).

    ``proc_kw`` go to the processor call (e.g. ``do_sample_frames=True, fps=2``).
    """
    timings = {}
    t0 = time.perf_counter()
    prompt, inputs = process_request(processor, text=text, messages=messages, images=images, videos=videos,
                                     video_metadata=video_metadata, **proc_kw)
    timings["processor_s"] = time.perf_counter() - t0
    input_ids = ids_array(inputs["input_ids"])
    image_grid = grid_list(inputs.get("image_grid_thw"))
    video_grid = grid_list(inputs.get("video_grid_thw"))
    metas = inputs.get("video_metadata")

    t0 = time.perf_counter()
    reset_rope_deltas(model)
    with torch.no_grad():
        rows, deepstack, sizes = _visual_rows(model, inputs, adapter.spec)
    timings["vision_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    layout = adapter.derive_layout(input_ids, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=True,
                                   request_id=request_id)
    timings["layout_s"] = time.perf_counter() - t0
    item_rows = _rows_in_item_order(layout, sizes, request_id)
    check_embedding_rows(layout, item_rows, request_id=request_id)
    mm = inputs.get("mm_token_type_ids")
    return EncoderOutput(
        request_id=request_id, family=adapter.family, prompt=prompt,
        raw_prompt_ids=np.asarray(processor.tokenizer(prompt)["input_ids"], dtype=np.int32),
        input_ids=input_ids, mm_token_type_ids=None if mm is None else ids_array(mm).astype(np.int64),
        image_grid_thw=image_grid, video_grid_thw=video_grid,
        video_metadata=copy.deepcopy(list(metas)) if metas is not None and videos is not None else None,
        embeddings=rows, deepstack=list(deepstack), layout=layout, item_rows=item_rows, timings=timings)


def handoff(enc_out: EncoderOutput) -> tuple:
    """``(wire_dict, tensors)``: the layout's wire form after a ``json.dumps``/``json.loads`` round trip, and
    ``{"embeddings": (N, D), "deepstack": [(N, D), ...], "item_rows": [rows per item]}``."""
    wire = json.loads(json.dumps(enc_out.layout.to_wire()))
    tensors = {"embeddings": enc_out.embeddings, "deepstack": list(enc_out.deepstack),
               "item_rows": list(enc_out.item_rows)}
    return wire, tensors
