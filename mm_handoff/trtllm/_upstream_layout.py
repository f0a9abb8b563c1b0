"""Upstream's own carrier, validated: ``DisaggregatedParams.multimodal_layout`` read as a ``HandoffLayout``.

A TensorRT-LLM whose ``DisaggregatedParams`` has ``multimodal_layout`` (a ``DisaggPrefillMultimodalInputs``
built on the encoder side) no longer rebuilds the prompt on the prefill side, and its own check of the
carried value is a handle count. mm-handoff then stops rewriting the prefill (``mode=validate``) and reads
that value the way it reads its own carried layout:

1. the carried ``prompt_token_ids`` are parsed with **this side's** family spec: every item's pad runs
   (from the carried run columns, else the pad runs inside each item's span), its modality (the pad id
   its ids spell), its timestamps (as the ids spell them, :func:`mm_handoff.layout.derive_layout`), and its
   grid: the encoder's grids when mm-handoff's encoder hook carried them (``"mm_handoff.grids"`` in the
   first embedding handle), else the grid the runs spell (``t`` = the item's groups, ``h * w / merge^2`` =
   pads per group; only the product of ``h`` and ``w`` is known then, and nothing downstream reads them
   apart: the mRoPE ids are checked by length);
2. every field upstream carried must equal what the parsed layout gives for it (positions, lengths, rows,
   runs, item types, the embed-mask prefix sum, and ``encoder_token_lengths`` per item): a value that
   contradicts the ids it came with is refused, naming ``multimodal_layout.<field>``;
3. the layout then goes through the same accept step as mm-handoff's own
   (:func:`mm_handoff.checks.accept_layout`): handles vs rows, this request's own prompt, the mRoPE ids'
   length, the grids vs runs;
4. a video item of a family that stamps every temporal group must spell its timestamps: a video without
   them is what an encoder that predates the per-group layout sends (one pad run), refused as stale.
"""

from __future__ import annotations

import math

import numpy as np

from ..adapters.base import typed_adapter
from ..checks import accept_layout, check_mrope_slice
from ..errors import GridMismatchError, LayoutError
from ._carrier import GRIDS_KEY, carried, embed_mask_cumsum

UPSTREAM_LAYOUT_FIELD = "multimodal_layout"
#: fields of ``DisaggPrefillMultimodalInputs`` compared one to one with the parsed layout's values
_COMPARED = ("multimodal_positions", "multimodal_lengths", "multimodal_embedding_lengths",
             "multimodal_item_run_cu_offsets", "multimodal_run_positions", "multimodal_run_lengths", "item_types")
_STALE_HINT = ("an encoder that predates the per-group layout (one pad run per video, no timestamps); "
               "upgrade the encoder, or carry mm-handoff's layout")


def _field(name: str) -> str:
    return f"{UPSTREAM_LAYOUT_FIELD}.{name}"


