"""Construction-time checks of the contract classes in :mod:`mm_handoff.layout`.

Converters here only normalise values that are already valid (numpy ints to ints, lists to
tuples); anything else is left as it is for a validator to reject with a :class:`LayoutError`
that names the field. Nothing is truncated: ``4.9`` rows, a ``"4"`` offset or a
``(2.7, 2, 4)`` grid are errors, not 4, 4 and ``(2, 2, 4)``.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import LayoutError, MropeLengthError
from .spec import TokenSpec, strict_int
from .stamps import parse_timestamps

__all__ = [
    "CheckedRuns", "CheckedSeconds", "CheckedSpans", "checked_seconds", "checked_spans", "run_arrays", "as_int", "run_field", "optional_int", "one_of", "runs_tuple", "grid_tuple", "optional_timestamps", "optional_spans", "item_post_init",
    "valid_items", "valid_spec", "valid_family", "valid_digest", "mrope_array", "check_items_against_spec",
    "check_runs", "check_pads", "check_video_groups", "check_mrope_len", "check_mrope_delta",
]


def as_int(value):
    """An int for ints and integral numbers (numpy ints, 0-d tensors, 4.0); anything else unchanged."""
    if type(value) is int:  # the common case, before strict_int's type ladder
        return value
    try:
        return strict_int(value)
    except (TypeError, ValueError, OverflowError):
        return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def run_field(low: int):
    """Validator: an int >= ``low``."""
    def check(instance, attribute, value) -> None:
        if type(value) is int and value >= low:
            return
        if not _is_int(value) or value < low:
            raise LayoutError(f"{type(instance).__name__}.{attribute.name}", f"an int >= {low}", value)
    return check


def optional_int(instance, attribute, value) -> None:
    """Validator: None or an int."""
    if value is not None and not _is_int(value):
        raise LayoutError(attribute.name, "an int or None", value)


def one_of(choices, prefix: str = ""):
    """Validator: one of ``choices`` (a LayoutError naming the field, not attrs' bare ValueError)."""
    def check(instance, attribute, value) -> None:
        if value not in choices:
            raise LayoutError(f"{prefix}{attribute.name}", f"one of {tuple(choices)}", value)
    return check


class CheckedRuns(tuple):
    """Runs built in one batch from integer arrays already checked (offsets >= 0, lengths >= 1; see
    ``layout.runs_from_arrays``): the item's converter keeps them as they are, and their arrays ride
    along (``offsets``, ``lengths``: read-only int64; ``total``) so layout checks stay vectorised."""


class CheckedSeconds(tuple):
    """Timestamps already checked in one vectorised pass (:func:`checked_seconds`)."""


class CheckedSpans(tuple):
    """Timestamp spans already checked in one vectorised pass (:func:`checked_spans`)."""


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def run_arrays(runs) -> tuple:
    """``(offsets, lengths)`` of an item's runs as read-only int64 arrays (kept on checked runs)."""
    if type(runs) is CheckedRuns:
        return runs.offsets, runs.lengths
    n = len(runs)
    off = np.fromiter((r.offset for r in runs), dtype=np.int64, count=n)
    ln = np.fromiter((r.length for r in runs), dtype=np.int64, count=n)
    return _readonly(off), _readonly(ln)


def checked_seconds(seconds) -> CheckedSeconds:
    """Timestamps from a float array in one vectorised pass, with :func:`optional_timestamps`' rule."""
    t = np.asarray(seconds)
    if t.ndim != 1 or (t.size and t.dtype.kind != "f"):
        raise LayoutError("MultimodalItem.timestamps", "an array of seconds", t)
    ok = np.isfinite(t) & (t >= 0)
    ok &= np.round(np.where(ok, t, 0) * 10) / 10 == t  # what ``<{t:.1f} seconds>`` prints
    if not bool(ok.all()):
        g = int(np.flatnonzero(~ok)[0])
        raise LayoutError(f"MultimodalItem.timestamps[{g}]", "a non-negative number with one decimal, as printed",
                          float(t[g]))
    return CheckedSeconds(t.tolist())


def checked_spans(starts, ends) -> CheckedSpans:
    """Spans ``(start, end)`` from two integer arrays of one length."""
    s, e = np.asarray(starts), np.asarray(ends)
    if s.ndim != 1 or s.shape != e.shape or (s.size and (s.dtype.kind not in "iu" or e.dtype.kind not in "iu")):
        raise LayoutError("MultimodalItem.timestamp_spans", "int pairs (start, end)", (s, e))
    out = CheckedSpans(zip(s.tolist(), e.tolist()))
    out.starts, out.ends = s, e
    return out


def runs_tuple(run_class):
    """Converter: runs as a tuple of ``run_class``; ``(offset, length)`` pairs are accepted."""
    def convert(value) -> tuple:
        if type(value) is CheckedRuns:
            return value
        try:
            items = tuple(value)
        except TypeError:
            raise LayoutError("MultimodalItem.runs", "a sequence of runs", type(value).__name__) from None
        out = []
        for r in items:
            if isinstance(r, run_class):
                out.append(r)
            elif isinstance(r, (tuple, list)) and len(r) == 2:
                out.append(run_class(*r))
            else:
                raise LayoutError("MultimodalItem.runs", "PlaceholderRun or (offset, length) pairs", r)
        return tuple(out)
    return convert


def grid_tuple(value) -> tuple:
    """Converter + check: three positive ints ``(t, h, w)``."""
    try:
        grid = tuple(as_int(v) for v in value)
    except TypeError:
        raise LayoutError("MultimodalItem.grid_thw", "three positive ints (t, h, w)", value) from None
    if len(grid) != 3 or not all(_is_int(v) and v >= 1 for v in grid):
        raise LayoutError("MultimodalItem.grid_thw", "three positive ints (t, h, w)", value)
    return grid


def optional_timestamps(value):
    """Converter + check: ``None`` or finite, non-negative seconds with one decimal, as printed."""
    if value is None or type(value) is CheckedSeconds:
        return value
    out = []
    for g, t in enumerate(value):
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)):
            raise LayoutError(f"MultimodalItem.timestamps[{g}]", "a number of seconds", t)
        t = float(t)
        # what the prompt prints: ``<{t:.1f} seconds>``, so a non-negative multiple of 0.1
        if not (math.isfinite(t) and t >= 0 and round(t * 10) / 10 == t):
            raise LayoutError(f"MultimodalItem.timestamps[{g}]", "a non-negative number with one decimal, as printed", t)
        out.append(t)
    return tuple(out)


