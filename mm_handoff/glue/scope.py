"""Per-request state a hook hands to another hook of the same call: one :class:`contextvars.ContextVar`
abstraction for every engine glue.

A hook that cannot see the request (TensorRT-LLM's prefill method, SGLang's ``get_validated_mm_data``) learns
it from the hook around it (``BaseLLM._preprocess``, ``MMReceiverBase.recv_mm_data``), and a hook that runs
inside another one's call (the encoder's ``_preprocess`` inside ``generate_async``) fills the slot that call
opened. A :class:`RequestScope` holds that state for the call in progress in this thread or task: concurrent
calls in other threads or tasks each see their own, and the state is gone when the call returns or raises.
"""

from __future__ import annotations

import contextvars
from typing import Generic, TypeVar

T = TypeVar("T")


class RequestScope(Generic[T]):
    """The state of the call in progress (``None`` outside one): :meth:`get` it; :meth:`opened` sets it for a
    ``with`` block and puts back what was there before on leaving it, raised or not."""

    __slots__ = ("_var",)

    def __init__(self, name: str) -> None:
        self._var: contextvars.ContextVar[T | None] = contextvars.ContextVar(name, default=None)

    def get(self) -> T | None:
        return self._var.get()

    def opened(self, value: T) -> _Opened[T]:
        return _Opened(self._var, value)


class _Opened(Generic[T]):
    """``with scope.opened(value) as value:`` (a class, not a generator: it runs on every hooked call)."""

    __slots__ = ("_var", "_value", "_token")

    def __init__(self, var: contextvars.ContextVar, value: T) -> None:
        self._var, self._value = var, value
        self._token: contextvars.Token | None = None

    def __enter__(self) -> T:
        self._token = self._var.set(self._value)
        return self._value

    def __exit__(self, *exc) -> None:
        if self._token is not None:
            self._var.reset(self._token)
            self._token = None
