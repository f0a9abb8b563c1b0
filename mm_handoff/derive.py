"""Derive a :class:`HandoffLayout` from expanded token ids: one O(L) pass, the rest over runs.

The one pass over the ids is their run-length form (which the layout keeps and the wire form
carries). Items are then delimited the way TensorRT-LLM's aggregated path does it (its mask
helpers): all pad segments of a modality in prompt order, split into items by the cumulative
per-item pad counts (from the grids), and into runs wherever pads stop being consecutive or an
item ends. This works for every convention (with or without the outer wrapper) and for the stock
single-run shape.
"""

from __future__ import annotations

import numpy as np

from .errors import GridMismatchError, LayoutError, typed_failures
from .items import IMAGE, VIDEO, MultimodalItem
from .layout import HandoffLayout
from .limits import resolve_limits
from .spec import TokenSpec, item_lengths, normalize_grids
from .stamps import parse_timestamps
from .tokens import read_only, readonly_ids, run_length_form

__all__ = ["derive_layout"]

_NO_RUNS = read_only(np.zeros(0, dtype=np.int64))


def _split_runs(values: np.ndarray, counts: np.ndarray, stop: np.ndarray, pad: int, lengths: list, modality: str,
                request_id=None):
    """The pad segments of the run-length form (maximal runs), split at item boundaries given by the
    per-item pad counts: ``(offsets, lengths)`` per item.

    Works in "pad-count space": run ends and item ends are both cumulative pad counts, their union
    gives the pieces, and each piece maps back to a prompt offset through its run.
    """
    seg = np.flatnonzero(values == pad)
    if not seg.shape[0] and not lengths:  # no item of this modality and none of its pads
        return []
    run_len = counts[seg].astype(np.int64)
    run_cum = np.cumsum(run_len)
    total, found = int(sum(lengths)), int(run_cum[-1]) if seg.shape[0] else 0
    if found != total:
        raise GridMismatchError(f"{modality} pads", f"{total} (sum over the {modality} grids)", found,
                                request_id=request_id, hint="the prompt's pads and the grids describe different items")
    if total == 0:
        return []
    starts = stop[seg] - run_len
    if len(lengths) == seg.shape[0] and run_len.tolist() == lengths:  # one run per item: the common image
        return [(starts[k:k + 1], run_len[k:k + 1]) for k in range(len(lengths))]
    item_cum = np.cumsum(lengths)
    # piece ends in pad-count space, last == total (one item: its only end is the last run's)
    cuts = run_cum if len(lengths) == 1 else np.union1d(run_cum, item_cum)
    piece_start = np.concatenate(([0], cuts[:-1]))
    run_of = np.searchsorted(run_cum, piece_start, side="right")
    offsets = starts[run_of] + (piece_start - (run_cum[run_of] - run_len[run_of]))
    piece_len = cuts - piece_start
    bounds = np.searchsorted(piece_start, np.concatenate(([0], item_cum))).tolist()
    return [(offsets[bounds[k]:bounds[k + 1]], piece_len[bounds[k]:bounds[k + 1]]) for k in range(len(lengths))]


def _items(ids: np.ndarray, spec: TokenSpec, groups: list, request_id) -> tuple:
    """The items of ``groups`` (``(first pad, modality, grid, offsets, lengths)`` in prompt order) from one
    set of read-only columns, each video's timestamps read from the ids: ``(items, {index: reading})``."""
    heads, parsed = [], {}
    for k, (_, modality, grid, offsets, _) in enumerate(groups):
        stamps = parse_timestamps(ids, spec, offsets) if modality == VIDEO else None
        if stamps is not None:
            parsed[k] = stamps
        heads.append((modality, grid, offsets.shape[0], stamps is not None))

    def joined(parts: list, empty=None):
        if not parts:
            return empty
        return read_only(np.concatenate(parts) if len(parts) > 1 else parts[0].copy())

    try:
        items = MultimodalItem.from_columns(
            heads, joined([g[3] for g in groups], _NO_RUNS), joined([g[4] for g in groups], _NO_RUNS),
            joined([s[0] for s in parsed.values()]), joined([np.stack(s[1:], axis=1) for s in parsed.values()]))
    except LayoutError as exc:
        exc.with_request(request_id)
        raise
    return items, parsed


@typed_failures("token_ids", LayoutError)
def derive_layout(
    token_ids,
    spec: TokenSpec,
    *,
    image_grid_thw=None,
    video_grid_thw=None,
    family: str,
    convention: str,
    mrope: bool = False,
    tokenizer_digest: str | None = None,
    limits=None,
    request_id=None,
) -> HandoffLayout:
    """Layout of an expanded prompt given the family's spec and the processor's grids (bounded by
    ``limits``, :class:`~mm_handoff.limits.Limits`); any contradiction raises, naming ``request_id``."""
    ids = readonly_ids(token_ids, max_len=resolve_limits(limits).max_prompt_len)
    image_grids = normalize_grids(image_grid_thw, "image_grid_thw", merge_size=spec.merge_size, limits=limits)
    video_grids = normalize_grids(video_grid_thw, "video_grid_thw", merge_size=spec.merge_size, limits=limits)
    values, counts = rle = run_length_form(ids)
    stop = np.cumsum(counts, dtype=np.int64)
    groups = []
    for modality, pad, grids in ((IMAGE, spec.image_pad, image_grids), (VIDEO, spec.video_pad, video_grids)):
        runs_per_item = _split_runs(values, counts, stop, pad, item_lengths(grids, spec.merge_size), modality,
                                    request_id)
        for grid, (offsets, lengths) in zip(grids, runs_per_item, strict=True):
            groups.append((int(offsets[0]), modality, grid, offsets, lengths))
    groups.sort(key=lambda g: g[0])
    items, parsed = _items(ids, spec, groups, request_id)
    positions = delta = None
    if mrope:
        from .mrope import mrope_positions
        positions, delta = mrope_positions(ids, spec, image_grid_thw=image_grids, video_grid_thw=video_grids,
                                           limits=limits, request_id=request_id)
    try:
        # the run-length form and the timestamps are the ids' own (computed above from these very ids)
        return HandoffLayout._assembled(ids, items, spec, seeds={"rle": rle, "parsed": parsed}, family=family,
                                        convention=convention, mrope_position_ids=positions,
                                        mrope_position_delta=delta, tokenizer_digest=tokenizer_digest)
    except LayoutError as exc:
        exc.with_request(request_id)
        raise
