"""Qwen3-VL-family mRoPE position ids from token ids + grids, vectorised, bitwise equal to HF.

HF ``get_rope_index`` (the same code for Qwen3-VL, -MoE, Qwen3.5, -MoE, Cosmos3-Omni and -Edge):
video grids are split into one ``(1, h, w)`` grid per temporal patch; maximal runs of equal token
type (text / image pad / video pad) are walked in order; text advances the running position by one
per token; a pad run with grid ``(t, h, w)`` starting at ``p`` gets ``t = p + k // (lh*lw)``,
``h = p + row``, ``w = p + col`` and then advances ``p`` by ``max(h, w) // merge``.
``delta = max + 1 - L``. HF loops over groups in Python; this does one pass of numpy.
"""

from __future__ import annotations

import numpy as np

from .._cache import ByteBoundedCache
from ..errors import GridMismatchError, typed_failures
from ..reading import resolve_limits
from .items import VIDEO
from .spec import TokenSpec, normalize_grids
from .tokens import read_only, readonly_ids

#: in-run offset patterns of pad runs up to 4,096 pads (~96 KB each) are kept, 4 MiB in all
PATTERNS = ByteBoundedCache(max_bytes=4 << 20, max_item_bytes=3 * 8 * 4096 + 512)
#: text ramps: one shared ``0 .. n-1`` up to this length (a read-only view of it), fresh above
_RAMP_MAX = 1 << 16
_RAMP = read_only(np.arange(_RAMP_MAX, dtype=np.int64))


