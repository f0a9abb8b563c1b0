"""Token ids as the core keeps them: a read-only 1-D int32 array."""

from __future__ import annotations

import array

import numpy as np

from .errors import LayoutError

__all__ = ["readonly_ids", "MAX_ID"]

#: the largest id an int32 holds (every vocabulary in the family fits)
MAX_ID = 2**31 - 1


def readonly_ids(token_ids, field: str = "token_ids") -> np.ndarray:
    """Return token ids as a read-only 1-D int32 array (no copy when already one)."""
    if isinstance(token_ids, np.ndarray) and token_ids.dtype == np.int32 and not token_ids.flags.writeable:
        return token_ids
    if type(token_ids) is list:
        fast = _from_int_list(token_ids)
        if fast is not None:
            return fast
    try:
        arr = np.asarray(token_ids)
    except (TypeError, ValueError) as exc:
        raise LayoutError(field, "a 1-D sequence of token ids", type(token_ids).__name__) from exc
    if arr.ndim != 1:
        raise LayoutError(field, "a 1-D sequence of token ids", f"shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise LayoutError(field, "integer token ids", f"dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > MAX_ID):
        raise LayoutError(field, f"ids in [0, {MAX_ID}]", f"[{int(arr.min())}, {int(arr.max())}]")
    arr = np.array(arr, dtype=np.int32)
    arr.flags.writeable = False
    return arr


def _from_int_list(ids: list):
    """A list of Python ints in [0, MAX_ID] in one C conversion pass (what the engine hands over),
    or None for anything else (the general path then decides, with its typed error).

    ``array('i', ...)`` takes ints (and ``__index__`` types) only: a float or a str raises instead of
    being truncated or parsed, as ``np.fromiter`` would.
    """
    try:
        arr = np.frombuffer(array.array("i", ids), dtype=np.int32) if _C_INT_IS_INT32 else None
    except (TypeError, ValueError, OverflowError):
        return None
    if arr is None or not arr.size or int(arr.min()) < 0 or int(arr.max()) <= 1:
        return None  # (ids all 0/1 may be bools, which the general path rejects when alone)
    arr.flags.writeable = False
    return arr


_C_INT_IS_INT32 = array.array("i").itemsize == 4
