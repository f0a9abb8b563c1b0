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
>>> from mm_handoff.layout.spec import TokenSpec
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
:mod:`mm_handoff.checks`.

Three ways in besides the constructor, each checking every invariant: :func:`derive_layout`, from the
encoder's expanded ids and the grids (one O(L) pass for the ids' run-length form, the rest over runs: the
pad segments of a modality in prompt order are split into items by the per-item pad counts the grids give,
and into runs wherever pads stop being consecutive or an item ends, the way TensorRT-LLM's aggregated path
delimits them, so every convention and the stock single-run shape work); :meth:`HandoffLayout.from_rle`;
and :meth:`HandoffLayout.from_wire`.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np

from ..errors import GridMismatchError, LayoutError, WireFormatError, typed_failures
from ..reading import MAX_ID, MAX_OBJECTS, as_int, resolve_limits
from . import wire
from .invariants import (
    check_items_against_spec,
    check_mrope_claim,
    check_mrope_delta,
    check_mrope_len,
    check_runs_and_pads,
    check_video_groups,
    mrope_array,
    one_of,
    optional_int,
    valid_digest,
    valid_family,
    valid_items,
    valid_spec,
)
from .items import IMAGE, VIDEO, MultimodalItem
from .mrope import mrope_positions
from .spec import CONVENTIONS, TokenSpec, item_lengths, normalize_grids
from .timestamp_text import parse_timestamps
from .tokens import (
    FEW_VALUES,
    claimed_size,
    filled_id_list,
    frozen,
    read_only,
    readonly_ids,
    rle_id_list,
    run_length_form,
)

_ITEM_TYPE = {IMAGE: 0, VIDEO: 1}  # TensorRT-LLM's item_types vocabulary
#: every run's modality code of a layout of one modality and up to this many runs: a read-only slice of these
_KINDS_MAX = 4096
_KINDS = (read_only(np.zeros(_KINDS_MAX, np.int8)), read_only(np.ones(_KINDS_MAX, np.int8)))


def _kind_column(codes: list, sizes: list) -> np.ndarray:
    """The modality code (0 image, 1 video) of every run, item after item (``sizes[i]`` runs of ``codes[i]``),
    read-only: a slice of a shared column when every item has one modality (no array built per request)."""
    total = sum(sizes)
    if total <= _KINDS_MAX and len(set(codes)) == 1:
        return _KINDS[codes[0]][:total]
    return read_only(np.repeat(np.array(codes, np.int8), sizes))


def _as_tuple(values: Iterable[Any]) -> tuple:
    """The items as a tuple, read lazily and bounded (an endless or failing iterable is a LayoutError)."""
    if isinstance(values, (str, bytes, dict, set, frozenset)):
        raise LayoutError("items", "a sequence of MultimodalItem", type(values).__name__)
    try:
        out = tuple(itertools.islice(values, MAX_OBJECTS + 1))
    except Exception as exc:
        raise LayoutError("items", "a sequence of MultimodalItem", type(values).__name__) from exc
    if len(out) > MAX_OBJECTS:
        raise LayoutError("items", f"at most {MAX_OBJECTS} items", f"more than {MAX_OBJECTS}")
    return out




