"""Adapter registry: family names, HF configs and engine processor classes -> adapters.

Keys:
- a family name / HF ``model_type`` string (``"qwen3_vl"``);
- an HF config object (its ``model_type`` is used, and the config is handed to the adapter);
- a class, a class's instance, or a dotted class name (``"pkg.mod:Qualname"`` or
  ``"pkg.mod.Qualname"``). Classes resolve along the MRO against registered dotted names, so
  registering a TensorRT-LLM processor class never imports TensorRT-LLM, a subclass inherits its
  base's adapter, and an explicit registration on the subclass wins.

Adapters arrive through the entry-point group ``mm_handoff.adapters`` (the built-in families use it
too), loaded once, on the first lookup. ``MM_HANDOFF_BLOCK_ADAPTERS=name,name`` skips entry points.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .. import _env
from ..errors import AdapterError, AdapterNotFoundError, AdapterRegistrationError

log = logging.getLogger("mm_handoff")
ENTRY_POINT_GROUP = "mm_handoff.adapters"

Factory = Callable[..., Any]


def class_key(cls_or_name: type | str) -> str:
    """Canonical ``module:Qualname`` for a class or a dotted name."""
    if isinstance(cls_or_name, type):
        return f"{cls_or_name.__module__}:{cls_or_name.__qualname__}"
    name = cls_or_name.strip()
    if ":" in name:
        return name
    module, _, qual = name.rpartition(".")
    return f"{module}:{qual}"


def _is_class_name(key: str) -> bool:
    return ":" in key or "." in key


class AdapterRegistry:
    """Thread-safe registry; lookups by class are cached per class and the cache clears on register."""

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self._lock = threading.RLock()
        self._by_name: dict[str, Factory] = {}
        self._by_class: dict[str, Factory] = {}
        self._cache: dict[type, Factory | None] = {}
        self._load_entry_points = load_entry_points
        self._loaded = not load_entry_points
        #: the entry points handled (loaded, skipped or blocked) by the lookups' loading, so that a load cut
        #: short by a KeyboardInterrupt goes on where it stopped
        self._settled: set = set()

    # ---------------------------------------------------------------- registration
    def register(self, keys: str | type | Iterable[str | type], factory: Factory, *,
                 replace: bool = False) -> None:
        """Register ``factory(*, tokenizer=None, config=None[, convention=None]) -> adapter`` under keys.

        The adapter it returns follows :class:`mm_handoff.adapters.base.Adapter`. A factory that takes
        no ``convention`` still works: see :func:`build_adapter`.
        """
        if isinstance(keys, (str, type)):
            keys = [keys]
        try:
            keys = list(keys)
        except TypeError:
            raise AdapterRegistrationError("keys", "a key or an iterable of keys", type(keys).__name__) from None
        if not keys:
            raise AdapterRegistrationError("keys", "at least one key", keys)
        for key in keys:
            if not isinstance(key, (str, type)) or (isinstance(key, str) and not key.strip()):
                raise AdapterRegistrationError("keys", "non-empty strings or classes", key)
        if not callable(factory):
            raise AdapterRegistrationError("factory", "a callable", type(factory).__name__)
        with self._lock:
            plan = []
            for key in keys:
                if isinstance(key, type) or _is_class_name(key):
                    table, norm = self._by_class, class_key(key)
                else:
                    table, norm = self._by_name, key.lower()
                old = table.get(norm)
                if old is not None and old is not factory and not replace:
                    raise AdapterError(
                        f"adapter for {norm!r}", "no adapter yet (or replace=True)",
                        f"{_describe(old)} already registered; refusing {_describe(factory)}")
                plan.append((table, norm))
            for table, norm in plan:
                table[norm] = factory
            self._cache.clear()

    def unregister(self, key: str | type) -> None:
        if not isinstance(key, (str, type)) or (isinstance(key, str) and not key.strip()):
            raise AdapterRegistrationError("key", "a non-empty string or a class", key)
        with self._lock:
            if isinstance(key, type) or _is_class_name(key):
                self._by_class.pop(class_key(key), None)
            else:
                self._by_name.pop(key.lower(), None)
            self._cache.clear()

    def families(self) -> list:
        self._ensure_loaded()
        return sorted(self._by_name)

    def class_keys(self) -> list:
        self._ensure_loaded()
        return sorted(self._by_class)

    # ---------------------------------------------------------------------- lookup
    def resolve(self, key) -> Factory:
        """The factory for a key (see module doc for the kinds of key)."""
        self._ensure_loaded()
        factory = self._lookup(key)
        if factory is None:
            raise AdapterNotFoundError("adapter key", f"one of the known families {self.families()} "
                                       f"or a class derived from {self.class_keys()}", _key_repr(key))
        return factory

    def get(self, key, *, tokenizer=None, config=None, convention: str | None = None, request_id=None):
        """An adapter instance for ``key``, built with the given tokenizer / config / convention."""
        if config is None and _looks_like_config(key):
            config = key
        return build_adapter(self.resolve(key), tokenizer=tokenizer, config=config, convention=convention,
                             request_id=request_id)

    def _lookup(self, key) -> Factory | None:
        with self._lock:
            if isinstance(key, str):
                if _is_class_name(key):
                    return self._by_class.get(class_key(key))
                return self._by_name.get(key.lower())
            if _looks_like_config(key):
                return self._by_name.get(str(key.model_type).lower())
            cls = key if isinstance(key, type) else type(key)
            if cls in self._cache:
                return self._cache[cls]
            found = None
            for base in cls.__mro__:
                found = self._by_class.get(class_key(base))
                if found is not None:
                    break
            if len(self._cache) >= _MAX_CACHED_CLASSES:  # classes, not requests; bounded all the same
                self._cache.clear()
            self._cache[cls] = found
            return found

    # ----------------------------------------------------------------- entry points
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            try:
                self.load_entry_points(resume=True)
            except KeyboardInterrupt:  # the plugins not reached yet load at the next lookup
                self._loaded = False
                raise

    def load_entry_points(self, *, resume: bool = False) -> list:
        """Load the ``mm_handoff.adapters`` group; returns the names loaded.

        A plugin that fails in any way while it loads or registers (an exception, ``SystemExit`` from an
        argparse at import time, ``GeneratorExit``, any ``BaseException`` but ``KeyboardInterrupt``) is
        skipped: what it registered is rolled back, a warning names it, and the plugins after it load. A
        ``KeyboardInterrupt`` rolls that plugin back and propagates; ``resume``: the plugins handled before
        it (loaded, skipped or blocked) are not loaded again.
        """
        blocked = {n.strip() for n in os.environ.get(_env.BLOCK_ADAPTERS, "").split(",") if n.strip()}
        loaded = []
        settled = self._settled if resume else set()
        for ep in _group_entry_points():
            key = (ep.name, ep.value)
            if key in settled:
                continue
            if ep.name in blocked:
                log.info("mm-handoff: adapter entry point %r blocked by %s", ep.name, _env.BLOCK_ADAPTERS)
                settled.add(key)
                continue
            with self._lock:
                before = dict(self._by_name), dict(self._by_class)
                try:
                    ep.load()(self)
                except BaseException as exc:  # a broken plugin must not break lookups, nor leave half of itself
                    self._by_name, self._by_class = before
                    self._cache.clear()
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    settled.add(key)
                    log.warning("mm-handoff: adapter entry point %r skipped, nothing of it registered: %s",
                                ep.name, _why(exc))
                    continue
            settled.add(key)
            loaded.append(ep.name)
        return loaded


def _group_entry_points() -> list:
    """The group's entry points, the built-in families first whatever order the metadata lists them in (a
    plugin can add a family, or replace one on purpose with ``replace=True``, but never take a built-in name
    by loading first); the source tree's built-ins when no installed metadata lists them, or when reading the
    metadata fails."""
    from importlib.metadata import entry_points

    try:
        eps: list[Any] = list(entry_points(group=ENTRY_POINT_GROUP))
        eps.sort(key=lambda ep: not _is_builtin(ep))
    except Exception as exc:  # a distribution's broken metadata: the built-in families still load
        log.warning("mm-handoff: the %s entry points cannot be read, loading the built-in families only: %s",
                    ENTRY_POINT_GROUP, _why(exc))
        eps = []
    if not any(_is_builtin(ep) for ep in eps):  # running from a source tree without installed metadata
        eps.insert(0, _SourceTreeBuiltin())
    return eps


def _why(exc: BaseException) -> str:
    """What a plugin's failure says, in one short line, whatever its ``__str__`` does."""
    try:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
    except Exception:
        text = type(exc).__name__
    return text if len(text) <= 500 else text[:499] + "\u2026"