def optional_spans(value):
    """Converter + check: ``None`` or half-open ``(start, end)`` int pairs."""
    if value is None or type(value) is CheckedSpans:
        return value
    out = []
    for g, span in enumerate(value):
        pair = tuple(as_int(v) for v in span) if isinstance(span, (tuple, list)) else span
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(_is_int(v) for v in pair)):
            raise LayoutError(f"MultimodalItem.timestamp_spans[{g}]", "an int pair (start, end)", span)
        out.append(pair)
    return tuple(out)


def item_post_init(item, image: str) -> None:
    """An item's own invariants: runs present and summing to its rows; timestamps for video groups only."""
    if not item.runs:
        raise LayoutError("MultimodalItem.runs", "at least one pad run", 0)
    total = item.runs.total if type(item.runs) is CheckedRuns else sum(r.length for r in item.runs)
    if total != item.embedding_length:
        raise LayoutError("MultimodalItem.runs", f"run lengths summing to embedding_length {item.embedding_length}",
                          total)
    if item.modality == image and (item.timestamps is not None or item.timestamp_spans is not None):
        raise LayoutError("MultimodalItem.timestamps", "None for an image", item.timestamps)
    for name in ("timestamps", "timestamp_spans"):
        values = getattr(item, name)
        if values is not None and len(values) != len(item.runs):
            raise LayoutError(f"MultimodalItem.{name}", f"one per group ({len(item.runs)})", len(values))
    if (item.timestamps is None) != (item.timestamp_spans is None):
        raise LayoutError("MultimodalItem.timestamp_spans", "given together with timestamps",
                          "only one of timestamps and timestamp_spans")


def valid_items(item_class):
    def check(instance, attribute, value) -> None:
        for i, item in enumerate(value):
            if not isinstance(item, item_class):
                raise LayoutError(f"items[{i}]", "a MultimodalItem", type(item).__name__)
    return check


def valid_spec(instance, attribute, value) -> None:
    if not isinstance(value, TokenSpec):
        raise LayoutError("spec", "a TokenSpec", type(value).__name__)


def valid_family(instance, attribute, value) -> None:
    if not isinstance(value, str) or not value:
        raise LayoutError("family", "a non-empty family name", value)


def valid_digest(instance, attribute, value) -> None:
    if value is not None and not isinstance(value, str):
        raise LayoutError("tokenizer_digest", "a str or None", value)


