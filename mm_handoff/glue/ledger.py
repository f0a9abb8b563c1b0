"""The patch ledger: every attribute mm-handoff replaced, what was there before, and how to undo it.

Rules (worked out on a toy Base/Sub hierarchy; ``tests/trtllm/test_lifecycle.py`` exercises them through the glue):

* the original is read raw from ``vars()`` of the class that owns it along the MRO, never through
  ``getattr`` (which binds descriptors), and the owner is recorded;
* a wrapper always goes into ``vars(target)``; ``was_own`` says whether the target owned the
  attribute before. Uninstall puts an own original back and *deletes* an inherited one, so
  inheritance from the base resumes (``setattr`` would leave a stale copy on the subclass);
* the first original of a target is kept (:meth:`Ledger.get_original`), so a wrapper can never be
  recorded as "the original", even across install/uninstall cycles (a re-imported module, i.e. a new
  class object under the same key, starts a new record);
* every wrapper reads its own :class:`Switch` on each call; uninstall turns all switches off before
  it touches any attribute, so calls in flight on other threads pass straight through;
* if the attribute is no longer the exact wrapper the ledger holds, someone wrapped on top: the
  ledger warns and leaves both layers in place (ours stays switched off).

What a hook (the four-argument wrapper body, :data:`Hook`) may do, and nothing else:

* check before and after calling ``wrapped(*args, **kwargs)``, raising a typed
  :class:`~mm_handoff.errors.HandoffError` (or going on, as the policy decides);
* call ``wrapped`` with mm-handoff's own keys taken out of the arguments (the vLLM check removes the
  carried layout from ``mm_processor_kwargs``), never with the engine's own values changed;
* answer in place of ``wrapped`` with a value of the type the engine expects, built from the
  carried layout (the TensorRT-LLM prefill point does, when the layout was accepted: the engine's
  method would rebuild the very prompt the layout replaces);
* let the engine's own exceptions through untouched.

The lifecycle around the ledger (lock, version gate, install / uninstall) is
:class:`mm_handoff.glue.instrumentor.Instrumentor`.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: attribute set on every wrapper function: the ledger key it was installed under
WRAPPER_MARK = "__mm_handoff_target__"

#: (wrapped_bound_method, instance, args, kwargs) -> result; what it may do: see the module doc
Hook = Callable[[Callable, Any, tuple, dict], Any]


def target_key(cls: type, attr: str) -> str:
    """The ledger key of an attribute: ``"module:Qualname.attr"``."""
    return f"{cls.__module__}:{cls.__qualname__}.{attr}"


def find_owner(cls: type, attr: str) -> tuple[type | None, Any]:
    """The first class along ``cls.__mro__`` whose ``vars()`` holds ``attr``, and the raw value."""
    for klass in cls.__mro__:
        if attr in vars(klass):
            return klass, vars(klass)[attr]
    return None, None


def _still_loaded(cls: type) -> bool:
    obj = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


@dataclass
class Switch:
    """Per-wrapper on/off flag, read on every call."""

    on: bool = True


@dataclass
class PatchRecord:
    key: str
    #: the class whose ``vars()`` received the wrapper
    target: type
    attr: str
    #: the raw attribute that was effective before (from ``vars(owner)``)
    original: Any
    #: the class that owned ``original``
    owner: type
    #: whether ``target`` owned the attribute itself (restore) or inherited it (delete)
    was_own: bool
    wrapper: Any
    switch: Switch = field(default_factory=Switch)


def make_wrapper(original: Callable, hook: Hook, switch: Switch, key: str) -> Callable:
    """A plain function that binds ``original`` to the instance and calls ``hook`` with it."""

    def patched(self, *args, **kwargs):
        bound = original.__get__(self, type(self))
        if not switch.on:
            return bound(*args, **kwargs)
        return hook(bound, self, args, kwargs)

    functools.update_wrapper(patched, original)
    setattr(patched, WRAPPER_MARK, key)
    return patched


class Ledger:
    """Process-wide record of installed wrappers; callers hold the installer's lock."""

    def __init__(self, *, log: logging.Logger | None = None) -> None:
        self._log = log or logging.getLogger("mm_handoff")
        self._active: dict[str, PatchRecord] = {}
        self._first_originals: dict[str, tuple[type, Any]] = {}
        self._left_in_place: dict[str, PatchRecord] = {}

    # ------------------------------------------------------------------ queries
    def __contains__(self, key: str) -> bool:
        return key in self._active

    def __len__(self) -> int:
        return len(self._active)

    def records(self) -> list:
        return list(self._active.values())

    def left_in_place(self) -> list:
        """Wrappers someone wrapped on top of, which uninstall left (switched off) in place (only
        those on classes still loaded: a re-imported module starts clean)."""
        return sorted(k for k, r in self._left_in_place.items() if _still_loaded(r.target))

    def get_original(self, key: str) -> Any:
        """The first original recorded under ``key`` (``None`` if never patched)."""
        entry = self._first_originals.get(key)
        return None if entry is None else entry[1]

    def is_current(self, record: PatchRecord) -> bool:
        return vars(record.target).get(record.attr) is record.wrapper

    # ------------------------------------------------------------------ changes
    def apply(self, cls: type, attr: str, hook: Hook) -> PatchRecord:
        """Wrap ``cls.attr`` (own or inherited); a key already in the ledger is left alone."""
        key = target_key(cls, attr)
        if key in self._active:
            return self._active[key]
        owner, original = find_owner(cls, attr)
        if owner is None:
            raise AttributeError(f"{key}: no such attribute along {cls.__qualname__}'s MRO")
        first = self._first_originals.get(key)
        if first is None or first[0] is not cls:
            self._first_originals[key] = (cls, original)
        switch = Switch()
        wrapper = make_wrapper(original, hook, switch, key)
        record = PatchRecord(key, cls, attr, original, owner, owner is cls, wrapper, switch)
        setattr(cls, attr, wrapper)
        self._active[key] = record
        return record

    def switch_off_all(self) -> None:
        for record in self._active.values():
            record.switch.on = False

    def remove(self, key: str) -> bool:
        """Undo one wrapper; ``False`` when a foreign wrapper sits on top (left in place, warned)."""
        record = self._active.pop(key, None)
        if record is None:
            return True
        record.switch.on = False
        if not self.is_current(record):
            current = vars(record.target).get(record.attr)
            self._log.warning(
                "mm-handoff: %s was wrapped again after install (now %r); leaving both wrappers in "
                "place, mm-handoff's switched off", key, current)
            self._left_in_place[key] = record
            return False
        if record.was_own:
            setattr(record.target, record.attr, record.original)
        else:
            delattr(record.target, record.attr)
        return True
