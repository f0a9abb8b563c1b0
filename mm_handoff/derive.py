"""Derive a :class:`HandoffLayout` from expanded token ids, in O(L) numpy.

Items are delimited the way TensorRT-LLM's aggregated path does it (its mask helpers): all pad
positions of a modality in prompt order, split into items by the cumulative per-item pad counts
(from the grids), and into runs wherever positions stop being consecutive or an item ends. This
works for every convention (with or without the outer wrapper) and for the stock single-run shape.
"""

from __future__ import annotations

import numpy as np

from .errors import GridMismatchError, LayoutError
from .items import IMAGE, VIDEO, MultimodalItem
from .layout import HandoffLayout, readonly_ids
from .limits import resolve_limits
from .spec import TokenSpec, item_lengths, normalize_grids
from .stamps import parse_timestamps

__all__ = ["derive_layout"]

def _split_runs(ids: np.ndarray, pad: int, lengths: list, modality: str, request_id=None):
    """Maximal pad runs, split at item boundaries given by the per-item pad counts.

    Works in "pad-count space": run ends and item ends are both cumulative pad counts, their union
    gives the pieces, and each piece maps back to a prompt offset through its run. Only O(L) work is
    one compare and one diff over the ids; the rest is over runs and items.
    """
    field = f"{modality} pads"
    total = int(sum(lengths))
    if not total and not (ids == pad).any():  # no item of this modality: one compare, not the run split
        return []
    hit = np.empty(ids.shape[0] + 2, dtype=np.int8)
    hit[0] = hit[-1] = 0
    np.equal(ids, pad, out=hit[1:-1].view(bool))
    edges = np.flatnonzero(hit[1:] != hit[:-1])
    starts, ends = edges[0::2], edges[1::2]
    run_len = ends - starts
    found = int(run_len.sum())
    if found != total:
        raise GridMismatchError(field, f"{total} (sum over the {modality} grids)", found, request_id=request_id,
                                hint="the prompt's pads and the grids describe different items")
    if total == 0:
        return []
    run_cum = np.cumsum(run_len)
    item_cum = np.cumsum(lengths)
    # piece ends in pad-count space, last == total (one item: its only end is the last run's)
    cuts = run_cum if len(lengths) == 1 else np.union1d(run_cum, item_cum)
    piece_start = np.concatenate(([0], cuts[:-1]))
    run_of = np.searchsorted(run_cum, piece_start, side="right")
    offsets = starts[run_of] + (piece_start - (run_cum[run_of] - run_len[run_of]))
    piece_len = cuts - piece_start
    bounds = np.searchsorted(piece_start, np.concatenate(([0], item_cum))).tolist()
    return [(offsets[bounds[k]:bounds[k + 1]], piece_len[bounds[k]:bounds[k + 1]]) for k in range(len(lengths))]


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
    groups = []
    for modality, pad, grids in ((IMAGE, spec.image_pad, image_grids), (VIDEO, spec.video_pad, video_grids)):
        runs_per_item = _split_runs(ids, pad, item_lengths(grids, spec.merge_size), modality, request_id)
        for grid, (offsets, lengths) in zip(grids, runs_per_item, strict=True):
            groups.append((int(offsets[0]), modality, grid, offsets, lengths))
    groups.sort(key=lambda g: g[0])
    items = []
    for _, modality, grid, offsets, lengths in groups:
        stamps = parse_timestamps(ids, spec, offsets) if modality == VIDEO else None
        try:
            seconds, spans = (None, None) if stamps is None else (stamps[0], np.column_stack(stamps[1:]))
            items.append(MultimodalItem.from_arrays(modality, offsets, lengths, grid, seconds, spans))
        except LayoutError as exc:
            exc.with_request(request_id)
            raise
    positions = delta = None
    if mrope:
        from .mrope import mrope_positions
        positions, delta = mrope_positions(ids, spec, image_grid_thw=image_grids, video_grid_thw=video_grids,
                                           limits=limits, request_id=request_id)
    try:
        return HandoffLayout(ids, tuple(items), spec, family=family, convention=convention,
                             mrope_position_ids=positions, mrope_position_delta=delta,
                             tokenizer_digest=tokenizer_digest)
    except LayoutError as exc:
        exc.with_request(request_id)
        raise
