"""Token ids as the core keeps them: a read-only 1-D int32 array."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from ..errors import STOCK_HINT, LayoutError, TokenMismatchError, typed_failures
from ..reading import MAX_ID, plain_sequence, resolve_limits, sequence_len

#: the largest id an int32 holds (every vocabulary in the family fits)


#: what bounds a prompt by default, and what to do about it
_LIMIT_BOUND = ("limits.max_prompt_len", "raise the limits for longer prompts")


def readonly_ids(token_ids, field: str = "token_ids", *, max_len: int | None = None,
                 bound: tuple = _LIMIT_BOUND) -> np.ndarray:
    """Return token ids as a 1-D int32 array no one can change (no copy when already one: :func:`frozen`).

    Ids are ints in ``[0, MAX_ID]``, given as a list, a tuple, an integer array or tensor. Nothing
    is coerced: a bool among them, a float, a masked array (its mask would be ignored), bytes (they
    would read as uint8 ids) or an object that fails to convert is a :class:`LayoutError` naming
    ``field``; so is a sequence longer than ``max_len`` (the entry points pass their limits'
    ``max_prompt_len``, checked before any conversion). ``bound``: what ``max_len`` is and the hint for a
    longer sequence (the limits by default; a check against a layout names the layout).
    """
    size = claimed_size(token_ids) if max_len is not None else None
    if size is not None and size > max_len:
        raise LayoutError(field, f"at most {max_len} ids ({bound[0]})", size, hint=bound[1])
    if type(token_ids) is np.ndarray and token_ids.dtype == np.int32 and frozen(token_ids):
        return token_ids
    if isinstance(token_ids, (list, tuple)):
        token_ids = plain_sequence(token_ids)  # what a subclass stores, as counted above
    if type(token_ids) is list:
        fast = _from_int_list(token_ids)
        if fast is not None:
            return fast
    if isinstance(token_ids, (str, bytes, bytearray, memoryview, np.ma.MaskedArray)) or token_ids is None:
        raise LayoutError(field, "a 1-D sequence of token ids", type(token_ids).__name__)
    if isinstance(token_ids, (list, tuple)) and any(type(v) is bool or type(v) is np.bool_ for v in token_ids):
        raise LayoutError(field, "int token ids", "a bool among them")
    try:
        arr = np.asarray(token_ids)
    except Exception as exc:  # a tensor that needs grad, an object whose conversion raises, ...
        raise LayoutError(field, "a 1-D sequence of token ids", type(token_ids).__name__) from exc
    if arr.ndim != 1:
        raise LayoutError(field, "a 1-D sequence of token ids", f"shape {arr.shape}")
    if max_len is not None and arr.shape[0] > max_len:  # an object that claimed fewer than it held
        raise LayoutError(field, f"at most {max_len} ids ({bound[0]})", arr.shape[0], hint=bound[1])
    if arr.size and arr.dtype.kind not in "iu":
        raise LayoutError(field, "integer token ids", f"dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > MAX_ID):
        raise LayoutError(field, f"ids in [0, {MAX_ID}]", f"[{int(arr.min())}, {int(arr.max())}]")
    return read_only(arr, np.int32)


def run_length_form(ids: np.ndarray) -> tuple:
    """``(values, counts)`` of the ids, read-only int32, canonical (neighbouring values differ): the one
    pass over the ids that everything else about a layout is read from (none for no ids)."""
    if not ids.shape[0]:
        return read_only(np.zeros(0, dtype=np.int32)), read_only(np.zeros(0, dtype=np.int32))
    edges = np.nonzero(ids[1:] != ids[:-1])[0]
    bounds = np.empty(edges.shape[0] + 2, dtype=np.int64)
    bounds[0], bounds[-1] = 0, ids.shape[0]
    np.add(edges, 1, out=bounds[1:-1])
    counts = (bounds[1:] - bounds[:-1]).astype(np.int32)
    return read_only(ids[bounds[:-1]]), read_only(counts)


def frozen(arr: Any) -> bool:
    """True when no one can change ``arr``'s values, now or later: it is read-only, so is every array it
    views, and its memory is a ``bytes`` object. A read-only view of a caller's writable array is not (the
    caller writes through the base), nor is a read-only array that owns its memory (its owner may set
    ``writeable`` back to True), nor one over another object's buffer (a ``bytearray``, an ``mmap``)."""
    while isinstance(arr, np.ndarray):
        if arr.flags.writeable:
            return False
        arr = arr.base
    return type(arr) is bytes


