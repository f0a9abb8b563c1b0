"""Strict reading: every reader that turns what a caller or a peer hands over into plain values (never
truncating, failing typed and naming the field), and every bound on one request, in one place.

Readers: :func:`strict_int` / :func:`as_int` (an int, never a truncated float), :func:`plain_ints` (the
fast check of a header's ints), :func:`read_count`, :func:`shape_of`, :func:`embedding_shapes_of` and
:func:`embedding_rows_of` (counts and shapes of tensors, arrays, shape tuples and handle dicts: an int
subclass is read as the int it is, without calling what it overrides, and an object that fails when
read is a typed error naming the field).

Bounds: :data:`MAX_ID` (a token id, a position), :data:`MAX_COUNT` (a count, a length, a limit),
:data:`MAX_OBJECTS` (objects a constructor reads one by one), and :class:`Limits`, the bounds on what
one request may claim, applied before any work proportional to the claim.

A handoff payload, a grid or a frame list is a few bytes that can describe gigabytes. Every entry
point that expands one (decoding a wire payload, rebuilding or stocking ids from grids, computing
mRoPE ids, reading video metadata) checks it against a :class:`Limits` first and raises a typed
error naming the field. The defaults admit the largest real request of the family with a wide margin,
and bound one request's work to well under a second and about 100 MiB:
- ``max_prompt_len`` 1,048,576 ids: Qwen3-VL's longest context (256k native, 1M with its YaRN
  extension);
- ``max_runs`` 16,384 pad runs (images plus video temporal groups): 42 videos of 768 frames (384
  groups each), or 16k images;
- ``max_items`` 1,024 images and videos;
- ``max_payload_chars`` 16 MiB of wire payload: a 1M-id prompt whose ids never repeat encodes to
  about 5 MiB.

Raise them per call (``accept_layout(..., limits=Limits(max_prompt_len=...))``, ``from_wire``,
``derive_layout``, the adapters' ``limits=``) or for a whole process with ``MM_HANDOFF_LIMITS``,
e.g. ``MM_HANDOFF_LIMITS=max_prompt_len=2097152,max_runs=32768``.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from . import _env
from .errors import EmbeddingCountError, HandoffError, MropeLengthError

#: the largest token id, position or grid size (ids are kept as int32)
MAX_ID = 2**31 - 1
#: the largest count, length or limit any check reads (far beyond any prompt)
MAX_COUNT = 2**62
#: the most objects (items, runs) a constructor reads one by one (the wire's bound is Limits.max_items)
MAX_OBJECTS = 1 << 16


def strict_int(value) -> int:
    """``value`` as a plain int when it is one: ints, numpy ints and 0-d integer tensors; never truncates.

    ``4.9``, ``"4"``, ``True`` and ``None`` raise ``TypeError``/``ValueError`` (callers turn that into
    their typed error naming the field). An integral float such as ``4.0`` is accepted as 4 (JSON
    and torch hand those over). An int subclass comes back as a plain int, read without calling
    any method it overrides.
    """
    if isinstance(value, bool) or isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"not an int: {type(value).__name__}")
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"not an integral value: {value!r}")
        return int(value)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a 0-d tensor or array
        try:
            item = value.item()
        except Exception as exc:
            raise TypeError(f"not an int: {type(value).__name__}") from exc
        if not isinstance(item, bool) and isinstance(item, (int, float, np.integer, np.floating)):
            return strict_int(item)
    raise TypeError(f"not an int: {type(value).__name__}")


def as_int(value):
    """Converter: a plain int for ints and integral numbers (numpy ints, 0-d tensors, 4.0); anything
    else unchanged, for the validator to name. Never truncates: 1.5 stays 1.5 and is refused."""
    if type(value) is int:  # the common case, before strict_int's type ladder
        return value
    try:
        return strict_int(value)
    except (TypeError, ValueError, OverflowError):
        return value


def plain_ints(values: Sequence, low: int, high: int) -> bool:
    """Every one of ``values`` (non-empty) is a plain int (not a bool, not a subclass) in [low, high]:
    one type set and a min and max in C, for the headers and shapes read on every request."""
    return {*map(type, values)} == _INT_ONLY and low <= min(values) and max(values) <= high


_INT_ONLY = {int}


def sequence_len(value) -> int:
    """The length of a list or tuple as it is stored: a subclass's ``__len__`` is not called (one that
    lies would let a bound pass that its contents break)."""
    return list.__len__(value) if isinstance(value, list) else tuple.__len__(value)


def plain_sequence(value):
    """A list or tuple as the plain list or tuple of what it stores (a subclass's ``__len__``, ``__iter__``
    and ``__getitem__`` are not called); bound it by :func:`sequence_len` first."""
    if type(value) is list or type(value) is tuple:
        return value
    return list.__getitem__(value, slice(None)) if isinstance(value, list) else tuple.__getitem__(value, slice(None))


def _plain_count(value):
    """A plain int in ``[0, 2**62]`` for ints and numpy ints (read without calling methods an int
    subclass overrides); None for anything else."""
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        value = int.__index__(value)
    elif isinstance(value, np.integer):
        value = int(value)
    else:
        return None
    return value if 0 <= value <= MAX_COUNT else None


def read_count(value, field: str, request_id, error=MropeLengthError) -> int:
    count = _plain_count(value)
    if count is None:
        raise error(field, "a non-negative int", value, request_id=request_id)
    return count


def shape_of(value, *, field: str = "mrope_position_ids.shape", request_id=None,
             error: type[HandoffError] = MropeLengthError) -> tuple:
    """The shape of an array/tensor, a shape sequence, or a handle dict's ``tensor_size``, as ints.

    Anything else (floats, strings, bytes, negative sizes, a handle without ``tensor_size``) raises
    ``error`` naming ``field`` (an embedding's shape: :class:`EmbeddingCountError`; the mRoPE ids' by default).
    """
    if type(value) is dict:  # a handle: its plain-int tensor_size, read in C (the common case)
        size = dict.get(value, "tensor_size")
        if type(size) is list and 0 < len(size) <= 8 and plain_ints(size, 0, MAX_COUNT):
            return tuple(size)
    try:
        if isinstance(value, dict):
            value = dict.get(value, "tensor_size")  # dict's own get: a subclass's cannot interfere
        shape = getattr(value, "shape", None)
        if shape is None:
            shape = value
        dims = tuple(plain_sequence(shape)) if isinstance(shape, (list, tuple)) and sequence_len(shape) <= 8 \
            else None  # torch.Size: a tuple
    except Exception:  # an object whose attributes or iteration fail
        dims = shape = None
    counts = None if dims is None else [_plain_count(d) for d in dims]
    if counts is None or None in counts:
        raise error(field, "a shape of non-negative ints", shape if dims is None else dims, request_id=request_id)
    return tuple(counts)


def embedding_shapes_of(embeddings, *, field: str = "embeddings", request_id=None) -> list:
    """Per-item shapes (as int tuples) of tensors, arrays, shape tuples or handle dicts."""
    if not isinstance(embeddings, (list, tuple)):
        raise HandoffError(field, "a list with one embedding (or handle) per image/video",
                           type(embeddings).__name__, request_id=request_id)
    embeddings = plain_sequence(embeddings)
    if embeddings and {*map(type, embeddings)} == _DICT_ONLY:  # handles: every tensor_size read in one pass
        sizes: list = [dict.get(e, "tensor_size") for e in embeddings]
        if {*map(type, sizes)} == _LIST_ONLY and {*map(len, sizes)} == _TWO \
                and plain_ints(tuple(itertools.chain.from_iterable(sizes)), 0, MAX_COUNT):
            return list(map(tuple, sizes))
    return [shape_of(e, field=f"{field}[{i}].shape", request_id=request_id, error=EmbeddingCountError)
            for i, e in enumerate(embeddings)]


_DICT_ONLY, _LIST_ONLY, _TWO = {dict}, {list}, {2}


def embedding_rows_of(embeddings, *, field: str = "embeddings", request_id=None) -> list:
    """Rows per item (``shape[0]``, or a handle's ``tensor_size[0]``), in item order; shapes only."""
    shapes = embedding_shapes_of(embeddings, field=field, request_id=request_id)
    for i, shape in enumerate(shapes):
        if not shape:
            raise EmbeddingCountError(f"{field}[{i}].shape", "[rows, width]", list(shape), request_id=request_id)
    return [shape[0] for shape in shapes]


def _positive(instance, attribute, value) -> None:
    if type(value) is not int or not 1 <= value <= MAX_COUNT:
        raise HandoffError(f"limits.{attribute.name}", "an int in [1, 2**62]", value)


@attrs.frozen
class Limits:
    """Upper bounds on one request (see the module doc for what the defaults admit)."""

    #: ids in one prompt (expanded)
    max_prompt_len: int = attrs.field(default=1 << 20, validator=_positive)
    #: images and videos in one prompt
    max_items: int = attrs.field(default=1024, validator=_positive)
    #: pad runs in one prompt: one per image, one per video temporal group
    max_runs: int = attrs.field(default=1 << 14, validator=_positive)
    #: characters (or bytes) of one wire payload
    max_payload_chars: int = attrs.field(default=16 << 20, validator=_positive)
    #: frame indices listed in one request's video metadata, all videos together (two per temporal group)
    max_frames: int = attrs.field(default=1 << 15, validator=_positive)


def limits_from_env(environ=None) -> Limits:
    """:class:`Limits` with the overrides of ``MM_HANDOFF_LIMITS`` (``name=value,...``, each name once, each
    value ASCII digits); anything else, a value outside [1, 2**62] included, is a :class:`HandoffError`
    naming the variable. A value is converted only once its digits are counted (a 5,000-digit value is out
    of range, not a failed conversion)."""
    text = (os.environ if environ is None else environ).get(_env.LIMITS, "")
    if not isinstance(text, str):
        raise HandoffError(_env.LIMITS, "a string of name=value pairs", type(text).__name__)
    text = text.strip()
    if not text:
        return Limits()
    fields = {f.name for f in attrs.fields(Limits)}
    values = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or name not in fields or not (value.isascii() and value.isdigit()):
            raise HandoffError(_env.LIMITS, f"name=value pairs with names in {sorted(fields)}", part)
        if name in values:
            raise HandoffError(_env.LIMITS, f"each name once ({name} is given twice)", text)
        digits = value.lstrip("0")
        if len(digits) > _MAX_COUNT_DIGITS:  # out of range whatever it reads as; never handed to int()
            raise HandoffError(_env.LIMITS, f"values in [1, 2**62] ({name})", f"{name}=<{len(digits)} digits>")
        values[name] = int(digits or "0")
    try:
        return Limits(**values)
    except HandoffError as exc:  # a value out of range: named by the variable that set it
        raise HandoffError(_env.LIMITS, f"values in [1, 2**62] ({exc.field})", text) from None


#: the digits of :data:`MAX_COUNT`: a longer value is out of range
_MAX_COUNT_DIGITS = len(str(MAX_COUNT))


#: the last ``MM_HANDOFF_LIMITS`` text read and its limits (one entry: the setting, not requests)
_FROM_ENV: tuple = ("", Limits())


def _process_limits() -> Limits:
    """The process default: :class:`Limits` with ``MM_HANDOFF_LIMITS`` applied, read where it is used (so
    ``import mm_handoff`` never fails on a setting); a bad setting is a typed error at every use."""
    global _FROM_ENV
    text = os.environ.get(_env.LIMITS, "")
    seen, limits = _FROM_ENV
    if text != seen:
        limits = limits_from_env({_env.LIMITS: text})
        _FROM_ENV = (text, limits)
    return limits


def resolve_limits(limits: Limits | None) -> Limits:
    """``limits``, or the process default (``MM_HANDOFF_LIMITS``); anything else is a typed error."""
    if limits is None:
        return _process_limits()
    if not isinstance(limits, Limits):
        raise HandoffError("limits", "a mm_handoff.Limits", type(limits).__name__)
    return limits


def video_metadata_of(video_metadata, limits: Limits | None = None, *, request_id=None) -> list | None:
    """One request's video metadata, read once: per video a :class:`VideoMetadataSnapshot` of its fields, its
    ``fps``, ``frames_indices`` (copied) and ``total_num_frames`` read exactly once (None for None), whatever
    the caller's mapping or object, so what is counted is what is used afterwards (a mapping whose ``get``
    answers differently later changes nothing). The frame indices
    of all videos together stay within ``limits.max_frames``, counted from their lengths before any list is
    read (one metadata shared by 256 videos counts 256 times); None stays None."""
    limits = resolve_limits(limits)
    if video_metadata is None:
        return None
    if not isinstance(video_metadata, (list, tuple)):
        raise HandoffError("video_metadata", "a list with one entry per video", type(video_metadata).__name__,
                           request_id=request_id)
    if sequence_len(video_metadata) > limits.max_items:
        raise HandoffError("video_metadata", f"at most {limits.max_items} entries (limits.max_items)",
                           sequence_len(video_metadata), request_id=request_id)
    out: list = []
    total = 0
    for j, meta in enumerate(plain_sequence(video_metadata)):
        snapshot = _snapshot(meta, j, request_id)
        total += _frame_count(None if snapshot is None else snapshot["frames_indices"])
        if total > limits.max_frames:
            raise HandoffError(f"video_metadata[{j}].frames_indices", f"at most {limits.max_frames} frame indices "
                               "over all videos (limits.max_frames)", f"{total} up to this video",
                               request_id=request_id, hint="raise the limits for longer videos")
        if snapshot is not None:
            snapshot["frames_indices"] = _frames_copy(snapshot["frames_indices"])  # as counted, nobody else's
        out.append(snapshot)
    return out


_METADATA_FIELDS = ("fps", "frames_indices", "total_num_frames")
#: the most fields of one video's metadata a snapshot copies besides the three it reads
_MAX_METADATA_FIELDS = 64


class VideoMetadataSnapshot(dict):
    """One video's metadata as read once: a dict of its fields (HF's ``VideoMetadata`` is a mapping), each
    also an attribute, so an adapter reads it either way; ``frames_indices`` is a copy of what was counted."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _snapshot(meta, j: int, request_id) -> VideoMetadataSnapshot | None:
    if meta is None:
        return None
    try:
        if isinstance(meta, Mapping):
            read = {name: meta.get(name, None) for name in _METADATA_FIELDS}
        else:
            read = {name: getattr(meta, name, None) for name in _METADATA_FIELDS}
    except Exception as exc:
        raise HandoffError(f"video_metadata[{j}]", "readable video metadata (fps, frames_indices)",
                           type(exc).__name__, request_id=request_id) from exc
    return VideoMetadataSnapshot({**_other_fields(meta), **read})


def _other_fields(meta) -> dict:
    """The rest of a metadata's fields, for an adapter that reads more than the three (``duration``, say):
    a mapping's items or an object's attributes, at most :data:`_MAX_METADATA_FIELDS` of them; none when
    there are more or they cannot be read."""
    try:
        fields = meta if isinstance(meta, Mapping) else getattr(meta, "__dict__", None)
        if not isinstance(fields, Mapping) or len(fields) > _MAX_METADATA_FIELDS:
            return {}
        return dict(itertools.islice(fields.items(), _MAX_METADATA_FIELDS))
    except Exception:  # what the package reads is read above; the rest is a courtesy
        return {}


def _frames_copy(indices):
    """A counted frame list as a list of its own (an array or tensor as its values: bounded by the count)."""
    if isinstance(indices, list):
        return list.__getitem__(indices, slice(None))  # a new plain list of what it stores
    if isinstance(indices, tuple):
        return plain_sequence(indices)
    shape = getattr(indices, "shape", None)
    if hasattr(indices, "tolist") and isinstance(shape, tuple) and len(shape) == 1:
        try:
            return indices.tolist()
        except Exception:  # its reader names it
            return indices
    return indices


def _frame_count(indices) -> int:
    """How many frame indices a list or an array claims, without reading them (0 for anything else: its
    reader refuses it)."""
    if isinstance(indices, (list, tuple)):
        return sequence_len(indices)
    try:
        shape = getattr(indices, "shape", None)  # an array or tensor: its size, without reading it
        return max(0, math.prod(int(d) for d in shape)) if isinstance(shape, tuple) else 0
    except Exception:  # a shape that fails when read: its reader names it
        return 0