@attrs.frozen(eq=False, init=False)
class HandoffLayout:
    """One request's expanded prompt and where its multimodal embeddings go (see module doc).

    Identity (``==``, ``hash``, :meth:`fingerprint`) covers what travels in the wire form: ids,
    items, spec, family, convention, tokenizer digest and mRoPE delta. The mRoPE ids are derived
    data (the adapter recomputes them from ids + grids) and are not part of it.
    """

    #: the processor-expanded prompt, read-only int32
    token_ids: np.ndarray = attrs.field(converter=readonly_ids)
    #: images and videos in prompt order
    items: tuple = attrs.field(converter=_as_tuple, validator=valid_items)
    #: the family's ids and sizes
    spec: TokenSpec = attrs.field(validator=valid_spec)
    #: adapter family name, e.g. ``"qwen3_vl"``
    family: str = attrs.field(kw_only=True, validator=valid_family)
    #: processor convention that produced the ids (:data:`mm_handoff.layout.spec.CONVENTIONS`)
    convention: str = attrs.field(kw_only=True, validator=one_of(CONVENTIONS))
    #: mRoPE t/h/w ids, read-only int64 of shape (3, L); optional (recomputable)
    mrope_position_ids: np.ndarray | None = attrs.field(default=None, kw_only=True, converter=mrope_array)
    #: ``max(mrope) + 1 - L``; decode step i uses position ``L + i + delta``
    mrope_position_delta: int | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(as_int), validator=optional_int)
    #: digest of the tokenizer's ids the layout was built with (skew detection)
    tokenizer_digest: str | None = attrs.field(default=None, kw_only=True, validator=valid_digest)
    _cache: dict = attrs.field(factory=dict, init=False, repr=False)

    def __init__(self, token_ids, items, spec: TokenSpec, *, family: str, convention: str,
                 mrope_position_ids=None, mrope_position_delta=None, tokenizer_digest: str | None = None,
                 limits=None) -> None:
        # the ids counted before they are converted (and once converted), then the mRoPE ids against them
        token_ids = readonly_ids(token_ids, "token_ids", max_len=resolve_limits(limits).max_prompt_len)
        check_mrope_claim(mrope_position_ids, int(token_ids.shape[0]))
        self.__attrs_init__(token_ids, items, spec, family=family, convention=convention,
                            mrope_position_ids=mrope_position_ids, mrope_position_delta=mrope_position_delta,
                            tokenizer_digest=tokenizer_digest)
        self._check()

    def _check(self) -> None:
        """Cross-field invariants; each check names the field it rejects."""
        n = self.prompt_len
        if n == 0:
            raise LayoutError("token_ids", "a non-empty prompt", 0)
        check_items_against_spec(self.items, self.spec.merge_size)
        check_runs_and_pads(self.token_ids, self.rle(), self._columns(), self.spec)
        check_video_groups(self.token_ids, self.items, self.spec, self._cache.pop("parsed", None))
        check_mrope_len(self.mrope_position_ids, n)
        check_mrope_delta(self.mrope_position_ids, self.mrope_position_delta, n)

    @classmethod
    def _assembled(cls, token_ids, items, spec: TokenSpec, *, seeds: dict, **kwargs) -> HandoffLayout:
        """A layout whose derived views its maker hands over (the run-length form, the run columns,
        the wire content), each computed from the very fields given here; every invariant is then
        checked as in the constructor, on those views."""
        check_mrope_claim(kwargs.get("mrope_position_ids"), claimed_size(token_ids))
        layout = cls.__new__(cls)
        layout.__attrs_init__(token_ids, items, spec, **kwargs)
        layout._cache.update(seeds)
        layout._check()
        return layout

    @classmethod
    @typed_failures("rle", LayoutError)
    def from_rle(cls, values, counts, items, spec: TokenSpec, *, limits=None, **kwargs) -> HandoffLayout:
        """A layout whose ids are given run-length encoded (``values[i]`` repeated ``counts[i]`` times).

        The ids they expand to are counted first and bounded by ``limits.max_prompt_len``
        (:class:`~mm_handoff.reading.Limits`); then they are expanded and every invariant is checked as in
        the constructor; the run-length form is kept when it is canonical, so :meth:`rle` and the wire form
        reuse it.
        """
        most = resolve_limits(limits).max_prompt_len
        for name, given in (("rle.values", values), ("rle.counts", counts)):
            size = claimed_size(given)
            if size is not None and size > most:  # counted before either is converted
                raise LayoutError(name, f"at most {most} runs (limits.max_prompt_len)", size)
        try:
            values, counts = np.asarray(values), np.asarray(counts)
        except Exception as exc:  # ragged, or an object whose conversion raises
            raise LayoutError("rle", "values and counts, two 1-D int sequences", type(counts).__name__) from exc
        if values.ndim != 1 or counts.shape != values.shape:
            raise LayoutError("rle", "values and counts of one length", (values.shape, counts.shape))
        if counts.shape[0] > most:
            raise LayoutError("rle", f"at most {most} runs (limits.max_prompt_len)", counts.shape[0])
        if counts.size and (counts.dtype.kind not in "iu" or int(counts.min()) < 1
                            or int(counts.max()) > MAX_ID):
            raise LayoutError("rle.counts", f"int counts in [1, {MAX_ID}]", f"{counts.dtype}"
                              + (f" in [{counts.min()}, {counts.max()}]" if counts.dtype.kind in "iu" else ""))
        total = int(counts.sum(dtype=np.int64))
        if total > most:
            raise LayoutError("rle.counts", f"at most {most} ids in all (limits.max_prompt_len)", total,
                              hint="raise the limits for longer prompts")
        check_mrope_claim(kwargs.get("mrope_position_ids"), total)
        values = readonly_ids(values, "rle.values")
        counts = counts if counts.dtype == np.int32 and frozen(counts) else read_only(counts.astype(np.int32))
        canonical = values.shape[0] < 2 or not bool((values[1:] == values[:-1]).any())
        return cls._assembled(read_only(np.repeat(values, counts)), items, spec,
                              seeds={"rle": (values, counts)} if canonical else {}, **kwargs)

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
        return list(self.item_pad_bounds()[0])

    def item_pad_bounds(self) -> tuple:
        """``(firsts, ends)``: each item's first pad and one past its last pad, as tuples (from the run
        columns in one step, not item by item; memoised, so no caller can change them)."""
        def build():
            off, ln, _, cu = self._columns()
            if len(cu) < 2:
                return (), ()
            last = np.asarray(cu[1:]) - 1
            return tuple(off[cu[:-1]].tolist()), tuple((off[last] + ln[last]).tolist())
        return self._memo("bounds", build)

    @property
    def multimodal_lengths(self) -> list:
        """Pads per item: the aggregated path counts only pad tokens, never the markers (= the item's
        rows: its construction checks that its runs sum to them)."""
        return [item.embedding_length for item in self.items]

    #: TensorRT-LLM's ``DisaggPrefillMultimodalInputs`` names the same per-item counts twice (pads in
    #: the prompt, rows of the embedding); for this family they are one list, so one property serves both
    multimodal_embedding_lengths = multimodal_lengths

    @property
    def special_token_offsets(self) -> None:
        """None: Qwen registers no multimodal special ids, so the aggregated path stores none."""
        return None

    @property
    def item_types(self) -> list:
        return [_ITEM_TYPE[item.modality] for item in self.items]

    @property
    def vision_start_positions(self) -> np.ndarray:
        return self._memo("vs", lambda: read_only(np.flatnonzero(self.token_ids == self.spec.vision_start)))

    @property
    def vision_end_positions(self) -> np.ndarray:
        return self._memo("ve", lambda: read_only(np.flatnonzero(self.token_ids == self.spec.vision_end)))

    @property
    def num_pads(self) -> int:
        return int(sum(self.multimodal_lengths))

    def _columns(self) -> tuple:
        """Every run's offset and length (int64), the modality of each (0 image, 1 video) and where each
        item's runs begin (``cu``, one more than the items): the items' columns end to end."""
        def build():
            items = self.items
            if len(items) == 1:
                item = items[0]
                k = item.run_offsets.shape[0]
                return item.run_offsets, item.run_lengths, _kind_column([_ITEM_TYPE[item.modality]], [k]), [0, k]
            if not items:
                return _NO_RUNS, _NO_RUNS, read_only(_NO_RUNS, np.int8), [0]
            sizes = [item.run_offsets.shape[0] for item in items]
            kind = _kind_column([_ITEM_TYPE[item.modality] for item in items], sizes)
            return (read_only(np.concatenate([item.run_offsets for item in items])),
                    read_only(np.concatenate([item.run_lengths for item in items])), read_only(kind),
                    [0, *itertools.accumulate(sizes)])
        return self._memo("cols", build)

    def _flat(self):
        def build():
            off, ln, _, cu = self._columns()
            return tuple(off.tolist()), tuple(ln.tolist()), tuple(cu)
        return self._memo("flat", build)

    def rle(self) -> tuple:
        """Run-length form of the ids: (values, counts), read-only int32; memoised."""
        return self._memo("rle", lambda: run_length_form(self.token_ids))

    def token_id_list(self) -> list:
        """The ids as a Python list (what TensorRT-LLM's dataclasses take): from
        :func:`~mm_handoff.layout.tokens.filled_id_list` with the commonest pad as the fill, on long prompts
        of few runs; else ``ndarray.tolist``, whose C loop wins on short or fragmented ones."""
        ids, spec, n = self.token_ids, self.spec, self.prompt_len
        values, counts = self.rle()
        if values.shape[0] <= FEW_VALUES:  # a few runs of one id (an image's prompt): each a repeated int
            return rle_id_list(values, counts)
        off, ln, kind, _ = self._columns()
        if n < 256 or (off.shape[0] + 1) * 16 > n:
            return ids.tolist()
        video = sum(i.embedding_length for i in self.items if i.modality == VIDEO)
        fill_kind = int(2 * video >= self.num_pads)
        sel = kind == fill_kind  # the runs of the fill's modality hold exactly its pads (a checked invariant)
        return filled_id_list(ids, spec.video_pad if fill_kind else spec.image_pad, off[sel], off[sel] + ln[sel])

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
            "special_token_offsets": self.special_token_offsets,
            "item_types": self.item_types,
        }

    # ----------------------------------------------------------------------- wire form
    def to_wire(self) -> dict:
        """JSON-safe, checksummed form (:mod:`mm_handoff.layout.wire`); mRoPE ids are not shipped."""
        return wire.encode(self._content(), checksum=self.fingerprint())

    def _content(self) -> wire.WireContent:
        """What travels, as the codec's plain values (:func:`wire.checksum` of them is :meth:`fingerprint`)."""
        def build() -> wire.WireContent:
            values, counts = self.rle()
            off, ln, _, _ = self._columns()
            stamped = [item for item in self.items if item.seconds is not None]
            heads = tuple((item.modality, item.grid_thw, item.run_offsets.shape[0], item.seconds is not None)
                          for item in self.items)
            return wire.WireContent(family=self.family, convention=self.convention,
                                    tokenizer_digest=self.tokenizer_digest, spec=self.spec, values=values,
                                    counts=counts, heads=heads, offsets=off, lengths=ln,
                                    seconds=read_only(np.concatenate([i.seconds for i in stamped]) if stamped
                                                      else np.zeros(0)),
                                    spans=read_only(np.concatenate([i.span_array for i in stamped]) if stamped
                                                    else np.zeros((0, 2), dtype=np.int64)),
                                    mrope_position_delta=self.mrope_position_delta, checksum="")
        return self._memo("content", build)

    @classmethod
    @typed_failures("payload", WireFormatError)
    def from_wire(cls, obj, *, limits=None, request_id=None) -> HandoffLayout:
        """Decode and re-validate a wire payload (dict, JSON str or bytes).

        A malformed payload raises a :class:`~mm_handoff.errors.WireFormatError` subclass (bounded by
        ``limits``, :class:`~mm_handoff.reading.Limits`); content altered in transit raises
        :class:`WireFormatError` before any layout object is built; a well-formed, intact payload
        describing an invalid layout raises the :class:`LayoutError` naming the broken invariant.
        """
        content = wire.decode(obj, limits=limits, request_id=request_id)
        stamped = len(content.seconds) > 0
        seconds, spans = (content.seconds, content.spans) if stamped else (None, None)
        try:
            items = MultimodalItem.from_columns(content.heads, content.offsets, content.lengths, seconds, spans)
            sizes = [k for _, _, k, _ in content.heads]
            kind = _kind_column([_ITEM_TYPE[m] for m, _, _, _ in content.heads], sizes)
            cu = [0, *itertools.accumulate(sizes)]
            # the decoder's columns are the items' (their runs are slices of them), its content the layout's
            seeds = {"rle": (content.values, content.counts), "cols": (content.offsets, content.lengths, kind, cu),
                     "content": content, ("fp", False): content.checksum}
            return cls._assembled(read_only(np.repeat(content.values, content.counts)), items, content.spec,
                                  seeds=seeds, family=content.family, convention=content.convention,
                                  mrope_position_delta=content.mrope_position_delta,
                                  tokenizer_digest=content.tokenizer_digest)
        except LayoutError as exc:
            raise exc.with_request(request_id)  # noqa: B904

    # ----------------------------------------------------------------------- identity
    def fingerprint(self, *, include_mrope: bool = False) -> str:
        """Stable digest of what travels: ids, items, spec, family, convention, digest, mRoPE delta.

        Both sides of a handoff compute the same value (the wire form carries it as its checksum).
        ``include_mrope=True`` also digests the mRoPE ids when present (derived data, for tests).
        """
        key = ("fp", include_mrope)
        return self._memo(key, lambda: _fingerprint(self, include_mrope))

    def without_mrope(self) -> HandoffLayout:
        return attrs.evolve(self, mrope_position_ids=None)

    def with_mrope(self, positions, delta: int) -> HandoffLayout:
        """Derive a layout carrying mRoPE ids; validators run again on the new object."""
        return attrs.evolve(self, mrope_position_ids=positions, mrope_position_delta=delta)

    def __eq__(self, other) -> bool:
        if not isinstance(other, HandoffLayout):
            return NotImplemented
        return self is other or self.fingerprint() == other.fingerprint()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def __repr__(self) -> str:
        kinds = ",".join(f"{i.modality}{list(i.grid_thw)}" for i in self.items)
        return (f"HandoffLayout(family={self.family!r}, convention={self.convention!r}, "
                f"len={self.prompt_len}, items=[{kinds}], runs={len(self.runs)}, "
                f"mrope={'yes' if self.mrope_position_ids is not None else 'no'})")


