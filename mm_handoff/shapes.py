"""Counts and shapes of what an engine hands over (tensors, arrays, shape tuples, handle dicts), read
strictly: ints only (an int subclass is read as the int it is, without calling what it overrides),
within bounds, and any object that fails when read is a typed error naming the field."""

from __future__ import annotations

import itertools

import numpy as np

from .errors import EmbeddingCountError, HandoffError, MropeLengthError
from .spec import plain_ints

__all__ = ["shape_of", "read_count", "embedding_shapes_of", "embedding_rows_of"]

#: the largest count (a length, an index, a row count) any check reads: far beyond any prompt
_MAX_COUNT = 2**62


def _plain_count(value):
    """A plain int in ``[0, 2**62]`` for ints and numpy ints (read without calling methods an int
    subclass overrides); None for anything else."""
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        value = int.__index__(value)
    elif isinstance(value, np.integer):
        value = int(value)
    else:
        return None
    return value if 0 <= value <= _MAX_COUNT else None


def read_count(value, field: str, request_id, error=MropeLengthError) -> int:
    count = _plain_count(value)
    if count is None:
        raise error(field, "a non-negative int", value, request_id=request_id)
    return count


def shape_of(value, *, field: str = "mrope_position_ids.shape", request_id=None) -> tuple:
    """The shape of an array/tensor, a shape sequence, or a handle dict's ``tensor_size``, as ints.

    Anything else (floats, strings, bytes, negative sizes, a handle without ``tensor_size``) raises
    a :class:`MropeLengthError` naming ``field``.
    """
    if type(value) is dict:  # a handle: its plain-int tensor_size, read in C (the common case)
        size = dict.get(value, "tensor_size")
        if type(size) is list and 0 < len(size) <= 8 and plain_ints(size, 0, _MAX_COUNT):
            return tuple(size)
    try:
        if isinstance(value, dict):
            value = dict.get(value, "tensor_size")  # dict's own get: a subclass's cannot interfere
        shape = getattr(value, "shape", None)
        if shape is None:
            shape = value
        dims = tuple(shape) if isinstance(shape, (list, tuple)) and len(shape) <= 8 else None  # torch.Size: a tuple
    except Exception:  # an object whose attributes or iteration fail
        dims = shape = None
    counts = None if dims is None else [_plain_count(d) for d in dims]
    if counts is None or None in counts:
        raise MropeLengthError(field, "a shape of non-negative ints", shape if dims is None else dims,
                               request_id=request_id)
    return tuple(counts)


def embedding_shapes_of(embeddings, *, field: str = "embeddings", request_id=None) -> list:
    """Per-item shapes (as int tuples) of tensors, arrays, shape tuples or handle dicts."""
    if not isinstance(embeddings, (list, tuple)):
        raise HandoffError(field, "a list with one embedding (or handle) per image/video",
                           type(embeddings).__name__, request_id=request_id)
    if embeddings and {*map(type, embeddings)} == _DICT_ONLY:  # handles: every tensor_size read in one pass
        sizes: list = [dict.get(e, "tensor_size") for e in embeddings]
        if {*map(type, sizes)} == _LIST_ONLY and {*map(len, sizes)} == _TWO \
                and plain_ints(tuple(itertools.chain.from_iterable(sizes)), 0, _MAX_COUNT):
            return list(map(tuple, sizes))
    return [shape_of(e, field=f"{field}[{i}].shape", request_id=request_id) for i, e in enumerate(embeddings)]


_DICT_ONLY, _LIST_ONLY, _TWO = {dict}, {list}, {2}


def embedding_rows_of(embeddings, *, field: str = "embeddings", request_id=None) -> list:
    """Rows per item (``shape[0]``, or a handle's ``tensor_size[0]``), in item order; shapes only."""
    shapes = embedding_shapes_of(embeddings, field=field, request_id=request_id)
    for i, shape in enumerate(shapes):
        if not shape:
            raise EmbeddingCountError(f"{field}[{i}].shape", "[rows, width]", list(shape), request_id=request_id)
    return [shape[0] for shape in shapes]
