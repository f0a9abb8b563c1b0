"""Construction-time checks of a :class:`~mm_handoff.layout.HandoffLayout` across its fields.

Each item checks itself (:mod:`mm_handoff.layout.items`); these check the items against the prompt and the
spec, vectorised over all runs: the runs lie inside the prompt, sorted and disjoint, cover exactly the
pads of their modality; the grids follow the merge size and the rows follow the grids; a video's
timestamps, their spans and its group structure follow from its ids; mRoPE ids cover the prompt.
"""

from __future__ import annotations

import numpy as np

from ..errors import LayoutError, MropeLengthError
from ..reading import MAX_COUNT
from .items import IMAGE, VIDEO, MultimodalItem
from .spec import TokenSpec
from .timestamp_text import parse_timestamps
from .tokens import read_only


def optional_int(instance, attribute, value) -> None:
    """Validator: None or an int in [-2**62, 2**62] (what the wire carries)."""
    if value is not None and (type(value) is not int or not -MAX_COUNT <= value <= MAX_COUNT):
        raise LayoutError(attribute.name, "an int in [-2**62, 2**62] or None", value)


def one_of(choices, prefix: str = ""):
    """Validator: one of ``choices`` (a LayoutError naming the field, not attrs' bare ValueError)."""
    def check(instance, attribute, value) -> None:
        if value not in choices:
            raise LayoutError(f"{prefix}{attribute.name}", f"one of {tuple(choices)}", value)
    return check


def valid_items(instance, attribute, value) -> None:
    for i, item in enumerate(value):
        if not isinstance(item, MultimodalItem):
            raise LayoutError(f"items[{i}]", "a MultimodalItem", type(item).__name__)


def valid_spec(instance, attribute, value) -> None:
    if not isinstance(value, TokenSpec):
        raise LayoutError("spec", "a TokenSpec", type(value).__name__)


def valid_family(instance, attribute, value) -> None:
    if type(value) is not str or not 0 < len(value) <= 256:
        raise LayoutError("family", "a family name (1 to 256 characters)", value)


def valid_digest(instance, attribute, value) -> None:
    if value is not None and (type(value) is not str or len(value) > 256):
        raise LayoutError("tokenizer_digest", "a str of at most 256 characters, or None", value)


def mrope_array(value):
    """Converter + check: ``None`` or a read-only int64 ``(3, L)`` array (``(3, 1, L)`` and tensors accepted)."""
    if value is None:
        return None
    if isinstance(value, np.ma.MaskedArray):
        raise LayoutError("mrope_position_ids", "an integer array of shape (3, L)", "a masked array")
    try:
        if hasattr(value, "detach"):  # a torch tensor, without importing torch
            value = value.detach().cpu().numpy()
        arr = np.asarray(value)
    except Exception as exc:  # ragged, or an object whose conversion raises
        raise LayoutError("mrope_position_ids", "an integer array of shape (3, L)", type(value).__name__) from exc
    if arr.ndim == 3 and arr.shape[1] == 1:
        arr = arr[:, 0, :]
    if arr.ndim != 2 or arr.shape[0] != 3 or arr.dtype.kind not in "iu" or arr.dtype == np.uint64:
        raise LayoutError("mrope_position_ids", "an integer array of shape (3, L), at most 64-bit signed",
                          f"{arr.dtype} {arr.shape}", hint="uint64 ids at or above 2**63 would wrap to negatives")
    return read_only(arr if arr.dtype == np.int64 else arr.astype(np.int64))  # a copy unless no one can change it


def check_mrope_claim(mrope, n: int | None) -> None:
    """Before mRoPE ids are converted (a copy): the length their shape claims is the prompt's ``n``."""
    if mrope is None or n is None:
        return
    try:
        shape = getattr(mrope, "shape", None)
        last = int(shape[-1]) if isinstance(shape, tuple) and shape else None
    except Exception:  # a shape that fails when read: the conversion names it
        return
    if last is not None and last != n:
        raise MropeLengthError("mrope_position_ids.shape[-1]", n, last, hint="mRoPE ids must cover the prompt exactly")


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