_NO_RUNS = read_only(np.zeros(0, dtype=np.int64))


def _fingerprint(layout: HandoffLayout, include_mrope: bool) -> str:
    base = wire.checksum(layout._content())
    if not include_mrope or layout.mrope_position_ids is None:
        return base
    h = hashlib.sha256(base.encode())
    h.update(b"mrope")
    h.update(np.ascontiguousarray(layout.mrope_position_ids, dtype="<i8").tobytes())
    return h.hexdigest()[:32]


# ------------------------------------------------------------------ derived from expanded ids
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
        raise exc.with_request(request_id)  # noqa: B904
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
    ``limits``, :class:`~mm_handoff.reading.Limits`); any contradiction raises, naming ``request_id``."""
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
        positions, delta = mrope_positions(ids, spec, image_grid_thw=image_grids, video_grid_thw=video_grids,
                                           limits=limits, request_id=request_id)
    try:
        # the run-length form and the timestamps are the ids' own (computed above from these very ids)
        return HandoffLayout._assembled(ids, items, spec, seeds={"rle": rle, "parsed": parsed}, family=family,
                                        convention=convention, mrope_position_ids=positions,
                                        mrope_position_delta=delta, tokenizer_digest=tokenizer_digest)
    except LayoutError as exc:
        raise exc.with_request(request_id)  # noqa: B904