def claimed_size(value):
    """How many values ``value`` claims, read without converting it (a list's stored length, an array's or a
    tensor's size, any other sized object's ``len``: an ``array.array``, a ``deque``, a ``range``); None when
    it cannot tell (the conversion then decides, with its typed error, and the converted length is checked)."""
    try:
        if isinstance(value, (list, tuple)):
            return sequence_len(value)
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple):
            return math.prod(int(d) for d in shape)
        return len(value) if hasattr(value, "__len__") and not isinstance(value, (str, bytes)) else None
    except Exception:  # a shape or a length that fails when read: the conversion names it
        return None


def _from_int_list(ids: list):
    """A list of Python ints in [0, MAX_ID] converted in C (what the engine hands over), or None for
    anything else (the general path then decides, with its typed error).

    ``struct``'s ``i`` code takes ints (and ``__index__`` types) only: a float or a str raises instead
    of being truncated or parsed, as ``np.fromiter`` would. One pack up to 16k ids; above, 4,096 per
    pack, so each argument tuple stays in cache. Measured at 12k ids: 0.65x ``np.fromiter``'s time on
    Python 3.12 (0.6x on 3.11), where ``array('i', ...)`` (the same strictness) takes 0.93x (1.25x);
    at 341k ids 0.79x, against 1.0x (1.3x).
    """
    n = len(ids)
    if not n:
        return None
    try:
        if n <= _ONE_PACK_MAX:
            packed = struct.pack(f"={n}i", *ids)
        else:
            full = n - n % _CHUNK
            parts = [_PACK_CHUNK.pack(*ids[i:i + _CHUNK]) for i in range(0, full, _CHUNK)]
            parts.append(struct.pack(f"={n - full}i", *ids[full:]))
            packed = b"".join(parts)
    except Exception:  # struct.error, a float, an id too large, an object whose __index__ raises, ...
        return None
    arr = np.frombuffer(packed, dtype=np.int32)  # read-only (a view of bytes)
    least = int(arr.min())
    if least < 0:
        return None
    if least <= 1:  # 0 and 1 may be False and True, which are no ids: look at those only
        if any(type(ids[i]) is not int for i in np.nonzero(arr <= 1)[0].tolist()):
            return None
    return arr


_ONE_PACK_MAX = 16384  # one pack up to here; longer lists go in chunks (their tuples stay in cache)
_CHUNK = 4096
_PACK_CHUNK = struct.Struct(f"={_CHUNK}i")  # '=': native order, standard 4-byte int (np.int32)


def read_only(arr: np.ndarray, dtype=None) -> np.ndarray:
    """``arr``'s values in an array no one can make writable again (the core keeps and hands out no other).

    A read-only flag alone is no promise: numpy lets the owner of an array's memory (the array itself,
    or whoever holds its ``.base``) set ``writeable`` back to True. An array whose memory is a ``bytes``
    object cannot: ``bytes`` offers no writable buffer. So unless ``arr`` already is such an array
    (:func:`frozen`), its values are copied into one (a ``memcpy``: 3 us for 12k ids), converted to
    ``dtype`` on the way when one is given (one copy either way).
    """
    if (dtype is None or arr.dtype == dtype) and frozen(arr):
        return arr
    arr = arr if dtype is None else arr.astype(dtype, copy=False)
    return np.frombuffer(arr.tobytes(), dtype=arr.dtype).reshape(arr.shape)


#: up to this many values in a run-length form, :func:`rle_id_list` builds its id list
FEW_VALUES = 64


def rle_id_list(values: np.ndarray, counts: np.ndarray) -> list:
    """The ids of a run-length form as a Python list: each run one repeated int (a pointer fill), for
    forms of a few values (an image's prompt: ~15 runs of 934 ids, 0.6x ``tolist``'s time)."""
    out: list = []
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        out += [value] * count
    return out


