"""The handoff contract: one request's multimodal prompt exactly as the aggregated path built it.

A two-frame-group video prompt (Qwen3-VL ids, transformers >= 5.10.1, 2 pads per group for
brevity) reads, with ``VS``/``VE`` the vision markers, ``P`` the video pad and ``<ts>`` the
timestamp text ``<0.0 seconds>``::

    index:  0     1   2..7   8   9  10  11  12..17  18  19  20  21   22
    token:  user  VS  <ts>   VS  P  P   VE  <ts>    VS  P   P   VE   VE ...

Its :class:`HandoffLayout` has one video item whose ``runs`` are ``(9, 2)`` and ``(19, 2)``
(half-open ``[offset, offset + length)``), ``embedding_length`` 4 and ``grid_thw`` ``(2, 2, 4)``.
TensorRT-LLM's stock prefill would rebuild one run ``(2, 4)`` instead and slice the encoder's
mRoPE ids to that shorter prompt; the layout makes the aggregated shape explicit and checkable.

>>> import numpy as np
>>> from mm_handoff.layout import HandoffLayout, MultimodalItem, PlaceholderRun
>>> from mm_handoff.spec import TokenSpec
>>> spec = TokenSpec(image_pad=5, video_pad=6, vision_start=3, vision_end=4)
>>> ids = [1, 3, 9, 3, 6, 6, 4, 9, 3, 6, 6, 4, 4, 2]
>>> video = MultimodalItem("video", (PlaceholderRun(4, 2), PlaceholderRun(9, 2)), 4, (2, 2, 4))
>>> layout = HandoffLayout(ids, (video,), spec, family="qwen3_vl", convention="pad_only")
>>> layout.run_positions, layout.run_lengths, layout.multimodal_embedding_lengths
([4, 9], [2, 2], [4])
>>> layout.token_ids.flags.writeable
False

Every field is immutable (tuples and read-only arrays) and every invariant is checked at
construction, so an invalid layout cannot exist. Checks that compare a layout with something
else (grid groups, embedding rows, mRoPE ids from the encoder, fingerprints) live in
:mod:`mm_handoff.validate`.
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Optional, Sequence

import attrs
import numpy as np

from .errors import LayoutError
from .spec import CONVENTIONS, TokenSpec

__all__ = ["PlaceholderRun", "MultimodalItem", "HandoffLayout", "IMAGE", "VIDEO", "readonly_ids"]

IMAGE = "image"
VIDEO = "video"
_ITEM_TYPE = {IMAGE: 0, VIDEO: 1}  # TensorRT-LLM's item_types vocabulary
_MAX_ID = 2**31 - 1


def readonly_ids(token_ids, field: str = "token_ids") -> np.ndarray:
    """Return token ids as a read-only 1-D int32 array (no copy when already one)."""
    if isinstance(token_ids, np.ndarray) and token_ids.dtype == np.int32 and not token_ids.flags.writeable:
        arr = token_ids
    else:
        try:
            arr = np.asarray(token_ids)
        except (TypeError, ValueError) as exc:
            raise LayoutError(field, "a 1-D sequence of token ids", type(token_ids).__name__) from exc
        if arr.ndim != 1:
            raise LayoutError(field, "a 1-D sequence of token ids", f"shape {arr.shape}")
        if arr.size and arr.dtype.kind not in "iu":
            raise LayoutError(field, "integer token ids", f"dtype {arr.dtype}")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) > _MAX_ID):
            raise LayoutError(field, f"ids in [0, {_MAX_ID}]", f"[{int(arr.min())}, {int(arr.max())}]")
        arr = np.array(arr, dtype=np.int32)
        arr.flags.writeable = False
    return arr


def _int_tuple(value) -> tuple:
    return tuple(int(v) for v in value)


@attrs.frozen
class PlaceholderRun:
    """A contiguous run of pad tokens that receives encoder rows: ``[offset, offset + length)``."""

    #: index of the run's first pad in the prompt
    offset: int
    #: number of pads (= embedding rows) in the run
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


def _runs_converter(value) -> tuple:
    return tuple(r if isinstance(r, PlaceholderRun) else PlaceholderRun(*r) for r in value)


def _optional_floats(value):
    return None if value is None else tuple(float(v) for v in value)


def _optional_spans(value):
    return None if value is None else tuple((int(s), int(e)) for s, e in value)


@attrs.frozen
class MultimodalItem:
    """One image or video in prompt order, with the pad runs that receive its embedding rows."""

    #: ``"image"`` or ``"video"``
    modality: str = attrs.field(validator=attrs.validators.in_((IMAGE, VIDEO)))
    #: pad runs in prompt order (one per temporal group for video in the aggregated layout)
    runs: tuple = attrs.field(converter=_runs_converter)
    #: rows the encoder ships for this item (= pads across its runs)
    embedding_length: int = attrs.field(converter=int)
    #: (t, h, w) in patches, t in temporal patches, as the processor reports it
    grid_thw: tuple = attrs.field(converter=_int_tuple)
    #: per-group timestamps in seconds as printed in the prompt (video only; None when unknown)
    timestamps: Optional[tuple] = attrs.field(default=None, converter=_optional_floats)
    #: per-group half-open spans of the timestamp text (video only; None when unknown)
    timestamp_spans: Optional[tuple] = attrs.field(default=None, converter=_optional_spans)


@attrs.frozen(eq=False)
class HandoffLayout:
    """One request's expanded prompt and where its multimodal embeddings go (see module doc)."""

    #: the processor-expanded prompt, read-only int32
    token_ids: np.ndarray = attrs.field(converter=readonly_ids)
    #: images and videos in prompt order
    items: tuple = attrs.field(converter=tuple)
    #: the family's ids and sizes
    spec: TokenSpec = attrs.field(validator=attrs.validators.instance_of(TokenSpec))
    #: adapter family name, e.g. ``"qwen3_vl"``
    family: str = attrs.field(kw_only=True)
    #: processor convention that produced the ids (:data:`mm_handoff.spec.CONVENTIONS`)
    convention: str = attrs.field(kw_only=True)
    #: mRoPE t/h/w ids, read-only int64 of shape (3, L); optional (recomputable)
    mrope_position_ids: Optional[np.ndarray] = attrs.field(default=None, kw_only=True)
    #: ``max(mrope) + 1 - L``; decode step i uses position ``L + i + delta``
    mrope_position_delta: Optional[int] = attrs.field(default=None, kw_only=True)
    #: digest of the tokenizer's ids the layout was built with (skew detection)
    tokenizer_digest: Optional[str] = attrs.field(default=None, kw_only=True)
    _cache: dict = attrs.field(factory=dict, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        _check_layout(self)

    # ----------------------------------------------------------------- derived, memoised views
    def _memo(self, key, build):
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = build()
            return value

    @property
    def prompt_len(self) -> int:
        return int(self.token_ids.shape[0])

    @property
    def runs(self) -> tuple:
        """All pad runs of all items, in prompt order."""
        return self._memo("runs", lambda: tuple(r for item in self.items for r in item.runs))

    @property
    def run_positions(self) -> list:
        return list(self._flat()[0])

    @property
    def run_lengths(self) -> list:
        return list(self._flat()[1])

    @property
    def item_run_cu_offsets(self) -> list:
        return list(self._flat()[2])

    @property
    def multimodal_positions(self) -> list:
        """Index of each item's first pad (TensorRT-LLM's start positions)."""
        return [item.runs[0].offset for item in self.items]

    @property
    def multimodal_lengths(self) -> list:
        """Pads per item: the aggregated path counts only pad tokens, never the markers."""
        return [sum(r.length for r in item.runs) for item in self.items]

    @property
    def multimodal_embedding_lengths(self) -> list:
        return [item.embedding_length for item in self.items]

    @property
    def special_token_offsets(self) -> list:
        """Qwen registers no multimodal special ids, so the aggregated path reports none."""
        return []

    @property
    def item_types(self) -> list:
        return [_ITEM_TYPE[item.modality] for item in self.items]

    @property
    def vision_start_positions(self) -> np.ndarray:
        return self._memo("vs", lambda: _readonly(np.flatnonzero(self.token_ids == self.spec.vision_start)))

    @property
    def vision_end_positions(self) -> np.ndarray:
        return self._memo("ve", lambda: _readonly(np.flatnonzero(self.token_ids == self.spec.vision_end)))

    @property
    def num_pads(self) -> int:
        return int(sum(self.multimodal_lengths))

    def _flat(self):
        def build():
            pos = [r.offset for r in self.runs]
            lens = [r.length for r in self.runs]
            cu = [0]
            for item in self.items:
                cu.append(cu[-1] + len(item.runs))
            return pos, lens, cu
        return self._memo("flat", build)

    def rle(self) -> tuple:
        """Run-length form of the ids: (values, counts), read-only int32; memoised."""
        def build():
            ids = self.token_ids
            starts = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
            counts = np.diff(np.append(starts, ids.shape[0])).astype(np.int32)
            return _readonly(ids[starts]), _readonly(counts)
        return self._memo("rle", build)

    def _seed_rle(self, values: np.ndarray, counts: np.ndarray) -> None:
        """Memoise the canonical run-length form these ids were just expanded from (wire decoding only)."""
        self._cache.setdefault("rle", (_readonly(np.array(values, dtype=np.int32)),
                                       _readonly(np.array(counts, dtype=np.int32))))

    def token_id_list(self) -> list:
        """The ids as a Python list (what TensorRT-LLM's dataclasses take), built from the run-length
        form: list repetition is several times faster than ``ndarray.tolist`` on pad-heavy prompts."""
        values, counts = self.rle()
        if values.shape[0] * 8 > self.prompt_len:  # many short runs: the C loop of tolist wins
            return self.token_ids.tolist()
        out: list = []
        for v, c in zip(values.tolist(), counts.tolist()):
            out += [v] * c
        return out

    def to_disagg_prefill_inputs(self) -> dict:
        """Keyword arguments for TensorRT-LLM's ``DisaggPrefillMultimodalInputs`` (plain lists)."""
        return {
            "prompt_token_ids": self.token_id_list(),
            "multimodal_lengths": self.multimodal_lengths,
            "multimodal_positions": self.multimodal_positions,
            "multimodal_embedding_lengths": self.multimodal_embedding_lengths,
            "multimodal_item_run_cu_offsets": self.item_run_cu_offsets,
            "multimodal_run_positions": self.run_positions,
            "multimodal_run_lengths": self.run_lengths,
            # the aggregated path computes no special offsets for Qwen and stores none
            "special_token_offsets": None,
            "item_types": self.item_types,
        }

    # ----------------------------------------------------------------------- wire form
    def to_wire(self) -> dict:
        """JSON-safe, checksummed form (:mod:`mm_handoff.wire`); mRoPE ids are not shipped."""
        from .wire import to_wire
        return to_wire(self)

    @classmethod
    def from_wire(cls, obj, **kwargs) -> "HandoffLayout":
        """Decode and re-validate a wire payload; every failure is a ``WireFormatError`` subclass."""
        from .wire import from_wire
        return from_wire(obj, **kwargs)

    # ----------------------------------------------------------------------- identity
    def fingerprint(self, *, include_mrope: bool = True) -> str:
        """Stable digest of ids + layout (+ mRoPE ids and delta when present and asked for)."""
        key = ("fp", include_mrope)
        return self._memo(key, lambda: _fingerprint(self, include_mrope))

    def without_mrope(self) -> "HandoffLayout":
        return attrs.evolve(self, mrope_position_ids=None, mrope_position_delta=None)

    def with_mrope(self, positions, delta: int) -> "HandoffLayout":
        """Derive a layout carrying mRoPE ids; validators run again on the new object."""
        return attrs.evolve(self, mrope_position_ids=positions, mrope_position_delta=delta)

    def __eq__(self, other) -> bool:
        if not isinstance(other, HandoffLayout):
            return NotImplemented
        if self is other:
            return True
        return (
            self.family == other.family
            and self.convention == other.convention
            and self.spec == other.spec
            and self.items == other.items
            and self.tokenizer_digest == other.tokenizer_digest
            and self.mrope_position_delta == other.mrope_position_delta
            and np.array_equal(self.token_ids, other.token_ids)
            and _same_optional_array(self.mrope_position_ids, other.mrope_position_ids)
        )

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def __repr__(self) -> str:
        kinds = ",".join(f"{i.modality}{list(i.grid_thw)}" for i in self.items)
        return (f"HandoffLayout(family={self.family!r}, convention={self.convention!r}, "
                f"len={self.prompt_len}, items=[{kinds}], runs={len(self.runs)}, "
                f"mrope={'yes' if self.mrope_position_ids is not None else 'no'})")


def _same_optional_array(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return np.array_equal(a, b)


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def _fingerprint(layout: HandoffLayout, include_mrope: bool) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(b"mm-handoff-layout/1\0")
    h.update(repr((layout.family, layout.convention, layout.tokenizer_digest, layout.spec.digest())).encode())
    values, counts = layout.rle()  # canonical and ~100x smaller than the ids
    h.update(np.ascontiguousarray(values, dtype="<i4").tobytes())
    h.update(np.ascontiguousarray(counts, dtype="<i4").tobytes())
    for item in layout.items:
        h.update(repr((item.modality, item.grid_thw, item.embedding_length, item.timestamps is None)).encode())
        h.update(np.asarray([(r.offset, r.length) for r in item.runs], dtype="<i8").tobytes())
        if item.timestamps is not None:
            h.update(np.asarray(item.timestamps, dtype="<f8").tobytes())
            h.update(np.asarray(item.timestamp_spans, dtype="<i8").tobytes())
    if include_mrope:
        if layout.mrope_position_ids is not None:
            h.update(b"mrope")
            h.update(np.ascontiguousarray(layout.mrope_position_ids, dtype="<i8").tobytes())
        if layout.mrope_position_delta is not None:
            h.update(b"delta%d" % layout.mrope_position_delta)
    return h.hexdigest()


def _check_item(i: int, item, merge: int) -> None:
    where = f"items[{i}]"
    if not isinstance(item, MultimodalItem):
        raise LayoutError(where, "a MultimodalItem", type(item).__name__)
    if not item.runs:
        raise LayoutError(f"{where}.runs", "at least one pad run", 0)
    if len(item.grid_thw) != 3 or min(item.grid_thw) < 1:
        raise LayoutError(f"{where}.grid_thw", "three positive ints (t, h, w)", item.grid_thw)
    t, h, w = item.grid_thw
    if h % merge or w % merge:
        raise LayoutError(f"{where}.grid_thw", f"h and w divisible by merge size {merge}", item.grid_thw)
    expected_rows = t * h * w // (merge * merge)
    if item.embedding_length != expected_rows:
        raise LayoutError(f"{where}.embedding_length", f"t*h*w/merge^2 = {expected_rows} for grid {item.grid_thw}",
                          item.embedding_length)
    total = sum(r.length for r in item.runs)
    if total != item.embedding_length:
        raise LayoutError(f"{where}.runs", f"run lengths summing to embedding_length {item.embedding_length}", total)
    if item.modality == IMAGE and (item.timestamps is not None or item.timestamp_spans is not None):
        raise LayoutError(f"{where}.timestamps", "None for an image", item.timestamps)
    if item.timestamps is not None:
        if len(item.timestamps) != len(item.runs):
            raise LayoutError(f"{where}.timestamps", f"one per group ({len(item.runs)})", len(item.timestamps))
        for g, t in enumerate(item.timestamps):
            # what the prompt prints: ``<{t:.1f} seconds>``, so a non-negative multiple of 0.1
            if not (math.isfinite(t) and t >= 0 and round(t * 10) / 10 == t):
                raise LayoutError(f"{where}.timestamps[{g}]", "a non-negative number with one decimal, as printed",
                                  t)
    if item.timestamp_spans is not None and len(item.timestamp_spans) != len(item.runs):
        raise LayoutError(f"{where}.timestamp_spans", f"one per group ({len(item.runs)})", len(item.timestamp_spans))


def _check_layout(layout: HandoffLayout) -> None:
    spec = layout.spec
    ids = layout.token_ids
    n = ids.shape[0]
    if n == 0:
        raise LayoutError("token_ids", "a non-empty prompt", 0)
    if not isinstance(layout.family, str) or not layout.family:
        raise LayoutError("family", "a non-empty family name", layout.family)
    if layout.convention not in CONVENTIONS:
        raise LayoutError("convention", f"one of {CONVENTIONS}", layout.convention)
    if layout.tokenizer_digest is not None and not isinstance(layout.tokenizer_digest, str):
        raise LayoutError("tokenizer_digest", "a str or None", layout.tokenizer_digest)

    for i, item in enumerate(layout.items):
        _check_item(i, item, spec.merge_size)

    # runs: ints, non-empty, inside the prompt, sorted and disjoint (one pass over the runs)
    bounds = {IMAGE: [], VIDEO: []}
    lengths = {IMAGE: [], VIDEO: []}
    index = {IMAGE: [], VIDEO: []}
    prev_end, k = 0, 0
    for item in layout.items:
        for r in item.runs:
            for name in ("offset", "length"):
                value = getattr(r, name)
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                    raise LayoutError(f"runs[{k}].{name}", "an int", value)
            o, ln = int(r.offset), int(r.length)
            if ln <= 0:
                raise LayoutError(f"runs[{k}].length", "> 0", ln)
            if o < 0 or o + ln > n:
                raise LayoutError(f"runs[{k}]", f"inside the prompt [0, {n})", (o, o + ln))
            if o < prev_end:
                raise LayoutError(f"runs[{k}].offset", f">= end of the previous run {prev_end} (sorted, disjoint)", o)
            prev_end = o + ln
            bounds[item.modality] += (o, o + ln)
            lengths[item.modality].append(ln)
            index[item.modality].append(k)
            k += 1

    # pads: every run covers only its modality's pad id, and every pad lies in a run
    for name, pad in ((IMAGE, spec.image_pad), (VIDEO, spec.video_pad)):
        hits = ids == pad
        total = int(np.count_nonzero(hits))
        expected = sum(lengths[name])
        if bounds[name]:
            # pads inside each run [s, e): reduceat over the interleaved boundaries s0, e0, s1, e1, ...
            covered = np.add.reduceat(np.append(hits, False), bounds[name], dtype=np.int64)[0::2]
            if covered.tolist() != lengths[name]:
                j = next(j for j, (c, ln) in enumerate(zip(covered.tolist(), lengths[name])) if c != ln)
                raise LayoutError(f"runs[{index[name][j]}]", f"only {name} pad ids ({pad}) inside the run",
                                  f"{lengths[name][j] - int(covered[j])} other tokens")
        if total != expected:
            raise LayoutError("token_ids", f"{expected} {name} pads, all covered by runs", total,
                              hint="a pad outside every run")

    for i, item in enumerate(layout.items):
        if item.timestamp_spans is None:
            continue
        for g, (s, e) in enumerate(item.timestamp_spans):
            if not (0 <= s < e <= item.runs[g].offset):
                raise LayoutError(f"items[{i}].timestamp_spans[{g}]", f"a span before its group at {item.runs[g].offset}",
                                  (s, e))

    mrope = layout.mrope_position_ids
    if mrope is not None:
        if not isinstance(mrope, np.ndarray):
            mrope = _to_numpy(mrope)
        if mrope.ndim == 3 and mrope.shape[1] == 1:
            mrope = mrope[:, 0, :]
        if mrope.ndim != 2 or mrope.shape[0] != 3 or mrope.dtype.kind not in "iu":
            raise LayoutError("mrope_position_ids", "an integer array of shape (3, L)", f"{mrope.dtype} {mrope.shape}")
        if mrope.shape[1] != n:
            from .errors import MropeLengthError
            raise MropeLengthError("mrope_position_ids.shape[-1]", n, int(mrope.shape[1]),
                                   hint="mRoPE ids must cover the prompt exactly")
        if mrope.dtype != np.int64 or mrope.flags.writeable:
            mrope = np.array(mrope, dtype=np.int64)
            mrope.flags.writeable = False
        object.__setattr__(layout, "mrope_position_ids", mrope)
    delta = layout.mrope_position_delta
    if delta is not None:
        if isinstance(delta, bool) or not isinstance(delta, (int, np.integer)):
            raise LayoutError("mrope_position_delta", "an int", delta)
        object.__setattr__(layout, "mrope_position_delta", int(delta))


def _to_numpy(value) -> np.ndarray:
    """Accept torch tensors without importing torch."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)