def _int_list(value, name: str, request_id) -> list | None:
    if value is None:
        return None
    try:
        out = [int(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
    except (TypeError, ValueError) as exc:
        raise LayoutError(_field(name), "a list of ints", type(value).__name__, request_id=request_id) from exc
    return out


def _item_runs(upstream, ids: np.ndarray, spec, request_id) -> list:
    """``[(modality, offsets, lengths)]`` per item, from the carried run columns (else the pad runs in each
    item's span); the modality is the pad id the ids spell at the item's runs."""
    positions = _int_list(getattr(upstream, "multimodal_positions", None), "multimodal_positions", request_id) or []
    lengths = _int_list(getattr(upstream, "multimodal_lengths", None), "multimodal_lengths", request_id) or []
    cu = _int_list(getattr(upstream, "multimodal_item_run_cu_offsets", None), "multimodal_item_run_cu_offsets",
                   request_id)
    run_pos = _int_list(getattr(upstream, "multimodal_run_positions", None), "multimodal_run_positions", request_id)
    run_len = _int_list(getattr(upstream, "multimodal_run_lengths", None), "multimodal_run_lengths", request_id)
    n = int(ids.shape[0])
    per_item = []
    if cu is not None and run_pos is not None and run_len is not None:
        if len(run_pos) != len(run_len) or not cu or cu[0] != 0 or cu[-1] != len(run_pos) \
                or any(b < a for a, b in zip(cu, cu[1:], strict=False)):
            raise LayoutError(_field("multimodal_item_run_cu_offsets"),
                              f"offsets from 0 to {len(run_pos)} over the runs, non-decreasing", cu,
                              request_id=request_id)
        for a, b in zip(cu, cu[1:], strict=False):
            per_item.append((np.asarray(run_pos[a:b], np.int64), np.asarray(run_len[a:b], np.int64)))
    else:  # an older whole-request handoff without run columns: the pad runs inside each item's span
        pads = np.isin(ids, [spec.image_pad, spec.video_pad])
        for i, (p, ln) in enumerate(zip(positions, lengths, strict=False)):
            if p < 0 or p + ln > n:
                raise LayoutError(_field(f"multimodal_positions[{i}]"), f"a span inside the {n}-token prompt",
                                  (p, p + ln), request_id=request_id)
            inside = pads[p:p + ln].astype(np.int8)
            edges = np.diff(np.concatenate(([0], inside, [0])))
            starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
            per_item.append((starts + p, ends - starts))
    out = []
    for i, (off, ln) in enumerate(per_item):
        if off.size == 0 or (ln < 1).any() or (off < 0).any() or (off + ln > n).any():
            raise LayoutError(_field(f"items[{i}].runs"), f"at least one run, each inside the {n}-token prompt",
                              list(zip(off.tolist(), ln.tolist(), strict=True)), request_id=request_id)
        first = int(ids[int(off[0])])
        modality = "image" if first == spec.image_pad else "video" if first == spec.video_pad else None
        if modality is None:
            raise LayoutError(_field(f"items[{i}].runs[0]"), "a run of <|image_pad|> or <|video_pad|> ids",
                              f"id {first} at {int(off[0])}", request_id=request_id)
        out.append((modality, off, ln))
    return out


def _spelled_grid(modality: str, lengths: np.ndarray, merge: int, index: int, request_id) -> tuple:
    """The grid the runs spell: ``t`` groups of ``h * w / merge^2`` pads (h, w: a factorisation of that)."""
    per = int(lengths[0])
    if (lengths != per).any():
        raise LayoutError(_field(f"items[{index}].runs"), "groups of one length (one grid per item)",
                          lengths.tolist(), request_id=request_id)
    a = max(d for d in range(1, math.isqrt(per) + 1) if per % d == 0)
    t = int(lengths.shape[0]) if modality == "video" else 1
    if modality == "image" and lengths.shape[0] != 1:
        raise LayoutError(_field(f"items[{index}].runs"), "one run per image", int(lengths.shape[0]),
                          request_id=request_id)
    return (t, merge * a, merge * (per // a))


def _grids(found: dict, items: list, merge: int, request_id) -> tuple:
    grids = found.get(GRIDS_KEY)
    if isinstance(grids, dict):  # the encoder's own grids, carried by mm-handoff's encoder hook
        return grids.get("image_grid_thw") or None, grids.get("video_grid_thw") or None, "carried"
    image: list = []
    video: list = []
    for i, (modality, _, lengths) in enumerate(items):
        (image if modality == "image" else video).append(_spelled_grid(modality, lengths, merge, i, request_id))
    return image or None, video or None, "spelled by the runs"


def read_upstream_layout(upstream, adapter, *, mm_handles=None, request_id=None):
    """Upstream's carried ``DisaggPrefillMultimodalInputs`` as a :class:`~mm_handoff.layout.HandoffLayout`,
    parsed with this side's spec and compared field by field (steps 1, 2 and 4 of the module doc)."""
    adapter = typed_adapter(adapter, request_id=request_id)
    spec = adapter.spec
    raw = _int_list(getattr(upstream, "prompt_token_ids", None), "prompt_token_ids", request_id)
    if not raw:
        raise LayoutError(_field("prompt_token_ids"), "the encoder's expanded prompt", raw, request_id=request_id)
    ids = np.asarray(raw, dtype=np.int64)
    items = _item_runs(upstream, ids, spec, request_id)
    image_grid, video_grid, source = _grids(carried(mm_handles), items, spec.merge_size, request_id)
    layout = adapter.derive_layout(ids, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=False,
                                   request_id=request_id)
    ours = layout.to_disagg_prefill_inputs()
    for name in _COMPARED:
        theirs = _int_list(getattr(upstream, name, None), name, request_id)
        if theirs is not None and ours.get(name) is not None and theirs != list(ours[name]):
            raise LayoutError(_field(name), f"{ours[name][:16]} (what its prompt_token_ids spell)", theirs[:16],
                              request_id=request_id, hint="the carried layout contradicts its own ids")
    _check_optional(upstream, layout, request_id)
    _check_stamped(layout, spec, source, request_id)
    return layout


def _check_optional(upstream, layout, request_id) -> None:
    theirs = _int_list(getattr(upstream, "encoder_token_lengths", None), "encoder_token_lengths", request_id)
    if theirs is not None and (len(theirs) != len(layout.items) or min(theirs, default=1) < 1):
        raise LayoutError(_field("encoder_token_lengths"), f"{len(layout.items)} positive values (one per item)",
                          theirs, request_id=request_id)
    cumsum = getattr(upstream, "multimodal_embed_mask_cumsum", None)
    if cumsum is not None:
        ours = embed_mask_cumsum(layout)
        got = np.asarray(cumsum.tolist() if hasattr(cumsum, "tolist") else cumsum)
        if got.shape != tuple(ours.shape) or not np.array_equal(got, ours.numpy()):
            bad = int(np.flatnonzero(got != ours.numpy())[0]) if got.shape == tuple(ours.shape) else None
            raise LayoutError(_field("multimodal_embed_mask_cumsum"),
                              f"the prefix sum of the prompt's pad mask ({layout.prompt_len} values)",
                              f"shape {got.shape}" if bad is None else f"{int(got[bad])} at {bad}",
                              request_id=request_id)


def _check_stamped(layout, spec, source: str, request_id) -> None:
    """A family that stamps every group: each video spells its timestamps, else it is a stale encoder's."""
    if spec.timestamps is None:
        return
    for i, item in enumerate(layout.items):
        if item.modality == "video" and item.seconds is None:
            raise GridMismatchError(_field(f"items[{i}].timestamps"),
                                    "a <t seconds> text before every temporal group (this family prints them)",
                                    f"no timestamps, {item.run_offsets.shape[0]} run(s) (grid {source})",
                                    request_id=request_id, hint=_STALE_HINT)


def check_upstream_layout(upstream, adapter, *, disaggregated_params=None, prompt_token_ids=None,
                          own_prompt_ids=None, mrope_position_ids=None, request_id=None):
    """Steps 1-4: refuse a carried layout that contradicts itself or this request; return it parsed.

    ``prompt_token_ids``: what upstream's ``_preprocess`` will run (must be the carried ids);
    ``own_prompt_ids``: this request's own prompt (its text tokenized), which the carried ids must expand.
    """
    handles = getattr(disaggregated_params, "multimodal_embedding_handles", None)
    layout = read_upstream_layout(upstream, adapter, mm_handles=handles, request_id=request_id)
    if prompt_token_ids is not None and list(np.asarray(prompt_token_ids).tolist()) != layout.token_ids.tolist():
        raise LayoutError("prompt_token_ids", f"the carried {_field('prompt_token_ids')} ({layout.prompt_len} ids)",
                          f"{len(prompt_token_ids)} other ids", request_id=request_id)
    if mrope_position_ids is None:
        mrope_position_ids = getattr(disaggregated_params, "mrope_position_ids_handle", None)
    if mrope_position_ids is not None:
        check_mrope_slice(mrope_position_ids, layout.prompt_len, request_id=request_id)
    return accept_layout(layout, adapter, embeddings=handles if isinstance(handles, list) and handles else None,
                         prompt_token_ids=own_prompt_ids, mrope_position_ids=mrope_position_ids,
                         request_id=request_id)