def _is_builtin(ep) -> bool:
    return ep.value.replace(" ", "") == _SourceTreeBuiltin.value


class _SourceTreeBuiltin:
    name = "builtin"
    value = "mm_handoff.adapters:register_builtin"

    def load(self):
        return importlib.import_module("mm_handoff.adapters").register_builtin


#: classes whose lookup is remembered (an engine has a handful of processor classes)
_MAX_CACHED_CLASSES = 256


def _looks_like_config(key) -> bool:
    if isinstance(key, (str, type)):
        return False
    try:
        return isinstance(getattr(key, "model_type", None), str) and hasattr(key, "to_dict")
    except Exception:  # a config whose properties raise is no config this registry can read
        return False


def _describe(factory) -> str:
    return getattr(factory, "__qualname__", None) or repr(factory)


def _key_repr(key) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, type):
        return class_key(key)
    return f"instance of {class_key(type(key))}"


def _accepts_convention(factory) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: try the keyword
        return True
    return any(p.kind is p.VAR_KEYWORD or p.name == "convention" for p in params)


def build_adapter(factory, *, tokenizer=None, config=None, convention: str | None = None, request_id=None):
    """Call a registered factory; anything it raises becomes an :class:`AdapterError`.

    ``convention`` is passed only when asked for. A factory that does not take it builds its
    default adapter, and a different convention than the one asked for is an AdapterError (never
    a silent mix of conventions).
    """
    kwargs = {"tokenizer": tokenizer, "config": config}
    pass_convention = convention is not None and _accepts_convention(factory)
    if pass_convention:
        kwargs["convention"] = convention
    try:
        adapter = factory(**kwargs)
    except AdapterError:
        raise
    except Exception as exc:
        raise AdapterError("adapter factory", f"{_describe(factory)}(**{sorted(kwargs)}) to build an adapter",
                           f"{type(exc).__name__}: {exc}", request_id=request_id) from exc
    _check_built(adapter, factory, convention, pass_convention, request_id)
    return adapter


