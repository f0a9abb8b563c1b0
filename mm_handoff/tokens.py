"""Token ids as the core keeps them: a read-only 1-D int32 array."""

from __future__ import annotations

import numpy as np

from .errors import LayoutError

__all__ = ["readonly_ids", "MAX_ID"]

#: the largest id an int32 holds (every vocabulary in the family fits)
MAX_ID = 2**31 - 1


def readonly_ids(token_ids, field: str = "token_ids") -> np.ndarray:
    """Return token ids as a read-only 1-D int32 array (no copy when already one)."""
    if isinstance(token_ids, np.ndarray) and token_ids.dtype == np.int32 and not token_ids.flags.writeable:
        return token_ids
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
