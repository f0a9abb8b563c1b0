"""One image or video of a layout, its pad runs held as columns.

An item's runs are two read-only int64 arrays, ``run_offsets`` and ``run_lengths`` (TensorRT-LLM's
``multimodal_run_positions`` / ``multimodal_run_lengths`` vocabulary), checked by the item itself in
one vectorised pass: a 768-frame video has 384 runs, and the derivation and the wire decoder build
them from arrays without one Python object per run. ``runs`` is a derived read-only view of
:class:`PlaceholderRun` values for callers that want objects. Nothing is truncated: ``4.9`` rows, a
``"4"`` offset or a ``(2.7, 2, 4)`` grid are errors naming the field, not 4, 4 and ``(2, 2, 4)``.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import numpy as np

from ..errors import LayoutError
from ..reading import MAX_ID, MAX_OBJECTS, as_int, plain_ints
from .tokens import frozen, read_only

IMAGE = "image"
VIDEO = "video"
MODALITIES = (IMAGE, VIDEO)

def _at_least(low: int):
    def check(instance, attribute, value) -> None:
        if type(value) is not int or not low <= value <= MAX_ID:
            raise LayoutError(f"{type(instance).__name__}.{attribute.name}", f"an int in [{low}, {MAX_ID}]",
                              value)
    return check


@attrs.frozen
class PlaceholderRun:
    """A contiguous run of pad tokens that receives encoder rows: ``[offset, offset + length)``."""

    #: index of the run's first pad in the prompt (an int >= 0)
    offset: int = attrs.field(converter=as_int, validator=_at_least(0))
    #: number of pads (= embedding rows) in the run (an int >= 1)
    length: int = attrs.field(converter=as_int, validator=_at_least(1))

    @property
    def end(self) -> int:
        return self.offset + self.length


#: runs given as objects or pairs (the arrays path, ``from_arrays``, is the one for many runs)


def _bounded(field: str, values, expected: str, most: int) -> list:
    """``values`` as a list of at most ``most`` entries, read lazily (an endless iterator is refused)."""
    if isinstance(values, (str, bytes, bytearray, dict, set, frozenset)):
        raise LayoutError(field, expected, type(values).__name__)
    try:
        out = list(itertools.islice(values, most + 1))
    except Exception as exc:  # not iterable, or an iterator that fails
        raise LayoutError(field, expected, type(values).__name__) from exc
    if len(out) > most:
        raise LayoutError(field, f"{expected}, at most {most}", f"more than {most}")
    return out


def _run_columns(runs) -> tuple:
    """``(offsets, lengths)`` int64 from :class:`PlaceholderRun` values or ``(offset, length)`` pairs."""
    runs = _bounded("MultimodalItem.runs", runs, "a sequence of runs", MAX_OBJECTS)
    pairs = []
    for r in runs:
        if isinstance(r, PlaceholderRun):
            pairs.append((r.offset, r.length))
        elif isinstance(r, (tuple, list)) and len(r) == 2:
            run = PlaceholderRun(*r)  # its validators name a bad offset or length
            pairs.append((run.offset, run.length))
        else:
            raise LayoutError("MultimodalItem.runs", "PlaceholderRun or (offset, length) pairs", r)
    cols = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)  # bounded by PlaceholderRun's validators
    return cols[:, 0].copy(), cols[:, 1].copy()


def _as_array(values, field: str, expected: str) -> np.ndarray:
    if isinstance(values, np.ma.MaskedArray):  # its mask would be ignored
        raise LayoutError(field, expected, "a masked array")
    try:
        return np.asarray(values)
    except Exception as exc:  # ragged, or an object whose conversion raises
        raise LayoutError(field, expected, type(values).__name__) from exc


def _int_column(values, field: str) -> np.ndarray:
    arr = _as_array(values, field, "a 1-D integer array")
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu") or arr.dtype == np.uint64:
        raise LayoutError(field, "a 1-D integer array", f"{arr.dtype} {arr.shape}")
    # bounded by the item's own check (one pass for both columns); kept as it is when no one can change it
    # (the decoder's slices), else a copy of the caller's array
    return read_only(arr, np.int64)


#: far beyond any video (the adapters' own bound is a day), and where one decimal is still exact
_MAX_SECONDS = 2.0**40


def _seconds(values) -> np.ndarray | None:
    """Timestamps as a read-only float64 array: finite, non-negative, one decimal (``<{t:.1f} seconds>``)."""
    if values is None:
        return None
    if isinstance(values, np.ndarray):
        if isinstance(values, np.ma.MaskedArray) or (values.size and values.dtype.kind not in "fiu"):
            raise LayoutError("MultimodalItem.timestamps", "an array of seconds (float or int)",
                              f"{type(values).__name__} of {values.dtype}")
    else:
        values = _bounded("MultimodalItem.timestamps", values, "a sequence of seconds", MAX_ID)
        for g, t in enumerate(values):
            if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)):
                raise LayoutError(f"MultimodalItem.timestamps[{g}]", "a number of seconds", t)
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and frozen(values):
        t = values  # no one can change it (the decoder's and the derivation's): kept as it is
    else:
        t = read_only(np.array(values, dtype=np.float64) if len(values) else np.zeros(0))  # the caller keeps theirs
    if t.ndim != 1:
        raise LayoutError("MultimodalItem.timestamps", "a 1-D sequence of seconds", f"shape {t.shape}")
    # no sign bit (a negative, or -0.0, which prints as "-0.0"), and at most the bound (NaN and infinities
    # fail it): a value that passes is finite and rounds safely
    ok = ~np.signbit(t) & (t <= _MAX_SECONDS)
    if not (bool(ok.all()) and bool((np.round(t * 10) / 10 == t).all())):
        ok &= np.round(np.where(ok, t, 0) * 10) / 10 == t
        g = int(np.flatnonzero(~ok)[0])
        raise LayoutError(f"MultimodalItem.timestamps[{g}]", "a non-negative number (below 2**40) with one "
                          "decimal, as printed", float(t[g]))
    return read_only(t)


def _spans(values) -> np.ndarray | None:
    """Timestamp text spans as a read-only ``(k, 2)`` int64 array of half-open ``[start, end)``."""
    if values is None:
        return None
    if isinstance(values, np.ndarray):
        arr = _as_array(values, "MultimodalItem.timestamp_spans", "(start, end) int pairs")
    else:
        values = _bounded("MultimodalItem.timestamp_spans", values, "(start, end) pairs", MAX_ID)
        for g, span in enumerate(values):
            pair = tuple(as_int(v) for v in span) if isinstance(span, (tuple, list)) else span
            if not (isinstance(pair, tuple) and len(pair) == 2
                    and all(type(v) is int and 0 <= v <= MAX_ID for v in pair)):
                raise LayoutError(f"MultimodalItem.timestamp_spans[{g}]", f"an int pair (start, end) in [0, "
                                  f"{MAX_ID}]", span)
        arr = np.asarray(values, dtype=np.int64).reshape(-1, 2)
    if arr.ndim != 2 or arr.shape[1:] != (2,) or (arr.size and arr.dtype.kind not in "iu"):
        raise LayoutError("MultimodalItem.timestamp_spans", "(start, end) int pairs", f"{arr.dtype} {arr.shape}")
    if arr.size and ((int(arr.max()) > MAX_ID or int(arr.min()) < 0) if arr.dtype != np.int64
                     else int(arr.view(np.uint64).max()) > MAX_ID):  # (negatives are huge unsigned)
        raise LayoutError("MultimodalItem.timestamp_spans", f"positions in [0, {MAX_ID}]",
                          (int(arr.min()), int(arr.max())))
    return read_only(arr, np.int64)


def _grid(value) -> tuple:
    """Three positive ints ``(t, h, w)`` from a tuple, list or array (bytes, a dict or a set are no grid)."""
    if type(value) is tuple and len(value) == 3 and plain_ints(value, 1, MAX_ID):
        return value  # the common case: the decoder's and the derivation's grids
    if not isinstance(value, (tuple, list, np.ndarray)):
        raise LayoutError("MultimodalItem.grid_thw", "three positive ints (t, h, w)", type(value).__name__)
    try:
        grid = tuple(as_int(v) for v in _bounded("MultimodalItem.grid_thw", value, "(t, h, w)", 4))
    except TypeError:
        raise LayoutError("MultimodalItem.grid_thw", "three positive ints (t, h, w)", value) from None
    if len(grid) != 3 or not all(type(v) is int and 1 <= v <= MAX_ID for v in grid):
        raise LayoutError("MultimodalItem.grid_thw", "three positive ints (t, h, w)", value)
    return grid


_TUPLE_ONLY, _THREE = {tuple}, {3}


def _read_heads(heads, n_runs: int, seconds) -> tuple:
    """The items' heads read strictly (at most one per run): ``(heads, first run of each, first group of
    each stamped one or None, runs in all, stamped groups in all)``."""
    try:  # at most one item per run (each has one at least)
        heads = list(itertools.islice(heads, n_runs + 1))
    except TypeError:
        raise LayoutError("MultimodalItem heads", "(modality, grid_thw, runs, stamped) per item",
                          type(heads).__name__) from None
    bounds, stamped_at, r, t = [], [], 0, 0
    for head in heads:
        if not (isinstance(head, tuple) and len(head) == 4 and type(head[3]) is bool):
            raise LayoutError("MultimodalItem heads", "(modality, grid_thw, runs, stamped) per item", head)
        modality, _, runs, stamped = head
        if type(modality) is not str or modality not in MODALITIES:
            raise LayoutError("MultimodalItem.modality", f"one of {MODALITIES}", modality)
        if type(runs) is not int or runs < 1:
            raise LayoutError("MultimodalItem.runs", "at least one pad run", runs)
        if stamped and modality == IMAGE:
            raise LayoutError("MultimodalItem.timestamps", "None for an image",
                              None if seconds is None else seconds[t:t + runs].tolist())
        bounds.append(r)
        stamped_at.append(t if stamped else None)
        r += runs
        t += runs if stamped else 0
    return heads, bounds, stamped_at, r, t


def _checked(heads, off: np.ndarray, ln: np.ndarray, seconds, spans) -> list:
    """Every item's fields from shared columns, all checked at once: a known modality and a grid per
    item, at least one run each, offsets >= 0 and lengths >= 1 (as many of each), timestamps with their
    spans, one per group, for video groups only; an item's rows are the sum of its lengths. Returns
    each item's ``__attrs_init__`` arguments (read-only slices of the columns)."""
    if off.shape != ln.shape:
        raise LayoutError("MultimodalItem.runs", "as many offsets as lengths", (off.shape[0], ln.shape[0]))
    if (seconds is None) != (spans is None):
        raise LayoutError("MultimodalItem.timestamp_spans", "given together with timestamps",
                          "only one of timestamps and timestamp_spans")
    heads, bounds, stamped_at, r, t = _read_heads(heads, off.shape[0], seconds)
    if r != off.shape[0]:
        raise LayoutError("MultimodalItem.runs", f"{r} runs for the items", off.shape[0])
    for name, values in (("timestamps", seconds), ("timestamp_spans", spans)):
        given = 0 if values is None else values.shape[0]
        if given != t:
            raise LayoutError(f"MultimodalItem.{name}", f"one per group ({t})", given)
    if not r:
        return []
    if r == 1:  # the common image: no reductions
        rows = [int(ln[0])]
        in_range = 0 <= int(off[0]) <= MAX_ID and 1 <= rows[0] <= MAX_ID
    else:
        rows = [int(ln.sum())] if len(heads) == 1 else np.add.reduceat(ln, bounds).tolist()
        # offsets in [0, MAX] and lengths in [1, MAX] in one reduction: MAX is 2**31 - 1, so a bitwise or of
        # values is in [0, MAX] exactly when each is (a negative one is above MAX as unsigned), and a length
        # is in [1, MAX] exactly when it and its predecessor are in [0, MAX]
        in_range = int((off | ln | (ln - 1)).view(np.uint64).max()) <= MAX_ID
    if not in_range:
        k = int(np.flatnonzero((off < 0) | (ln < 1) | (off > MAX_ID) | (ln > MAX_ID))[0])
        raise LayoutError("MultimodalItem.run_offsets" if not 0 <= off[k] <= MAX_ID
                          else "MultimodalItem.run_lengths",
                          f"an int in [0, {MAX_ID}] (offset) and in [1, {MAX_ID}] (length)",
                          (int(off[k]), int(ln[k])))
    grids = [head[1] for head in heads]
    if not ({*map(type, grids)} == _TUPLE_ONLY and {*map(len, grids)} == _THREE
            and plain_ints(tuple(itertools.chain.from_iterable(grids)), 1, MAX_ID)):
        grids = [_grid(grid) for grid in grids]  # (else all are three plain ints already: the common case)
    parts = []
    for (modality, _, runs, _), grid, a, b, rows_k in zip(heads, grids, bounds, stamped_at, rows, strict=True):
        sec = sp = None
        if b is not None:
            sec, sp = seconds[b:b + runs], spans[b:b + runs]
        parts.append((modality, off[a:a + runs], ln[a:a + runs], rows_k, grid, sec, sp))
    return parts