_METHODS = ("derive_layout", "rebuild_token_ids", "mrope_positions", "check_prompt", "stock_token_ids")


def _check_built(adapter, factory, convention, passed: bool, request_id) -> None:
    """What a factory returns is an adapter (the protocol's attributes and methods), of the convention
    asked for, whether the factory took ``convention=`` or not."""
    from ..layout.spec import CONVENTIONS, TokenSpec

    who = _describe(factory)
    try:
        family, spec, got = adapter.family, adapter.spec, adapter.convention
        missing = [m for m in _METHODS if not callable(getattr(adapter, m, None))]
    except Exception as exc:
        raise AdapterError("adapter", f"{who} to return an adapter (family, spec, convention)",
                           f"{type(adapter).__name__} ({type(exc).__name__}: {exc})", request_id=request_id) from exc
    if not isinstance(family, str) or not family or not isinstance(spec, TokenSpec) or got not in CONVENTIONS \
            or missing:
        raise AdapterError("adapter", f"{who} to return an adapter: a family name, a TokenSpec, a convention in "
                           f"{CONVENTIONS} and the methods {list(_METHODS)}",
                           {"type": type(adapter).__name__, "family": family, "spec": type(spec).__name__,
                            "convention": got, "missing": missing}, request_id=request_id)
    if convention is not None and got != convention:
        how = "asked for" if passed else "asked for; the factory takes no convention="
        raise AdapterError("adapter.convention", f"{convention} ({how})", got, request_id=request_id)


REGISTRY = AdapterRegistry()


def register_adapter(keys, factory, *, replace: bool = False) -> None:
    """Register an adapter factory in the process-wide registry."""
    REGISTRY.register(keys, factory, replace=replace)


def get_adapter(key, *, tokenizer=None, config=None, convention: str | None = None):
    """Adapter for a family name, HF config, class, instance or dotted class name."""
    return REGISTRY.get(key, tokenizer=tokenizer, config=config, convention=convention)
