"""The adapters the engine glues build for engine objects (an input processor), one per object and key."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any


class EngineAdapters:
    """The adapters built for engine objects (an input processor), once per object and key; thread-safe.

    Weakly keyed: an engine object that goes away takes its adapters along. An object that cannot be
    weakly referenced is not cached (its adapter is built on every call). When two threads build one
    concurrently, the first stored wins, so every caller of one object sees one adapter.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_owner: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get(self, owner, key: Hashable, build: Callable[[], Any]):
        """The adapter cached for ``(owner, key)``, else ``build()``'s, cached."""
        try:
            with self._lock:
                cached = self._by_owner.get(owner, {}).get(key)
        except TypeError:  # not weak-referenceable: no cache
            return build()
        if cached is not None:
            return cached
        adapter = build()
        with self._lock:
            return self._by_owner.setdefault(owner, {}).setdefault(key, adapter)

    def clear(self) -> None:
        with self._lock:
            self._by_owner.clear()


ENGINE_ADAPTERS = EngineAdapters()


def cached_adapter(owner, key: Hashable, build: Callable[[], Any]):
    """The process-wide :class:`EngineAdapters` lookup: one adapter per engine object and key."""
    return ENGINE_ADAPTERS.get(owner, key, build)