def check_runs_and_pads(ids: np.ndarray, rle: tuple, columns: tuple, spec: TokenSpec) -> None:
    """All runs inside the prompt, sorted and disjoint; each covers only its modality's pad id, and
    every pad of that id lies in a run.

    Read from the ids' run-length form (``rle``, canonical: neighbouring values differ), so the cost
    is in runs, not ids: the pads of the two modalities are the form's pad segments, and the runs of
    one modality, where they touch, must join into exactly those segments. ``columns``: every run's
    offset and length and its modality (0 image, 1 video), in prompt order. A failure is explained
    by :func:`_explain_runs`, which names the first bad run.
    """
    off, ln, kind, _ = columns
    n = ids.shape[0]
    values, counts = rle
    if off.shape[0] <= FEW_RUNS and values.shape[0] <= 4 * FEW_RUNS:
        if not _runs_are_the_pads(n, values.tolist(), counts.tolist(), off.tolist(), ln.tolist(), kind.tolist(),
                                  spec):
            _explain_runs(ids, off, ln, kind, spec)
        return
    ends = off + ln
    if off.shape[0] and (int(ends[-1]) > n or (off.shape[0] > 1 and bool((off[1:] < ends[:-1]).any()))):
        _explain_runs(ids, off, ln, kind, spec)  # (sorted and disjoint, the last run ends last)
    seg = np.flatnonzero((values == spec.image_pad) | (values == spec.video_pad))
    o, e, k = off, ends, kind
    if off.shape[0] > seg.shape[0] > 0:  # runs of one modality that touch join into one segment
        apart = np.flatnonzero((off[1:] != ends[:-1]) | (kind[1:] != kind[:-1]))
        first, last = np.concatenate(([0], apart + 1)), np.append(apart, off.shape[0] - 1)
        o, e, k = off[first], ends[last], kind[first]
    if seg.shape[0] == o.shape[0]:
        stop = np.cumsum(counts, dtype=np.int64)[seg]
        if _same(stop - counts[seg], o) and _same(stop, e) and _same(values[seg] == spec.video_pad, k.astype(bool)):
            return
    _explain_runs(ids, off, ln, kind, spec)


#: up to this many runs (and four times as many values in the ids' run-length form) the runs are held
#: against the pads in Python, on lists (a few operations per run beat numpy's per-call overhead)
FEW_RUNS = 32