def mrope_array(value):
    """Converter + check: ``None`` or a read-only int64 ``(3, L)`` array (``(3, 1, L)`` and tensors accepted)."""
    if value is None:
        return None
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim == 3 and arr.shape[1] == 1:
        arr = arr[:, 0, :]
    if arr.ndim != 2 or arr.shape[0] != 3 or arr.dtype.kind not in "iu":
        raise LayoutError("mrope_position_ids", "an integer array of shape (3, L)", f"{arr.dtype} {arr.shape}")
    if arr.dtype != np.int64 or arr.flags.writeable:
        arr = np.array(arr, dtype=np.int64)
        arr.flags.writeable = False
    return arr


def check_mrope_len(mrope, n: int) -> None:
    if mrope is not None and mrope.shape[1] != n:
        raise MropeLengthError("mrope_position_ids.shape[-1]", n, int(mrope.shape[1]),
                               hint="mRoPE ids must cover the prompt exactly")


def check_items_against_spec(items, merge: int) -> None:
    """Grids follow the merge size and rows follow the grids."""
    for i, item in enumerate(items):
        t, h, w = item.grid_thw
        if h % merge or w % merge:
            raise LayoutError(f"items[{i}].grid_thw", f"h and w divisible by merge size {merge}", item.grid_thw)
        expected_rows = t * h * w // (merge * merge)
        if item.embedding_length != expected_rows:
            raise LayoutError(f"items[{i}].embedding_length",
                              f"t*h*w/merge^2 = {expected_rows} for grid {item.grid_thw}", item.embedding_length)


def check_runs(items, n: int, modalities) -> tuple:
    """Runs inside the prompt, sorted and disjoint (vectorised over all runs); returns per-modality
    interleaved bounds ``s0, e0, s1, e1, ...``, lengths and run indices (int64 arrays)."""
    pairs = [run_arrays(item.runs) for item in items]
    empty = np.zeros(0, dtype=np.int64)
    off = np.concatenate([p[0] for p in pairs]) if pairs else empty
    ln = np.concatenate([p[1] for p in pairs]) if pairs else empty
    ends = off + ln
    prev_end = np.concatenate(([0], ends[:-1]))
    outside, unsorted = ends > n, off < prev_end
    if outside.any() or unsorted.any():
        k = int(np.flatnonzero(outside | unsorted)[0])
        if outside[k]:
            raise LayoutError(f"runs[{k}]", f"inside the prompt [0, {n})", (int(off[k]), int(ends[k])))
        raise LayoutError(f"runs[{k}].offset", f">= end of the previous run {int(prev_end[k])} (sorted, disjoint)",
                          int(off[k]))
    kind = np.repeat(np.fromiter((modalities.index(item.modality) for item in items), dtype=np.int8,
                                 count=len(items)), [p[0].shape[0] for p in pairs])
    bounds, lengths, index = {}, {}, {}
    present = {item.modality for item in items}
    for m, name in enumerate(modalities):
        sel = (np.flatnonzero(kind == m) if len(present) > 1 else np.arange(off.shape[0])) if name in present \
            else empty
        bounds[name] = np.column_stack((off[sel], ends[sel])).ravel()
        lengths[name], index[name] = ln[sel], sel
    return bounds, lengths, index


def check_pads(ids: np.ndarray, pads, bounds, lengths, index) -> None:
    """Every run covers only its modality's pad id, and every pad lies in a run."""
    for name, pad in pads:
        hits = ids == pad
        total = int(np.count_nonzero(hits))
        expected = int(lengths[name].sum())
        if bounds[name].shape[0]:
            # pads inside each run [s, e): reduceat over the interleaved boundaries s0, e0, s1, e1, ...
            # (a last end at the prompt's end is left out: reduceat sums the last run to the end)
            b = bounds[name] if bounds[name][-1] < ids.shape[0] else bounds[name][:-1]
            covered = np.add.reduceat(hits, b, dtype=np.int64)[0::2]
            short = np.flatnonzero(covered != lengths[name])
            if short.size:
                j = int(short[0])
                raise LayoutError(f"runs[{int(index[name][j])}]", f"only {name} pad ids ({pad}) inside the run",
                                  f"{int(lengths[name][j] - covered[j])} other tokens")
        if total != expected:
            raise LayoutError("token_ids", f"{expected} {name} pads, all covered by runs", total,
                              hint="a pad outside every run")