def _pattern(t: int, h: int, w: int) -> np.ndarray:
    """For a run with merged grid (t, h, w): the in-run (t, h, w) offsets of its k-th pad; read-only."""
    def build() -> np.ndarray:
        k = np.arange(t * h * w, dtype=np.int64)
        rem = k % (h * w)
        return read_only(np.stack((k // (h * w), rem // w, rem % w)))
    return PATTERNS.get((t, h, w), build)


_RAMP3 = np.broadcast_to(_RAMP, (3, _RAMP_MAX))


def _ramp(n: int) -> np.ndarray:
    """``0 .. n-1`` on all three rows (a text segment's in-segment offsets); a read-only view."""
    return _RAMP3[:, :n] if n <= _RAMP_MAX else np.broadcast_to(np.arange(n, dtype=np.int64), (3, n))


def _segments(ids: np.ndarray, spec: TokenSpec) -> tuple:
    """Maximal runs of one token type (0 text, 1 image pad, 2 video pad): starts, ends, kinds."""
    n = ids.shape[0]
    kind = np.zeros(n + 2, dtype=np.int8)
    np.add((ids == spec.image_pad).view(np.int8), (ids == spec.video_pad).view(np.int8) * 2, out=kind[1:-1])
    edges = np.flatnonzero(kind[1:] != kind[:-1])  # every change of token type, incl. 0 / n at pad edges
    if not edges.size or edges[0] != 0:
        edges = np.concatenate(([0], edges))
    if edges[-1] != n:
        edges = np.concatenate((edges, [n]))
    starts, ends = edges[:-1], edges[1:]
    return starts, ends, kind[1:-1][starts]


def _run_grids(mm_starts, mm_ends, mm_kind, image_grids, video_grids, request_id) -> np.ndarray:
    """One (t, h, w) grid per pad run, in prompt order: exactly one image grid per image pad run and
    one temporal group per video pad run (a grid left over is a request that does not match its ids)."""
    n_vid = int(np.count_nonzero(mm_kind == 2))
    n_img = mm_kind.shape[0] - n_vid
    if n_img != len(image_grids):
        raise GridMismatchError("image_grid_thw", f"{n_img} grids (one per image pad run)", len(image_grids),
                                request_id=request_id)
    if n_vid != len(video_grids):
        raise GridMismatchError("video_grid_thw", f"{n_vid} temporal groups (one per video pad run)",
                                len(video_grids), request_id=request_id,
                                hint="a single run for a multi-group video is the stock PD layout"
                                if n_vid < len(video_grids) else None)
    if not n_img:  # video only (or text only): the groups in order, no scatter
        return video_grids
    grids = np.zeros((len(mm_kind), 3), dtype=np.int64)
    grids[mm_kind == 1] = np.asarray(image_grids, dtype=np.int64)
    if n_vid:
        grids[mm_kind == 2] = video_grids
    return grids


def _assemble(starts, ends, kinds, seg_base, run_shapes: list) -> np.ndarray:
    """Positions (3, L): per segment its in-segment offsets (a ramp for text, the cached pattern of
    a pad run; ``run_shapes``: the runs' merged grids in order), joined in one concatenation, plus each
    segment's base value in one add."""
    seg_len = ends - starts
    lengths = seg_len.tolist()
    # each distinct shape looked up once per call: a video's groups share one
    patterns = {shape: _pattern(*shape) for shape in set(run_shapes)}
    shapes = iter(run_shapes)
    pieces = [patterns[next(shapes)] if k else _ramp(n) for n, k in zip(lengths, kinds.tolist(), strict=True)]
    pos = np.concatenate(pieces, axis=1)
    pos += np.repeat(seg_base, seg_len)
    return pos


def _plan(token_ids, spec: TokenSpec, image_grid_thw, video_grid_thw, limits, request_id) -> tuple:
    """Segments, their base values and the runs' merged grids: everything but the (3, L) assembly."""
    ids = readonly_ids(token_ids, max_len=resolve_limits(limits).max_prompt_len)
    m = spec.merge_size
    image_grids = normalize_grids(image_grid_thw, "image_grid_thw", merge_size=m, limits=limits)
    videos = np.asarray(normalize_grids(video_grid_thw, "video_grid_thw", merge_size=m, limits=limits),
                        dtype=np.int64).reshape(-1, 3)
    video_grids = np.repeat(videos, videos[:, 0], axis=0)  # one (1, h, w) grid per temporal group
    video_grids[:, 0] = 1
    starts, ends, seg_kind = _segments(ids, spec)
    mm = seg_kind != 0
    mm_starts, mm_ends = starts[mm], ends[mm]
    grids = _run_grids(mm_starts, mm_ends, seg_kind[mm], image_grids, video_grids, request_id)
    gt, lh, lw = grids[:, 0], grids[:, 1] // m, grids[:, 2] // m
    run_len = mm_ends - mm_starts
    bad = run_len != gt * lh * lw
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise GridMismatchError(f"pad run at {int(mm_starts[k])}", f"{int(gt[k] * lh[k] * lw[k])} pads for grid "
                                f"{tuple(int(v) for v in grids[k])}", int(run_len[k]), request_id=request_id)
    # A segment (text or pad run) starting at s has base value s + shift, where shift grows by
    # (advance - run length) after each pad run; text adds k, a pad its run's pattern at k.
    adv = np.maximum(grids[:, 1], grids[:, 2]) // m
    run_shift = np.concatenate(([0], np.cumsum(adv - run_len)))
    seg_base = starts + run_shift[np.cumsum(mm) - mm]
    return ids, starts, ends, seg_kind, seg_base, mm, (gt, lh, lw)


def _peak(ids, starts, ends, seg_kind, seg_base, mm, merged) -> int:
    """The largest position: the last text token's, or a run's base + its largest in-run offset."""
    gt, lh, lw = merged
    peak = int(seg_base[-1] + ends[-1] - starts[-1] - 1) if seg_kind[-1] == 0 else -1
    if mm.any():
        run_peak = seg_base[mm] + np.maximum(np.maximum(gt - 1, lh - 1), lw - 1)
        peak = max(peak, int(run_peak.max()))
    return peak


@typed_failures("token_ids", GridMismatchError)
def mrope_positions(token_ids, spec: TokenSpec, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                    request_id=None):
    """Return ``(positions, delta)``: read-only int64 array (3, L) and an int."""
    plan = _plan(token_ids, spec, image_grid_thw, video_grid_thw, limits, request_id)
    ids, starts, ends, seg_kind, seg_base, mm, (gt, lh, lw) = plan
    n = ids.shape[0]
    if not n:
        return read_only(np.zeros((3, 0), dtype=np.int64)), 0
    shapes = list(zip(gt.tolist(), lh.tolist(), lw.tolist(), strict=True))
    pos = _assemble(starts, ends, seg_kind, seg_base, shapes)
    return read_only(pos), _peak(*plan) + 1 - n


def mrope_delta(token_ids, spec: TokenSpec, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                request_id=None) -> int:
    """The delta of :func:`mrope_positions` without building the (3, L) positions (a check's cost)."""
    plan = _plan(token_ids, spec, image_grid_thw, video_grid_thw, limits, request_id)
    n = plan[0].shape[0]
    return _peak(*plan) + 1 - n if n else 0


#: up to this many pad runs a layout's positions are planned run by run in Python (a few operations per
#: run beat numpy's per-call overhead); above it, in vectorised passes
_FEW_RUNS = 64


def _layout_plan(layout) -> tuple | None:
    """:func:`_plan_of` the layout, built once per layout (the accept step's delta and the engine's positions
    both walk it)."""
    return layout._memo("mrope plan", lambda: _plan_of(layout))


def _plan_of(layout) -> tuple | None:
    """The pad segments ``get_rope_index`` walks, read from a checked layout's runs and grids, each
    ``(offset, length, (t, h, w) merged, base)`` where ``base`` is the position value at ``offset``
    (text before it runs on from the previous segment); with the shift after the last one. None where
    the runs do not tell the segments alone (two runs of one modality that touch are one segment to
    ``get_rope_index``) or where they do not follow the grids (a video's runs are not its groups, a run
    is not its grid's size): then the ids decide, and name what is wrong."""
    m = layout.spec.merge_size
    plan: list = []
    shift, prev_end, prev_video = 0, -1, None
    for item in layout.items:
        t, h, w = item.grid_thw
        video = item.modality == VIDEO
        offsets, lengths = item.run_offsets.tolist(), item.run_lengths.tolist()
        if video and len(offsets) != t:
            return None
        gt, lh, lw = (1 if video else t), h // m, w // m
        size, adv, top = gt * lh * lw, max(h, w) // m, max(gt, lh, lw) - 1
        for o, n in zip(offsets, lengths, strict=True):
            if n != size or (o == prev_end and video == prev_video):
                return None
            plan.append((o, n, (gt, lh, lw), o + shift, top))
            shift += adv - n
            prev_end, prev_video = o + n, video
    return (*plan, shift)


def _plan_peak(plan: tuple, n: int) -> int:
    """The largest position of a layout's plan: a run's base + its largest in-run offset, or the last text
    token's."""
    *runs, shift = plan
    peak = max(base + top for _, _, _, base, top in runs)
    last_o, last_n = runs[-1][0], runs[-1][1]
    return max(peak, n - 1 + shift) if last_o + last_n < n else peak


def _grids_by_modality(items) -> dict:
    return {"image": [i.grid_thw for i in items if i.modality != VIDEO],
            "video": [i.grid_thw for i in items if i.modality == VIDEO]}


def layout_delta(layout, *, limits=None, request_id=None) -> int:
    """:func:`mrope_delta` of a layout from its runs and grids alone, O(runs) instead of a pass over
    the ids: a checked layout's runs are exactly the pad segments ``get_rope_index`` walks, unless two
    runs of one modality touch (then they would be one segment, and the ids decide, as above)."""
    items, n = layout.items, layout.prompt_len
    if not items:
        return 0
    if layout._columns()[0].shape[0] <= _FEW_RUNS:
        plan = _layout_plan(layout)
        if plan is not None:
            return _plan_peak(plan, n) + 1 - n
        grids = _grids_by_modality(items)
        return mrope_delta(layout.token_ids, layout.spec, limits=limits, request_id=request_id,
                           image_grid_thw=grids["image"], video_grid_thw=grids["video"])
    return _many_runs_delta(layout, limits, request_id)


def _many_runs_delta(layout, limits, request_id) -> int:
    """:func:`layout_delta` of many runs in O(items) after one vectorised look for touching runs.

    A run at ``o`` whose predecessors added ``S`` (each run: ``max(h, w) // merge`` minus its pads) starts
    its positions at ``o + S``; the next run starts at least one pad-free position later
    (``o' >= o + len``), so that base only grows from run to run. An item's runs share one grid, so the
    item's largest position is its last run's base plus the grid's largest in-run offset, and a run's
    predecessors add what whole items add (``advance * runs - rows``) plus the item's own earlier runs."""
    items, n, m = layout.items, layout.prompt_len, layout.spec.merge_size
    off, ln, kind, _ = layout._columns()
    if off.shape[0] > 1:
        touch = off[1:] == off[:-1] + ln[:-1]
        if bool(touch.any()) and bool((touch & (kind[1:] == kind[:-1])).any()):
            by = _grids_by_modality(items)
            return mrope_delta(layout.token_ids, layout.spec, limits=limits, request_id=request_id,
                               image_grid_thw=by["image"], video_grid_thw=by["video"])
    added = 0  # what the runs before the current item added
    peak = -1  # the largest position so far (every position is >= 0)
    for item in items:
        t, h, w = item.grid_thw
        lh, lw, k, rows = h // m, w // m, item.run_offsets.shape[0], item.embedding_length
        advance = max(h, w) // m
        last = int(item.run_offsets[-1])
        top = max(0 if item.modality == VIDEO else t - 1, lh - 1, lw - 1)
        base = last + added + advance * (k - 1) - (rows - int(item.run_lengths[-1]))
        peak = max(peak, base + top)
        added += advance * k - rows
    end = int(off[-1] + ln[-1])
    if end < n:  # the prompt ends in text: its last token
        peak = max(peak, n - 1 + added)
    return peak + 1 - n


def _many_runs_delta_vectorised(layout, limits, request_id) -> int:
    """:func:`layout_delta` in vectorised passes over every run (the reference for :func:`_many_runs_delta`,
    held equal to it by a property test)."""
    items, n, m = layout.items, layout.prompt_len, layout.spec.merge_size
    off = np.concatenate([i.run_offsets for i in items])
    ln = np.concatenate([i.run_lengths for i in items])
    counts = [i.run_offsets.shape[0] for i in items]
    grids = np.repeat(np.asarray([(1, h, w) if i.modality == VIDEO else (t, h, w) for i in items
                                  for t, h, w in (i.grid_thw,)], dtype=np.int64), counts, axis=0)
    kind = np.repeat(np.fromiter((i.modality == VIDEO for i in items), dtype=bool, count=len(items)), counts)
    ends = off + ln
    if bool(((ends[:-1] == off[1:]) & (kind[:-1] == kind[1:])).any()):
        by = _grids_by_modality(items)
        return mrope_delta(layout.token_ids, layout.spec, limits=limits, request_id=request_id,
                           image_grid_thw=by["image"], video_grid_thw=by["video"])
    gt, lh, lw = grids[:, 0], grids[:, 1] // m, grids[:, 2] // m
    step = np.maximum(grids[:, 1], grids[:, 2]) // m - ln  # what each run adds to the positions after it
    base = off + np.concatenate(([0], np.cumsum(step)[:-1]))
    peak = int((base + np.maximum(np.maximum(gt - 1, lh - 1), lw - 1)).max())
    if int(ends[-1]) < n:  # the prompt ends in text: its last token
        peak = max(peak, n - 1 + int(step.sum()))
    return peak + 1 - n


def _text(out: np.ndarray, a: int, b: int, base: int) -> None:
    """``out[:, a:b]`` = the text positions ``base .. base + b - a - 1`` on all three rows."""
    if b > a:
        out[:, a:b] = _RAMP[base:base + b - a] if base + b - a <= _RAMP_MAX else np.arange(base, base + b - a)


@typed_failures("layout", GridMismatchError)
def layout_positions(layout, *, limits=None, request_id=None) -> tuple:
    """:func:`mrope_positions` of a checked layout, ``(positions, delta)``, bitwise the same: planned from
    its runs and grids (no pass over the ids to find the pad segments, no grid re-reading), each
    segment written once into the ``(3, L)`` array. A layout of many runs, or one whose runs do not
    tell the segments alone (see :func:`_layout_plan`), takes the ids path."""
    items, n = layout.items, layout.prompt_len
    plan = _layout_plan(layout) if layout._columns()[0].shape[0] <= _FEW_RUNS else None
    if plan is None or not items:
        grids = _grids_by_modality(items)
        return mrope_positions(layout.token_ids, layout.spec, image_grid_thw=grids["image"] or None,
                               video_grid_thw=grids["video"] or None, limits=limits, request_id=request_id)
    pos = np.empty((3, n), dtype=np.int64)
    at = 0
    for o, k, shape, base, _ in plan[:-1]:
        _text(pos, at, o, base - (o - at))
        np.add(_pattern(*shape), base, out=pos[:, o:o + k])
        at = o + k
    _text(pos, at, n, at + plan[-1])
    return read_only(pos), _plan_peak(plan, n) + 1 - n
