"""The small, family-specific facts a layout is derived from: token ids and patch sizes.

A :class:`TokenSpec` is all the core needs to find pads, markers and timestamps in an expanded
prompt. Adapters build one from the HF config / tokenizer (or the released checkpoints' defaults).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Sequence
from typing import Any

import attrs

from ..errors import GridMismatchError, LayoutError
from ..reading import MAX_ID, as_int, plain_ints, plain_sequence, resolve_limits, sequence_len, strict_int
from .vocabularies import known_open_merged

#: transformers >= 5.10.1 replaces only ``<|video_pad|>``; the template's outer markers stay.
PAD_ONLY = "pad_only"
#: transformers <= 5.9 and Cosmos3-Edge replace the whole vs/pad/ve trio (vLLM follows its transformers).
REPLACE_WRAPPER = "replace_wrapper"
CONVENTIONS = (PAD_ONLY, REPLACE_WRAPPER)


_SEQUENCES, _THREE = {list, tuple}, {3}


def _token_id(instance, attribute, value) -> None:
    if type(value) is not int or not 0 <= value <= MAX_ID:
        raise LayoutError(f"spec.{attribute.name}", f"an int token id in [0, {MAX_ID}]", value)


def _positive(instance, attribute, value) -> None:
    if type(value) is not int or not 1 <= value <= 64:
        raise LayoutError(f"spec.{attribute.name}", "a positive int (at most 64)", value)


def _digit_ids(value: Any) -> Any:
    if isinstance(value, (str, bytes, bytearray)):  # bytes would read as small ids
        return value
    try:
        return tuple(as_int(d) for d in itertools.islice(value, 11))  # ten ids, or one too many
    except Exception:  # not iterable, or an iterator that fails
        return value


#: the most merged-``<`` ids a vocabulary may name (the Qwen3 and Qwen3.5 vocabularies have 93 each)
MAX_MERGED_OPENS = 4096
_TS_KEYS = {"open", "close", "dot", "seconds", "digits"}


def _merged_ids(value: Any) -> Any:
    """Merged-``<`` ids as an ascending tuple of plain ints, counted before they are read; anything else is
    returned as it is, for the validator to name."""
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, (list, tuple, frozenset, set)) \
            or len(value) > MAX_MERGED_OPENS:
        return value
    try:
        return tuple(sorted(as_int(d) for d in value))
    except Exception:  # an id that is not an int
        return value


@attrs.frozen(cache_hash=True)
class TimestampVocab:
    """Token ids of ``<{t:.1f} seconds>``: digits are single tokens in the Qwen vocabularies."""

    #: id of ``<``
    open: int = attrs.field(converter=as_int, validator=_token_id)
    #: id of ``>``
    close: int = attrs.field(converter=as_int, validator=_token_id)
    #: id of ``.``
    dot: int = attrs.field(converter=as_int, validator=_token_id)
    #: id of `` seconds``
    seconds: int = attrs.field(converter=as_int, validator=_token_id)
    #: ids of ``0`` .. ``9``
    digits: tuple = attrs.field(converter=_digit_ids)
    #: ids of the longer tokens that end in ``<`` (``Ġ<``, ``:<``, ...): HF tokenizes the expanded text whole,
    #: so the ``<`` of a video's first timestamp merges with spaces or punctuation right before it
    open_merged: tuple = attrs.field(default=(), converter=_merged_ids)

    @digits.validator
    def _check_digits(self, attribute, value) -> None:
        if type(value) is not tuple or len(value) != 10 \
                or any(type(d) is not int or not 0 <= d <= MAX_ID for d in value):
            raise LayoutError("spec.timestamps.digits", "10 int token ids", value)

    @open_merged.validator
    def _check_merged(self, attribute, value) -> None:
        if type(value) is not tuple or len(value) > MAX_MERGED_OPENS \
                or any(type(d) is not int or not 0 <= d <= MAX_ID for d in value) \
                or any(a >= b for a, b in zip(value, value[1:], strict=False)):
            raise LayoutError("spec.timestamps.open_merged", f"at most {MAX_MERGED_OPENS} int token ids, ascending "
                              "and distinct", value if type(value) is not tuple else f"{len(value)} values")

    def __attrs_post_init__(self) -> None:
        ids = (self.open, self.close, self.dot, self.seconds, *self.digits)
        if len(set(ids)) != len(ids):
            raise LayoutError("spec.timestamps", "14 distinct ids ('<', '>', '.', ' seconds', '0'..'9')", ids)
        if set(ids) & set(self.open_merged):
            raise LayoutError("spec.timestamps.open_merged", "ids other than the 14 timestamp ids",
                              sorted(set(ids) & set(self.open_merged)))

    def as_dict(self) -> dict:
        """The plain form; ``open_merged`` is left out where it is the released vocabulary's own (93 ids that
        :meth:`from_dict` restores from the other ids), so a payload stays small and a digest unchanged."""
        out = {"open": self.open, "close": self.close, "dot": self.dot,
               "seconds": self.seconds, "digits": list(self.digits)}
        if self.open_merged != self._known_merged():
            out["open_merged"] = list(self.open_merged)
        return out

    def _known_merged(self) -> tuple:
        return known_open_merged(self.open, self.close, self.dot, self.seconds, self.digits) or ()

    @classmethod
    def from_dict(cls, data: dict) -> TimestampVocab:
        """The vocabulary of :meth:`as_dict`'s form (its keys checked by the caller); without ``open_merged``,
        the released vocabulary's own where the ids are one's, none otherwise."""
        merged = data.get("open_merged")
        if merged is None:
            merged = known_open_merged(as_int(data["open"]), as_int(data["close"]), as_int(data["dot"]),
                                       as_int(data["seconds"]), _digit_ids(data["digits"])) or ()
        return cls(open=data["open"], close=data["close"], dot=data["dot"], seconds=data["seconds"],
                   digits=data["digits"], open_merged=merged)


@attrs.frozen(cache_hash=True)
class TokenSpec:
    """Ids and sizes that define a family's multimodal prompt layout."""

    #: ``<|image_pad|>``
    image_pad: int = attrs.field(converter=as_int, validator=_token_id)
    #: ``<|video_pad|>``
    video_pad: int = attrs.field(converter=as_int, validator=_token_id)
    #: ``<|vision_start|>``
    vision_start: int = attrs.field(converter=as_int, validator=_token_id)
    #: ``<|vision_end|>``
    vision_end: int = attrs.field(converter=as_int, validator=_token_id)
    #: spatial merge size (pads per group = h * w / merge**2)
    merge_size: int = attrs.field(default=2, converter=as_int, validator=_positive)
    #: frames per temporal patch (2 for Qwen3-VL, 1 for Cosmos3-Edge)
    temporal_patch_size: int = attrs.field(default=2, converter=as_int, validator=_positive)
    #: timestamp text ids, when the tokenizer is known
    timestamps: TimestampVocab | None = attrs.field(default=None)

    @timestamps.validator
    def _check_timestamps(self, attribute, value) -> None:
        if value is not None and not isinstance(value, TimestampVocab):
            raise LayoutError("spec.timestamps", "a TimestampVocab or None", type(value).__name__)

    def __attrs_post_init__(self) -> None:
        ids = (self.image_pad, self.video_pad, self.vision_start, self.vision_end)
        if len(set(ids)) != 4:
            raise LayoutError("spec", "four distinct ids (image_pad, video_pad, vision_start, vision_end)", ids)
        if self.timestamps is not None:
            clash = set(ids) & {self.timestamps.open, self.timestamps.close, self.timestamps.dot,
                                self.timestamps.seconds, *self.timestamps.digits}
            if clash:
                raise LayoutError("spec.timestamps", "ids distinct from the pads and vision markers", sorted(clash))

    def as_dict(self) -> dict:
        return {
            "image_pad": self.image_pad,
            "video_pad": self.video_pad,
            "vision_start": self.vision_start,
            "vision_end": self.vision_end,
            "merge_size": self.merge_size,
            "temporal_patch_size": self.temporal_patch_size,
            "timestamps": None if self.timestamps is None else self.timestamps.as_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> TokenSpec:
        """The spec of :meth:`as_dict`'s form; a LayoutError names anything missing or mistyped."""
        fields = ("image_pad", "video_pad", "vision_start", "vision_end", "merge_size", "temporal_patch_size")
        if not isinstance(data, dict) or any(k not in data for k in fields):
            raise LayoutError("spec", f"a dict with {list(fields)} and timestamps", data)
        ts = data.get("timestamps")
        if ts is not None and (not isinstance(ts, dict) or not _TS_KEYS <= set(ts) <= _TS_KEYS | {"open_merged"}):
            raise LayoutError("spec.timestamps", "None or a dict of open, close, dot, seconds, digits[, open_merged]",
                              ts)
        return cls(
            image_pad=data["image_pad"],
            video_pad=data["video_pad"],
            vision_start=data["vision_start"],
            vision_end=data["vision_end"],
            merge_size=data["merge_size"],
            temporal_patch_size=data["temporal_patch_size"],
            timestamps=None if ts is None else TimestampVocab.from_dict(ts),
        )

    def digest(self) -> str:
        """A short digest of every id this spec uses: the tokenizer identity on the wire."""
        return _digest(self)


#: one object per distinct spec seen, at most 16 (a deployment has one or two): a decoded layout's spec and
#: the adapter's are then the same object, so comparing them (the skew check) and looking up their digest
#: are identity checks, not a field-by-field walk of the timestamp vocabulary
_CANONICAL: dict = {}
_CANONICAL_MAX = 16


def canonical_spec(spec: TokenSpec) -> TokenSpec:
    """The first seen spec equal to ``spec`` (``spec`` itself when none was); kept at most 16."""
    found = _CANONICAL.get(spec)
    if found is not None:
        return found
    if len(_CANONICAL) >= _CANONICAL_MAX:
        _CANONICAL.clear()  # (only the sharing is lost: every spec still compares by value)
    return _CANONICAL.setdefault(spec, spec)


@functools.lru_cache(maxsize=64)
def _digest(spec: TokenSpec) -> str:
    text = repr(sorted(spec.as_dict().items())).encode()
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def _plain_grids(grids, merge_size: int, limits) -> list | None:
    """The grids when each is three plain ints and all of them pass (the common case), read in one pass
    for all; None otherwise (:func:`normalize_grids`' loop then names the first failure)."""
    if not (grids and {*map(type, grids)} <= _SEQUENCES and {*map(len, grids)} == _THREE
            and plain_ints(tuple(itertools.chain.from_iterable(grids)), 1, MAX_ID)):
        return None
    m2 = merge_size * merge_size
    out = [g if type(g) is tuple else tuple(g) for g in grids]
    if any(h % merge_size or w % merge_size for _, h, w in out) or sum(t for t, _, _ in out) > limits.max_runs \
            or sum(t * h * w // m2 for t, h, w in out) > limits.max_prompt_len:
        return None
    return out


def equals_checked_grids(grids, checked: list, *, merge_size: int, limits=None) -> bool:
    """True when :func:`normalize_grids` would return ``checked`` for ``grids``, told without it: ``grids``
    is a list or tuple of ``(t, h, w)`` lists or tuples of plain ints equal to ``checked`` (grids that
    follow ``merge_size``: a checked layout's), inside ``limits``. False decides nothing (:func:`normalize_grids`
    then reads them, with its typed error)."""
    if not checked or type(grids) not in _SEQUENCES or len(grids) != len(checked) \
            or {*map(type, grids)} - _SEQUENCES or {*map(len, grids)} != _THREE:
        return False
    flat = tuple(itertools.chain.from_iterable(grids))
    if not plain_ints(flat, 1, MAX_ID) or list(map(tuple, grids)) != checked:
        return False
    limits, m2 = resolve_limits(limits), merge_size * merge_size
    return len(checked) <= limits.max_items and sum(flat[0::3]) <= limits.max_runs \
        and sum(t * h * w // m2 for t, h, w in checked) <= limits.max_prompt_len


def normalize_grids(grids, field: str, *, merge_size: int, limits=None) -> list:
    """Grids as a list of ``(t, h, w)`` plain-int tuples, checked before anything is expanded.

    Accepts lists, tuples, arrays and tensors. Every grid must be three positive ints, with ``h``
    and ``w`` multiples of ``merge_size`` (the processor's patches merge exactly,
    so a grid that does not is refused, never floored), and the grids together must stay inside
    ``limits`` (:class:`mm_handoff.reading.Limits`): at most ``max_items`` grids, ``max_runs``
    temporal groups and ``max_prompt_len`` pads. Anything else raises a
    :class:`~mm_handoff.errors.GridMismatchError` naming the grid.
    """
    limits = resolve_limits(limits)
    try:
        return _normalize_grids(grids, field, merge_size, limits)
    except GridMismatchError:
        raise
    except Exception as exc:  # an object whose shape, length, items or __index__ fail when read
        raise GridMismatchError(field, "a list of (t, h, w) grids that can be read", type(exc).__name__) from exc


def _normalize_grids(grids, field: str, merge_size: int, limits) -> list:
    if grids is None:
        return []
    shape = None if isinstance(grids, (list, tuple)) else getattr(grids, "shape", None)
    if isinstance(shape, tuple) and not (len(shape) == 2 and shape[1] == 3) and 0 not in shape:
        # an array of grids is [n, 3] (or empty): anything else is refused before it is read
        raise GridMismatchError(field, "a [n, 3] array of (t, h, w) grids", f"shape {list(shape)}")
    count = sequence_len(grids) if isinstance(grids, (list, tuple)) else shape[:1] if isinstance(shape, tuple) \
        else None
    count = count[0] if isinstance(count, tuple) and count else count
    if isinstance(count, int) and count > limits.max_items:  # before any conversion
        raise GridMismatchError(field, f"at most {limits.max_items} grids (limits.max_items)", count)
    if hasattr(grids, "tolist") and not isinstance(grids, (list, tuple)):
        try:
            grids = grids.tolist()
        except Exception as exc:
            raise GridMismatchError(field, "a list of (t, h, w) grids", type(grids).__name__) from exc
    if not isinstance(grids, (list, tuple)):
        raise GridMismatchError(field, "a list of (t, h, w) grids", type(grids).__name__)
    if sequence_len(grids) > limits.max_items:
        raise GridMismatchError(field, f"at most {limits.max_items} grids (limits.max_items)", sequence_len(grids))
    grids = plain_sequence(grids)
    m2 = merge_size * merge_size
    plain = _plain_grids(grids, merge_size, limits)
    if plain is not None:
        return plain
    out, groups, pads = [], 0, 0
    for k, g in enumerate(grids):
        if hasattr(g, "tolist") and not isinstance(g, (list, tuple)):
            shape = getattr(g, "shape", None)
            if not isinstance(shape, tuple) or tuple(shape) != (3,):  # counted before it is read
                raise GridMismatchError(f"{field}[{k}]", "(t, h, w) integers", f"{type(g).__name__} of shape "
                                        f"{list(shape) if isinstance(shape, tuple) else None}")
            try:
                g = g.tolist()
            except Exception:
                raise GridMismatchError(f"{field}[{k}]", "(t, h, w) integers", type(g).__name__) from None
        if not isinstance(g, (list, tuple)) or sequence_len(g) != 3:
            raise GridMismatchError(f"{field}[{k}]", "(t, h, w) integers",
                                    g if not isinstance(g, (list, tuple)) else f"{sequence_len(g)} values")
        g = plain_sequence(g)
        if plain_ints(g, 1, MAX_ID):  # three plain ints (the common case): read as they are
            t, h, w = g
        else:
            try:
                t, h, w = (strict_int(v) for v in g)
            except (TypeError, ValueError, OverflowError) as exc:
                raise GridMismatchError(f"{field}[{k}]", "(t, h, w) integers", g) from exc
        if min(t, h, w) < 1:
            raise GridMismatchError(f"{field}[{k}]", "positive (t, h, w)", (t, h, w))
        if h % merge_size or w % merge_size:
            raise GridMismatchError(f"{field}[{k}]", f"h and w divisible by the merge size {merge_size}", (t, h, w))
        groups += t
        pads += t * h * w // m2
        if groups > limits.max_runs or pads > limits.max_prompt_len:
            raise GridMismatchError(f"{field}[{k}]", f"grids within {limits.max_runs} temporal groups and "
                                    f"{limits.max_prompt_len} pads in all (limits.max_runs, limits.max_prompt_len)",
                                    (t, h, w), hint="raise the limits for longer requests")
        out.append((t, h, w))
    return out


def item_lengths(grids: Sequence[tuple], merge_size: int) -> list:
    m2 = merge_size * merge_size
    return [t * h * w // m2 for t, h, w in grids]
