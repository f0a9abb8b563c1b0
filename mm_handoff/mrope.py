"""Qwen3-VL-family mRoPE position ids from token ids + grids, vectorised, bitwise equal to HF.

HF ``get_rope_index`` (the same code for Qwen3-VL, -MoE, Qwen3.5, -MoE, Cosmos3-Omni and -Edge):
video grids are split into one ``(1, h, w)`` grid per temporal patch; maximal runs of equal token
type (text / image pad / video pad) are walked in order; text advances the running position by one
per token; a pad run with grid ``(t, h, w)`` starting at ``p`` gets ``t = p + k // (lh*lw)``,
``h = p + row``, ``w = p + col`` and then advances ``p`` by ``max(h, w) // merge``.
``delta = max + 1 - L``. HF loops over groups in Python; this does one pass of numpy.
"""

from __future__ import annotations

import functools

import numpy as np

from .errors import GridMismatchError
from .tokens import readonly_ids
from .spec import TokenSpec, normalize_grids

__all__ = ["mrope_positions"]


@functools.lru_cache(maxsize=256)
def _corrections(t: int, h: int, w: int) -> np.ndarray:
    """For a run with merged grid (t, h, w): (in-run t, h, w offset) - k at in-run index k; read-only."""
    k = np.arange(t * h * w, dtype=np.int64)
    rem = k % (h * w)
    out = np.stack((k // (h * w) - k, rem // w - k, rem % w - k))
    out.flags.writeable = False
    return out


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
    """One (t, h, w) grid per pad run, in prompt order; each run's length checked against its grid."""
    n_img = int((mm_kind == 1).sum())
    n_vid = int((mm_kind == 2).sum())
    if n_img > len(image_grids):
        raise GridMismatchError("image_grid_thw", f">= {n_img} grids (one per image pad run)", len(image_grids),
                                request_id=request_id)
    if n_vid > len(video_grids):
        raise GridMismatchError("video_grid_thw", f">= {n_vid} temporal groups (one per video pad run)",
                                len(video_grids), request_id=request_id,
                                hint="a single run for a multi-group video is the stock PD layout")
    grids = np.zeros((len(mm_kind), 3), dtype=np.int64)
    if n_img:
        grids[mm_kind == 1] = np.asarray(image_grids[:n_img], dtype=np.int64)
    if n_vid:
        grids[mm_kind == 2] = np.asarray(video_grids[:n_vid], dtype=np.int64)
    return grids


def _add_patterns(base: np.ndarray, shapes: list) -> np.ndarray:
    """``base`` (the per-token shift) plus each run's in-run pattern, as a new (3, L) array."""
    n = base.shape[0]
    if len(shapes) <= 64:  # few runs: add each pattern in place
        pos = np.empty((3, n), dtype=np.int64)
        pos[:] = base
        pats = [_corrections(t_, h_, w_) for _, _, t_, h_, w_ in shapes]
        for row in range(3):  # contiguous 1-D slices: about twice as fast as (3, k) blocks
            line = pos[row]
            for (s, e, _, _, _), pat in zip(shapes, pats):
                line[s:e] += pat[row]
        return pos
    pieces, cursor = [], 0  # many small runs: one concatenation of zeros and patterns, one add
    for s, e, t_, h_, w_ in shapes:
        if s > cursor:
            pieces.append(np.zeros((3, s - cursor), dtype=np.int64))
        pieces.append(_corrections(t_, h_, w_))
        cursor = e
    if n > cursor:
        pieces.append(np.zeros((3, n - cursor), dtype=np.int64))
    pos = np.concatenate(pieces, axis=1)
    pos += base
    return pos


def mrope_positions(token_ids, spec: TokenSpec, *, image_grid_thw=None, video_grid_thw=None,
                    request_id=None):
    """Return ``(positions, delta)``: read-only int64 array (3, L) and an int."""
    ids = readonly_ids(token_ids)
    n = ids.shape[0]
    m = spec.merge_size
    image_grids = normalize_grids(image_grid_thw, "image_grid_thw")
    video_grids = [(1, h, w) for t, h, w in normalize_grids(video_grid_thw, "video_grid_thw") for _ in range(t)]
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

    # Token i sits at i + shift, where shift is constant per segment (text or pad run) and grows by
    # (advance - run length) after each pad run. A pad at offset k of its run then adds
    # pattern(k) - k per row; patterns depend only on the run's shape and are cached.
    adv = np.maximum(grids[:, 1], grids[:, 2]) // m
    run_shift = np.concatenate(([0], np.cumsum(adv - run_len)))
    base = np.arange(n, dtype=np.int64)
    base += np.repeat(run_shift[np.cumsum(mm) - mm], ends - starts)
    shapes = list(zip(mm_starts.tolist(), mm_ends.tolist(), gt.tolist(), lh.tolist(), lw.tolist()))
    pos = _add_patterns(base, shapes)
    # the largest position is the last token's or a run's base + its largest in-run offset
    peak = int(pos[:, -1].max()) if n else -1
    if len(mm_starts):
        run_peak = base[mm_starts] + np.maximum(np.maximum(gt - 1, lh - 1), lw - 1)
        peak = max(peak, int(run_peak.max()))
    delta = peak + 1 - n
    pos.flags.writeable = False
    return pos, delta
