"""Derive a :class:`HandoffLayout` from expanded token ids, in O(L) numpy.

Items are delimited the way TensorRT-LLM's aggregated path does it (its mask helpers): all pad
positions of a modality in prompt order, split into items by the cumulative per-item pad counts
(from the grids), and into runs wherever positions stop being consecutive or an item ends. This
works for every convention (with or without the outer wrapper) and for the stock single-run shape.
:func:`derive_layout_naive` is a plain-Python reference the property tests compare against.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

import numpy as np

from .errors import GridMismatchError
from .layout import IMAGE, VIDEO, HandoffLayout, MultimodalItem, PlaceholderRun, readonly_ids
from .spec import TokenSpec, item_lengths, normalize_grids

__all__ = ["derive_layout", "derive_layout_naive"]

_MAX_TS_TOKENS = 12  # '<' + up to 8 digits + '.' + digit + ' seconds' + '>'


def _split_runs(ids: np.ndarray, pad: int, lengths: list, modality: str, request_id=None):
    """Maximal pad runs, split at item boundaries given by the per-item pad counts.

    Works in "pad-count space": run ends and item ends are both cumulative pad counts, their union
    gives the pieces, and each piece maps back to a prompt offset through its run. Only O(L) work is
    one compare and one diff over the ids; the rest is over runs and items.
    """
    field = f"{modality} pads"
    total = int(sum(lengths))
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
    cuts = np.union1d(run_cum, item_cum)  # piece ends in pad-count space, last == total
    piece_start = np.concatenate(([0], cuts[:-1]))
    run_of = np.searchsorted(run_cum, piece_start, side="right")
    offsets = starts[run_of] + (piece_start - (run_cum[run_of] - run_len[run_of]))
    piece_len = cuts - piece_start
    bounds = np.searchsorted(piece_start, np.concatenate(([0], item_cum)))
    pos_l, len_l, b = offsets.tolist(), piece_len.tolist(), bounds.tolist()
    return [[PlaceholderRun(pos_l[j], len_l[j]) for j in range(b[k], b[k + 1])] for k in range(len(lengths))]


@functools.lru_cache(maxsize=16)
def _digit_table(vocab) -> tuple:
    """Sorted token ids of '0'..'9' and '.', and the value each stands for (10 for the dot)."""
    keys = np.asarray(list(vocab.digits) + [vocab.dot], dtype=np.int64)
    order = np.argsort(keys)
    return keys[order], np.arange(11, dtype=np.int64)[order]


def _timestamps(ids: np.ndarray, spec: TokenSpec, runs: list):
    """``(seconds, spans)`` of the ``<t seconds>`` text before each group; (None, None) when any group
    lacks one. Few groups: a short Python scan per group; many: one vectorised pass."""
    if spec.timestamps is None or not runs:
        return None, None
    if len(runs) <= 128:
        return _timestamps_few(ids, spec, runs)
    return _timestamps_many(ids, spec, runs)


def _timestamps_few(ids: np.ndarray, spec: TokenSpec, runs: list):
    vocab = spec.timestamps
    digit = {d: i for i, d in enumerate(vocab.digits)}
    values, spans = [], []
    for r in runs:
        e = r.offset - 1  # the group's <|vision_start|>
        lo = max(0, e - _MAX_TS_TOKENS)
        w = ids[lo:e + 1].tolist()
        if len(w) < 6 or w[-1] != spec.vision_start or w[-2] != vocab.close or w[-3] != vocab.seconds \
                or w[-5] != vocab.dot:
            return None, None
        j = len(w) - 6
        while j >= 0 and w[j] != vocab.open:
            j -= 1
        if j < 0 or j + 1 == len(w) - 5:  # no '<', or no integer digit
            return None, None
        acc = 0
        for t in w[j + 1:-5]:
            d = digit.get(t)
            if d is None:
                return None, None
            acc = acc * 10 + d
        tenth = digit.get(w[-4])
        if tenth is None:
            return None, None
        values.append((acc * 10 + tenth) / 10)
        spans.append((lo + j, e))
    return values, spans


def _timestamps_many(ids: np.ndarray, spec: TokenSpec, runs: list):
    """Vectorised over groups: the text between ``<`` and `` seconds`` must be digits, a dot and one
    digit; the printed value is (integer * 10 + tenth) / 10, the double nearest the printed text.
    """
    vocab = spec.timestamps
    if vocab is None or not runs:
        return None, None
    n = ids.shape[0]
    vs_pos = np.fromiter((r.offset - 1 for r in runs), dtype=np.int64, count=len(runs))
    if (vs_pos < 5).any():
        return None, None
    if not ((ids[vs_pos] == spec.vision_start).all() and (ids[vs_pos - 1] == vocab.close).all()
            and (ids[vs_pos - 2] == vocab.seconds).all()):
        return None, None
    ks = np.arange(5, _MAX_TS_TOKENS + 1)
    cand = vs_pos[:, None] - ks[None, :]
    hit = (cand >= 0) & (ids[np.clip(cand, 0, n - 1)] == vocab.open)
    if not hit.any(axis=1).all():
        return None, None
    open_pos = vs_pos - ks[np.argmax(hit, axis=1)]
    width = _MAX_TS_TOKENS - 4  # characters between '<' and ' seconds'
    idx = open_pos[:, None] + 1 + np.arange(width)[None, :]
    n_chars = (vs_pos - 2) - (open_pos + 1)
    inside = np.arange(width)[None, :] < n_chars[:, None]
    keys, values = _digit_table(vocab)
    tok = ids[np.clip(idx, 0, n - 1)]
    at = np.clip(np.searchsorted(keys, tok), 0, len(keys) - 1)
    val = np.where((keys[at] == tok) & inside, values[at], -1)
    cols = np.arange(width)[None, :]
    dot_col = (n_chars - 2)[:, None]
    is_dot = cols == dot_col
    is_digit = inside & ~is_dot
    if not ((val[is_dot] == 10).all() and ((val[is_digit] >= 0) & (val[is_digit] <= 9)).all()
            and (n_chars >= 3).all()):
        return None, None
    # integer part: digits before the dot; tenth: the digit after it
    power = np.where(cols < dot_col, 10 ** np.clip(dot_col - 1 - cols, 0, 18), 0)
    integer = (np.where(cols < dot_col, val, 0) * power).sum(axis=1)
    tenth = val[np.arange(len(runs)), n_chars - 1]
    seconds = ((integer * 10 + tenth) / 10).tolist()
    spans = list(zip(open_pos.tolist(), vs_pos.tolist()))
    return seconds, spans


def derive_layout(
    token_ids,
    spec: TokenSpec,
    *,
    image_grid_thw=None,
    video_grid_thw=None,
    family: str,
    convention: str,
    mrope: bool = False,
    tokenizer_digest: Optional[str] = None,
    request_id=None,
) -> HandoffLayout:
    """Layout of an expanded prompt given the family's spec and the processor's grids."""
    ids = readonly_ids(token_ids)
    image_grids = normalize_grids(image_grid_thw, "image_grid_thw")
    video_grids = normalize_grids(video_grid_thw, "video_grid_thw")
    groups = []
    for modality, pad, grids in ((IMAGE, spec.image_pad, image_grids), (VIDEO, spec.video_pad, video_grids)):
        runs_per_item = _split_runs(ids, pad, item_lengths(grids, spec.merge_size), modality, request_id)
        for grid, runs in zip(grids, runs_per_item):
            groups.append((runs[0].offset, modality, grid, runs))
    groups.sort(key=lambda g: g[0])
    items = []
    for _, modality, grid, runs in groups:
        ts, spans = _timestamps(ids, spec, runs) if modality == VIDEO else (None, None)
        items.append(MultimodalItem(modality, tuple(runs), sum(r.length for r in runs), grid, ts, spans))
    positions = delta = None
    if mrope:
        from .mrope import mrope_positions
        positions, delta = mrope_positions(ids, spec, image_grid_thw=image_grids, video_grid_thw=video_grids,
                                           request_id=request_id)
    return HandoffLayout(ids, tuple(items), spec, family=family, convention=convention,
                         mrope_position_ids=positions, mrope_position_delta=delta,
                         tokenizer_digest=tokenizer_digest)


def derive_layout_naive(token_ids, spec: TokenSpec, *, image_grid_thw=None, video_grid_thw=None,
                        family: str, convention: str, tokenizer_digest: Optional[str] = None) -> HandoffLayout:
    """Reference derivation: one Python pass per modality, no numpy. Slow; for tests only."""
    ids = [int(t) for t in token_ids]
    m2 = spec.merge_size ** 2
    groups = []
    for modality, pad, grids in ((IMAGE, spec.image_pad, normalize_grids(image_grid_thw, "image_grid_thw")),
                                 (VIDEO, spec.video_pad, normalize_grids(video_grid_thw, "video_grid_thw"))):
        need = [t * h * w // m2 for t, h, w in grids]
        pads = [i for i, t in enumerate(ids) if t == pad]
        if len(pads) != sum(need):
            raise GridMismatchError(f"{modality} pads", sum(need), len(pads))
        k = 0
        for grid, count in zip(grids, need):
            mine = pads[k:k + count]
            k += count
            runs = []
            for p in mine:
                if runs and runs[-1][0] + runs[-1][1] == p:
                    runs[-1][1] += 1
                else:
                    runs.append([p, 1])
            groups.append((mine[0], modality, grid, [PlaceholderRun(a, b) for a, b in runs]))
    groups.sort(key=lambda g: g[0])
    items = []
    for _, modality, grid, runs in groups:
        ts = spans = None
        vocab = spec.timestamps
        if modality == VIDEO and vocab is not None:
            ts, spans = [], []
            for r in runs:
                e = r.offset - 1
                if e < 2 or ids[e] != spec.vision_start or ids[e - 1] != vocab.close or ids[e - 2] != vocab.seconds:
                    ts = spans = None
                    break
                s = next((e - k for k in range(4, _MAX_TS_TOKENS + 1) if e - k >= 0 and ids[e - k] == vocab.open), None)
                chars = {d: str(i) for i, d in enumerate(vocab.digits)}
                chars[vocab.dot] = "."
                try:
                    ts.append(float("".join(chars[t] for t in ids[s + 1:e - 2])) if s is not None else None)
                except (KeyError, ValueError):
                    ts.append(None)
                if ts[-1] is None:
                    ts = spans = None
                    break
                spans.append((s, e))
        items.append(MultimodalItem(modality, tuple(runs), sum(r.length for r in runs), grid, ts, spans))
    return HandoffLayout(ids, tuple(items), spec, family=family, convention=convention,
                         tokenizer_digest=tokenizer_digest)