def check_video_groups(ids: np.ndarray, items, spec: TokenSpec) -> None:
    """Each video item's claims follow from its ids (the other side of the wire cannot make them up):

    - its timestamps and their text spans are exactly what the ids spell before each group (read
      with the spec's timestamp vocabulary; none when the spec has none or the ids spell none);
    - a video of several groups is ``<|vision_start|>`` + pads + ``<|vision_end|>`` per group, with
      only its timestamp text between one group's ``<|vision_end|>`` and the next group's marker.
    """
    specials = np.asarray([spec.image_pad, spec.video_pad, spec.vision_start, spec.vision_end])
    for i, item in enumerate(items):
        if item.modality != "video":
            continue
        off, ln = run_arrays(item.runs)
        parsed = parse_timestamps(ids, spec, off)
        _check_stamps(i, item, parsed, spec)
        if off.shape[0] < 2:
            continue
        ends = off + ln
        n = ids.shape[0]
        closed = (ends < n) & (ids[np.minimum(ends, n - 1)] == spec.vision_end)
        opened = ids[off - 1] == spec.vision_start  # runs start after a marker: offsets >= 1 here
        bad = ~(closed & opened)
        if bad.any():
            g = int(np.flatnonzero(bad)[0])
            raise LayoutError(f"items[{i}].runs[{g}]", "a group wrapped in <|vision_start|> ... <|vision_end|>",
                              ids[max(0, int(off[g]) - 1):int(ends[g]) + 1][[0, -1]].tolist())
        gap_start, gap_end = ends[:-1] + 1, off[1:] - 1  # between a group's end marker and the next start marker
        if parsed is not None:
            wrong = parsed[1][1:] != gap_start
            if wrong.any():
                g = int(np.flatnonzero(wrong)[0]) + 1
                raise LayoutError(f"items[{i}].token_ids between groups {g - 1} and {g}",
                                  "only the timestamp text", (int(gap_start[g - 1]), int(parsed[1][g])),
                                  hint="tokens that are not the group's timestamp sit between two groups")
            continue
        for g, (a, b) in enumerate(zip(gap_start.tolist(), gap_end.tolist()), start=1):
            if b <= a or np.isin(ids[a:b], specials).any():
                raise LayoutError(f"items[{i}].token_ids between groups {g - 1} and {g}",
                                  "non-empty timestamp text without pads or vision markers", ids[a:b].tolist())


def _check_stamps(i: int, item, parsed, spec: TokenSpec) -> None:
    """An item's timestamps and spans equal what the ids spell (``parsed``), or both are absent."""
    if parsed is None:
        if item.timestamps is not None:
            raise LayoutError(f"items[{i}].timestamps", "None: the ids spell no timestamp before every group"
                              if spec.timestamps is not None else "None: the spec has no timestamp vocabulary",
                              item.timestamps[:8])
        if spec.timestamps is not None and len(item.runs) > 1:
            raise LayoutError(f"items[{i}].timestamps", "a <t seconds> text before every group (the spec "
                              "has a timestamp vocabulary)", None, hint="the ids between groups are not timestamps")
        return
    seconds, starts, ends = parsed
    if item.timestamps is None:
        raise LayoutError(f"items[{i}].timestamps", "the timestamps the ids spell", "None")
    deci = np.round(np.asarray(item.timestamps, dtype=np.float64) * 10)
    wrong = deci != np.round(seconds * 10)
    if wrong.any():
        g = int(np.flatnonzero(wrong)[0])
        raise LayoutError(f"items[{i}].timestamps[{g}]", f"{float(seconds[g])} (what the ids spell)",
                          item.timestamps[g])
    s, e = _span_columns(item.timestamp_spans)
    wrong = (s != starts) | (e != ends)
    if wrong.any():
        g = int(np.flatnonzero(wrong)[0])
        raise LayoutError(f"items[{i}].timestamp_spans[{g}]", f"{(int(starts[g]), int(ends[g]))} (the text's "
                          "place in the ids)", (int(s[g]), int(e[g])))


def _span_columns(spans) -> tuple:
    if type(spans) is CheckedSpans:
        return spans.starts, spans.ends
    pairs = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def check_mrope_delta(mrope, delta, n: int) -> None:
    """A delta given with mRoPE ids is theirs: ``max + 1 - L``."""
    if mrope is not None and delta is not None and n:
        own = int(mrope.max()) + 1 - n
        if delta != own:
            raise LayoutError("mrope_position_delta", f"{own} (max + 1 - L of the mRoPE ids)", delta)