def _runs_are_the_pads(n: int, values: list, counts: list, off: list, ln: list, kind: list, spec: TokenSpec) -> bool:
    """:func:`check_runs_and_pads`' test on lists: the runs are sorted, disjoint and inside the prompt, and,
    the runs of one modality that touch joined, they are exactly the pad segments of the run-length form
    (start, end and modality)."""
    joined: list = []
    end = 0
    for o, length, k in zip(off, ln, kind, strict=True):
        if o < end:
            return False
        end = o + length
        if joined and joined[-1][1] == o and joined[-1][2] == k:
            joined[-1][1] = end
        else:
            joined.append([o, end, k])
    if end > n:
        return False
    pads, at = [], 0
    image, video = spec.image_pad, spec.video_pad
    for v, c in zip(values, counts, strict=True):
        if v == image or v == video:
            pads.append([at, at + c, int(v == video)])
        at += c
    return pads == joined


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Two 1-D columns are equal: as lists when short (a C loop over a few Python objects beats numpy's
    call overhead there), else with one numpy comparison."""
    if a.shape != b.shape:
        return False
    return a.tolist() == b.tolist() if a.shape[0] <= 32 else bool((a == b).all())


def _explain_runs(ids: np.ndarray, off, ln, kind, spec: TokenSpec) -> None:
    """Raise the LayoutError naming the first run (or the pads) that :func:`check_runs_and_pads` refused."""
    n = ids.shape[0]
    ends = off + ln
    prev_end = np.concatenate(([0], ends[:-1]))
    outside, unsorted = ends > n, off < prev_end
    if outside.any() or unsorted.any():
        k = int(np.flatnonzero(outside | unsorted)[0])
        if outside[k]:
            raise LayoutError(f"runs[{k}]", f"inside the prompt [0, {n})", (int(off[k]), int(ends[k])))
        raise LayoutError(f"runs[{k}].offset", f">= end of the previous run {int(prev_end[k])} (sorted, disjoint)",
                          int(off[k]))
    for m, (name, pad) in enumerate(((IMAGE, spec.image_pad), (VIDEO, spec.video_pad))):
        sel = np.flatnonzero(kind == m)
        _check_pads(ids, name, pad, np.column_stack((off[sel], ends[sel])).ravel(), ln[sel], sel)
    raise LayoutError("runs", "runs covering exactly the pads", "a mismatch")  # (unreachable: a check above fails)


def _check_pads(ids: np.ndarray, name: str, pad: int, bounds, lengths, index) -> None:
    hits = ids == pad
    if bounds.shape[0]:
        # pads inside each run [s, e): reduceat over the interleaved boundaries s0, e0, s1, e1, ...
        # (a last end at the prompt's end is left out: reduceat sums the last run to the end)
        b = bounds if bounds[-1] < ids.shape[0] else bounds[:-1]
        covered = np.add.reduceat(hits, b, dtype=np.int64)[0::2]
        short = np.flatnonzero(covered != lengths)
        if short.size:
            j = int(short[0])
            raise LayoutError(f"runs[{int(index[j])}]", f"only {name} pad ids ({pad}) inside the run",
                              f"{int(lengths[j] - covered[j])} other tokens")
    total, expected = int(np.count_nonzero(hits)), int(lengths.sum())
    if total != expected:
        raise LayoutError("token_ids", f"{expected} {name} pads, all covered by runs", total,
                          hint="a pad outside every run")


def check_video_groups(ids: np.ndarray, items, spec: TokenSpec, parsed: dict | None = None) -> None:
    """Each video item's claims follow from its ids (the other side of the wire cannot make them up):

    - its timestamps and their text spans are exactly what the ids spell before each group (read
      with the spec's timestamp vocabulary; none when the spec has none or the ids spell none);
    - a video of several groups is ``<|vision_start|>`` + pads + ``<|vision_end|>`` per group, with
      only its timestamp text between one group's ``<|vision_end|>`` and the next group's marker.

    ``parsed``: item index -> :func:`~mm_handoff.layout.timestamp_text.parse_timestamps` of these ids, where the
    layout's maker already read them (the derivation does), so they are read once.
    """
    specials = np.asarray([spec.image_pad, spec.video_pad, spec.vision_start, spec.vision_end])
    for i, item in enumerate(items):
        if item.modality != VIDEO:
            continue
        off, ln = item.run_offsets, item.run_lengths
        stamps = parsed[i] if parsed and i in parsed else parse_timestamps(ids, spec, off)
        _check_stamps(i, item, stamps, spec)
        if off.shape[0] < 2 and stamps is None:  # one group without timestamps: the stock shape, no claim
            continue
        ends = off + ln
        n = ids.shape[0]
        # (the runs are sorted, so the last ends last; a reading of timestamps ends at each group's
        # <|vision_start|>, so with one only the ends are left to look at)
        wrapped = int(ends[-1]) < n and bool((ids[ends] == spec.vision_end).all()) and (
            stamps is not None or int(off[0]) >= 1 and bool((ids[off - 1] == spec.vision_start).all()))
        if not wrapped:
            closed = (ends < n) & (ids[np.minimum(ends, n - 1)] == spec.vision_end)
            opened = (off >= 1) & (ids[np.maximum(off - 1, 0)] == spec.vision_start)
            g = int(np.flatnonzero(~(closed & opened))[0])
            raise LayoutError(f"items[{i}].runs[{g}]", "a group wrapped in <|vision_start|> ... <|vision_end|>",
                              ids[max(0, int(off[g]) - 1):int(ends[g]) + 1][[0, -1]].tolist())
        if off.shape[0] < 2:
            continue
        gap_start, gap_end = ends[:-1] + 1, off[1:] - 1  # between a group's end marker and the next start marker
        if stamps is not None:
            wrong = stamps[1][1:] != gap_start
            if wrong.any():
                g = int(np.flatnonzero(wrong)[0]) + 1
                raise LayoutError(f"items[{i}].token_ids between groups {g - 1} and {g}",
                                  "only the timestamp text", (int(gap_start[g - 1]), int(stamps[1][g])),
                                  hint="tokens that are not the group's timestamp sit between two groups")
            continue
        for g, (a, b) in enumerate(zip(gap_start.tolist(), gap_end.tolist(), strict=True), start=1):
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
        if spec.timestamps is not None and item.run_offsets.shape[0] > 1:
            raise LayoutError(f"items[{i}].timestamps", "a <t seconds> text before every group (the spec "
                              "has a timestamp vocabulary)", None, hint="the ids between groups are not timestamps")
        return
    seconds, starts, ends = parsed
    if item.seconds is None:
        raise LayoutError(f"items[{i}].timestamps", "the timestamps the ids spell", "None")
    # (every item's seconds are exact tenths, as printed, so equal values are equal doubles)
    if _same(item.seconds, seconds) and _same(item.span_array[:, 0], starts) and _same(item.span_array[:, 1], ends):
        return
    deci = np.round(item.seconds * 10)
    wrong = deci != np.round(seconds * 10)
    if wrong.any():
        g = int(np.flatnonzero(wrong)[0])
        raise LayoutError(f"items[{i}].timestamps[{g}]", f"{float(seconds[g])} (what the ids spell)",
                          item.timestamps[g])
    s, e = item.span_array[:, 0], item.span_array[:, 1]
    wrong = (s != starts) | (e != ends)
    if wrong.any():
        g = int(np.flatnonzero(wrong)[0])
        raise LayoutError(f"items[{i}].timestamp_spans[{g}]", f"{(int(starts[g]), int(ends[g]))} (the text's "
                          "place in the ids)", (int(s[g]), int(e[g])))


def check_mrope_delta(mrope, delta, n: int) -> None:
    """A delta given with mRoPE ids is theirs: ``max + 1 - L``."""
    if mrope is not None and delta is not None and n:
        own = int(mrope.max()) + 1 - n
        if delta != own:
            raise LayoutError("mrope_position_delta", f"{own} (max + 1 - L of the mRoPE ids)", delta)