@attrs.frozen(init=False, eq=False, repr=False)
class MultimodalItem:
    """One image or video in prompt order, with the pad runs that receive its embedding rows.

    ``MultimodalItem(modality, runs, embedding_length, grid_thw, timestamps=None, timestamp_spans=None)``
    takes runs as :class:`PlaceholderRun` values or ``(offset, length)`` pairs;
    :meth:`from_arrays` takes the columns themselves.
    """

    #: ``"image"`` or ``"video"``
    modality: str
    #: each run's first pad in the prompt, in prompt order (read-only int64; one run per temporal
    #: group for video in the aggregated layout)
    run_offsets: np.ndarray
    #: pads per run (read-only int64)
    run_lengths: np.ndarray
    #: rows the encoder ships for this item (= pads across its runs)
    embedding_length: int
    #: (t, h, w) in patches, t in temporal patches, as the processor reports it
    grid_thw: tuple
    #: per-group timestamps in seconds as printed in the prompt (read-only float64; video only)
    seconds: np.ndarray | None
    #: per-group ``[start, end)`` of the timestamp text (read-only ``(k, 2)`` int64; video only)
    span_array: np.ndarray | None
    _views: dict = attrs.field(factory=dict, init=False)

    def __init__(self, modality: str, runs, embedding_length: int, grid_thw, timestamps=None,
                 timestamp_spans=None) -> None:
        if type(modality) is not str or modality not in MODALITIES:  # (a str subclass's __eq__ is not asked)
            raise LayoutError("MultimodalItem.modality", f"one of {MODALITIES}", modality)
        rows = as_int(embedding_length)
        if type(rows) is not int or rows < 1:
            raise LayoutError("MultimodalItem.embedding_length", "an int >= 1", embedding_length)
        grid = _grid(grid_thw)
        offsets, lengths = (read_only(c) for c in _run_columns(runs))
        seconds, spans = _seconds(timestamps), _spans(timestamp_spans)
        (part,) = _checked(((modality, grid, offsets.shape[0], seconds is not None or spans is not None),),
                           offsets, lengths, seconds, spans)
        if part[3] != rows:
            raise LayoutError("MultimodalItem.runs", f"run lengths summing to embedding_length {rows}", part[3])
        self.__attrs_init__(*part)

    @classmethod
    def from_arrays(cls, modality: str, offsets, lengths, grid_thw, seconds=None, spans=None) -> MultimodalItem:
        """An item from its columns (offsets, lengths; seconds and ``(k, 2)`` spans for a video),
        checked in one vectorised pass; its rows are the sum of its lengths."""
        offsets = _int_column(offsets, "MultimodalItem.run_offsets")
        return cls.from_columns(((modality, grid_thw, offsets.shape[0], seconds is not None or spans is not None),),
                                offsets, lengths, seconds, spans)[0]

    @classmethod
    def from_columns(cls, heads, offsets, lengths, seconds=None, spans=None) -> tuple:
        """Many items from one set of columns, checked in one vectorised pass for all of them.

        ``heads``: per item ``(modality, grid_thw, runs, stamped)``; ``offsets`` / ``lengths``: every
        item's runs, item after item; ``seconds`` / ``spans``: every stamped item's groups, in the same
        order. Each item holds read-only slices of the columns (what the wire decoder and the
        derivation hand over: no arrays and no checks of its own per item).
        """
        parts = _checked(heads, _int_column(offsets, "MultimodalItem.run_offsets"),
                         _int_column(lengths, "MultimodalItem.run_lengths"), _seconds(seconds), _spans(spans))
        out = []
        for part in parts:
            item = cls.__new__(cls)
            item.__attrs_init__(*part)
            out.append(item)
        return tuple(out)

    # ------------------------------------------------------------------ derived, read-only views
    def _view(self, key: str, build) -> Any:
        try:
            return self._views[key]
        except KeyError:
            value = self._views[key] = build()
            return value

    @property
    def runs(self) -> tuple:
        """The runs as :class:`PlaceholderRun` values (built on first use)."""
        return self._view("runs", lambda: tuple(
            map(PlaceholderRun, self.run_offsets.tolist(), self.run_lengths.tolist())))

    @property
    def timestamps(self) -> tuple | None:
        """Per-group seconds as a tuple of floats (None when unknown)."""
        return None if self.seconds is None else self._view("ts", lambda: tuple(self.seconds.tolist()))

    @property
    def timestamp_spans(self) -> tuple | None:
        """Per-group ``(start, end)`` pairs (None when unknown)."""
        return None if self.span_array is None else self._view(
            "spans", lambda: tuple(map(tuple, self.span_array.tolist())))

    @property
    def first_offset(self) -> int:
        """The item's first pad."""
        return int(self.run_offsets[0])

    @property
    def end(self) -> int:
        """One past the item's last pad."""
        return int(self.run_offsets[-1] + self.run_lengths[-1])

    # ------------------------------------------------------------------------------- identity
    def _key(self) -> tuple:
        return (self.modality, self.grid_thw, self.embedding_length, self.run_offsets.tobytes(),
                self.run_lengths.tobytes(), None if self.seconds is None else self.seconds.tobytes(),
                None if self.span_array is None else self.span_array.tobytes())

    def __eq__(self, other) -> bool:
        if not isinstance(other, MultimodalItem):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        runs = self.run_offsets.shape[0]
        head = ", ".join(f"({o}, {n})" for o, n in zip(self.run_offsets[:4].tolist(), self.run_lengths[:4].tolist(),
                                                        strict=True))
        ts = "" if self.seconds is None else f", timestamps={self.seconds[:4].tolist()}{'...' if runs > 4 else ''}"
        return (f"MultimodalItem({self.modality!r}, runs=[{head}{', ...' if runs > 4 else ''}] ({runs}), "
                f"embedding_length={self.embedding_length}, grid_thw={self.grid_thw}{ts})")