def filled_id_list(ids: np.ndarray, fill: int, starts: np.ndarray, ends: np.ndarray) -> list:
    """``ids.tolist()``, built as ``fill`` repeated (one shared int, a pointer fill) with the other ids
    put in the gaps before each of ``fill``'s runs ``[starts, ends)`` (sorted, exactly ``fill``'s ids)
    and after the last. Faster than ``tolist`` (one int object per id) on pad-heavy prompts.

    Gaps that repeat with one length and one stride (a video's groups whose timestamps have as many
    digits, a row of same-size images) are written as one strided slice per position in the gap
    instead of one slice per gap: 384 groups of 768 frames, 108 -> 79 us side by side.
    """
    others = ids[ids != fill].tolist()
    out = [fill] * ids.shape[0]
    m = starts.shape[0]
    if m <= _SLICE_PER_GAP_MAX:  # one slice per gap
        at = took = 0
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            out[at:start] = others[took:took + start - at]
            took += start - at
            at = end
        out[at:] = others[took:]
        return out
    gap_at = np.concatenate(([0], ends[:-1]))
    gap_len = starts - gap_at
    taken = np.cumsum(gap_len) - gap_len  # where each gap's ids start in ``others``
    at_, size, took_ = gap_at.tolist(), gap_len.tolist(), taken.tolist()
    for b, e in _blocks(gap_at, gap_len):
        g, k = size[b], e - b
        if not g:  # runs that touch: nothing between them
            continue
        if k > g:  # fewer slices by position than by gap (so k >= 2: the block has a stride)
            stride = at_[b + 1] - at_[b]
            for i in range(g):
                a, t = at_[b] + i, took_[b] + i
                out[a:a + (k - 1) * stride + 1:stride] = others[t:t + (k - 1) * g + 1:g]
        else:
            for j in range(b, e):
                out[at_[j]:at_[j] + size[j]] = others[took_[j]:took_[j] + size[j]]
    out[int(ends[-1]):] = others[took_[-1] + size[-1]:]
    return out


#: up to this many runs, one slice per gap (finding repeating blocks costs more than it saves)
_SLICE_PER_GAP_MAX = 32


def _blocks(gap_at: np.ndarray, gap_len: np.ndarray) -> list:
    """``[b, e)`` ranges of gaps with one length and one stride between their starts (a gap that
    starts a new stride starts a new block, so a block may end one gap early; never too late)."""
    m = gap_at.shape[0]
    new = np.ones(m, dtype=bool)
    new[1:] = gap_len[1:] != gap_len[:-1]
    stride = gap_at[1:] - gap_at[:-1]
    new[2:] |= stride[1:] != stride[:-1]
    firsts = np.flatnonzero(new).tolist()
    return list(zip(firsts, [*firsts[1:], m], strict=True))


# ------------------------------------------------------------------- two id sequences compared
def first_difference(expected_ids, actual_ids, *, field: str = "token_ids", limits=None) -> int | None:
    """The first index where two id sequences differ (the shorter length if one is a prefix); None if equal."""
    most = resolve_limits(limits).max_prompt_len
    a = readonly_ids(expected_ids, field, max_len=most)
    b = readonly_ids(actual_ids, field, max_len=most)
    if a.shape == b.shape and np.array_equal(a, b):
        return None
    n = min(a.shape[0], b.shape[0])
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


@typed_failures("token_ids")
def check_token_ids(expected_ids, actual_ids, *, request_id=None, field: str = "prompt_token_ids",
                    context: int = 3, limits=None) -> None:
    """Token ids equal; otherwise name the first differing index and the tokens around it."""
    most = resolve_limits(limits).max_prompt_len
    a = readonly_ids(expected_ids, field, max_len=most)
    b = readonly_ids(actual_ids, field, max_len=most)
    index = first_difference(a, b, field=field, limits=limits)
    if index is None:
        return
    lo = max(0, index - context)
    same = a.shape == b.shape
    raise TokenMismatchError(field if same else f"{field} (length)",
                             f"{a.shape[0]} ids" + (" equal to the encoder's" if same else ""),
                             f"{b.shape[0]} ids" + (f" with other ids from index {index}" if same else ""),
                             index=index,
                             expected_context=a[lo:index + context + 1].tolist(),
                             actual_context=b[lo:index + context + 1].tolist(),
                             request_id=request_id,
                             hint=STOCK_HINT if a.shape[0] > b.shape[0] else None)
