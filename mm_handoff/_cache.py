"""A small thread-safe LRU cache bounded by bytes: derived arrays may be reused across requests,
but a long-running server must not grow with the variety of its requests."""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Callable, Hashable

import numpy as np

#: an array object's own size beside its data, plus the cache's bookkeeping per entry (measured: ~112 + ~100 B)
_ARRAY_OVERHEAD = sys.getsizeof(np.empty(0)) + 100


class ByteBoundedCache:
    """``get(key, build)``: the cached array for ``key``, built (and kept, while it fits) on a miss.

    Arrays of more than ``max_item_bytes`` are built every time and never kept; the kept ones stay
    under ``max_bytes`` in all, the least recently used going first.
    """

    def __init__(self, *, max_bytes: int, max_item_bytes: int) -> None:
        self.max_bytes, self.max_item_bytes = max_bytes, max_item_bytes
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], np.ndarray]) -> np.ndarray:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
                return value
        value = build()
        size = int(value.nbytes) + _ARRAY_OVERHEAD + sys.getsizeof(key)  # what the entry costs, not only its data
        if size > self.max_item_bytes:
            return value
        with self._lock:
            if key not in self._items:
                self._items[key] = value
                self._bytes += size
                while self._bytes > self.max_bytes:
                    old_key, old = self._items.popitem(last=False)
                    self._bytes -= int(old.nbytes) + _ARRAY_OVERHEAD + sys.getsizeof(old_key)
        return value

    @property
    def nbytes(self) -> int:
        """Bytes held now (at most ``max_bytes``)."""
        return self._bytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
