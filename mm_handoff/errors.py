"""Typed errors. Every check in mm-handoff raises one of these, never an ``assert``.

Each error carries the values it complains about as attributes (``request_id``, ``field``,
``expected``, ``actual``) and builds its message from them, so a log line names the request, the
field, what was expected and what was found. A message always prints, in at most 1,000 characters
(a huge or unprintable value prints shortened, marked where it was cut; the attributes keep it whole).
All of them are ``ValueError`` subclasses (through
:class:`HandoffError`), so callers that already catch ``ValueError`` per request keep working; the one
exception to the attributes is :class:`UsageError`, a command-line usage mistake (a plain ``ValueError``
with a message, no request).
"""

from __future__ import annotations

import functools
import itertools
import pickle
import reprlib
from typing import Any, cast

#: the longest a value prints in a message, and the longest a message prints; the values themselves
#: stay whole on the exception's attributes
MAX_VALUE_CHARS = 400
MAX_MESSAGE_CHARS = 1000


class _ShortRepr(reprlib.Repr):
    """``reprlib`` with numpy arrays, huge ints and unprintable objects handled: a message always
    prints, and a value prints in at most :data:`MAX_VALUE_CHARS` characters, marked where cut."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxtuple, self.maxlist, self.maxarray = 3, 8, 8, 8
        self.maxdict, self.maxset, self.maxfrozenset, self.maxdeque = 8, 8, 8, 8
        self.maxstring, self.maxlong, self.maxother = 380, 60, 160

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:  # beyond Python's int-to-str digit limit
            return f"<int of {x.bit_length()} bits>"

    def repr_dict(self, x: dict, level: int) -> str:  # in insertion order, as repr() prints it
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                  for k, v in itertools.islice(x.items(), self.maxdict)]
        return "{" + ", ".join(pieces) + (", ...}" if len(x) > self.maxdict else "}")

    def repr_set(self, x: Any, level: int) -> str:  # without sorting (reprlib sorts the whole set)
        if not x:
            return f"{type(x).__name__}()"
        head = ", ".join(self.repr1(v, level - 1) for v in itertools.islice(x, self.maxset))
        return "{" + head + (", ...}" if len(x) > self.maxset else "}")

    repr_frozenset = repr_set

    def repr_bytes(self, x: Any, level: int) -> str:
        return repr(x) if len(x) <= self.maxstring else f"<{type(x).__name__} of {len(x)} bytes>"

    repr_bytearray = repr_bytes

    def repr_ndarray(self, x: Any, level: int) -> str:
        return f"array(shape={tuple(x.shape)}, dtype={x.dtype})" if x.size > 8 else self.repr_instance(x, level)

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            size = len(x) if hasattr(x, "__len__") and getattr(x, "shape", None) != () else 0  # (0-d: no len)
            if size > 1000:  # its whole repr would be built before being cut
                return f"<{type(x).__name__} of {size} items>"
            return super().repr_instance(x, level)
        except Exception:  # an object whose repr fails must not take the message with it
            return f"<unprintable {type(x).__name__}>"


_SHORT = _ShortRepr()


def _fmt(value: Any) -> str:
    """A short, always printable form of a value (messages stay under a kilobyte; the whole value
    stays on the exception's attributes)."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # RecursionError on deep nesting, or anything an exotic object raises
        text = f"<unprintable {type(value).__name__}>"
    return _cut(text, MAX_VALUE_CHARS)


def printed(value: Any) -> str:
    """A value as a message prints it (a string as itself, anything else as its short form): within
    :data:`MAX_VALUE_CHARS`, marked where cut, never failing. What a structured log event carries."""
    return _short_text(value)


def _short_text(text: Any) -> str:
    """A field name or hint, shortened like a value when it is very long."""
    return _cut(text if isinstance(text, str) else _fmt(text), MAX_VALUE_CHARS)


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, the marker of what was cut included."""
    if len(text) <= limit:
        return text
    keep = limit - len(f"...({len(text)} more chars)")
    return f"{text[:keep]}...({len(text) - keep} more chars)"


#: the likely cause when the prefill side has fewer ids (or runs) than the encoder
STOCK_HINT = ("the prefill side likely rebuilt the prompt from text (one pad run per item, no timestamps); "
              "ship the encoder's layout or rebuild it with the family adapter")


class HandoffError(ValueError):
    """Base of every mm-handoff error: one request's handoff is wrong, nothing else is affected."""

    def __init__(
        self,
        field: str,
        expected: Any = None,
        actual: Any = None,
        *,
        request_id: Any = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(field, expected, actual)
        self.field = field
        self.expected = expected
        self.actual = actual
        self.request_id = request_id
        self.hint = hint

    def with_request(self, request_id: Any) -> HandoffError:
        """The error to raise for ``request_id``: a copy naming it, chained and with the traceback of this one,
        which is left as it is (an instance raised for several requests, an adapter's prebuilt error, say,
        names each of them, and none of them afterwards); this one when it names that request already or
        ``request_id`` is None. Use it as ``raise exc.with_request(request_id)``.
        """
        if request_id is None or _same_request(self.request_id, request_id):
            return self
        try:
            copy = cast(HandoffError, _restored(type(self), self.args, _state_of(self)))
        except Exception:  # a subclass that cannot be rebuilt without its own constructor: named as it is
            return self
        copy.request_id = request_id
        copy.__cause__ = self.__cause__
        copy.__suppress_context__ = True  # the original is not this request's context
        return copy.with_traceback(self.__traceback__)

    def __reduce__(self):
        """Pickled with its values and request (a worker's error crosses processes), whatever the subclass's
        constructor takes; a value that cannot be pickled travels as its printed form."""
        return _restored, (type(self), tuple(_picklable(a) for a in self.args),
                           {k: _picklable(v) for k, v in _state_of(self).items()})

    def __repr__(self) -> str:
        """Printable whatever the values hold (a logger's ``%r`` must not fail on an adapter whose repr recurses)."""
        return f"{type(self).__name__}({_fmt(self.field)}, {_fmt(self.expected)}, {_fmt(self.actual)})"

    def __str__(self) -> str:
        # the request when known, else the error's class: an engine that answers a client with str(exc) only
        # (vLLM's HTTP 400 body) still names what failed
        who = f"request {_fmt(self.request_id)}" if self.request_id is not None else type(self).__name__
        text = f"{who}: {_short_text(self.field)}: expected {_fmt(self.expected)}, got {_fmt(self.actual)}"
        if self.hint:
            text += f" ({_short_text(self.hint)})"
        return _cut(text, MAX_MESSAGE_CHARS)


def _same_request(a: Any, b: Any) -> bool:
    """Whether two request ids name one request: the same object, or equal plain strings or ints (an id's
    own ``__eq__`` is never called)."""
    return a is b or (type(a) is type(b) and type(a) in (str, int) and a == b)


def _state_of(exc: BaseException) -> dict:
    """An exception's attributes, its slots included, each list (``__notes__``) copied."""
    state = dict(getattr(exc, "__dict__", {}))
    for cls in type(exc).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(exc, name):
                state[name] = getattr(exc, name)
    return {k: list(v) if type(v) is list else v for k, v in state.items()}


def _picklable(value: Any) -> Any:
    try:
        pickle.dumps(value)
    except Exception:  # a caller's local class, a lock, an object whose reduce raises
        return _fmt(value)
    return value


def _restored(cls: type, args: tuple, state: dict) -> BaseException:
    """An instance of ``cls`` with ``args`` and ``state``, made without the subclass's ``__new__`` or
    ``__init__`` (which may take other arguments than its ``args``)."""
    exc: BaseException = BaseException.__new__(cls, *args)
    exc.args = args
    for name, value in state.items():
        object.__setattr__(exc, name, value)
    return exc


class LayoutError(HandoffError):
    """A layout invariant is broken; raised at construction, so an invalid layout never exists."""


class MropeLengthError(HandoffError):
    """mRoPE position ids do not cover the prompt exactly (the silent-slice bug, made loud)."""


class EmbeddingCountError(HandoffError):
    """The prompt's pad tokens and the encoder's embedding rows disagree."""


class GridMismatchError(HandoffError):
    """Pad runs do not follow the item's grid (groups == t, pads per group == h*w/merge^2)."""


class FingerprintMismatchError(HandoffError):
    """The prefill side's layout is not the one the encoder described."""


class TokenMismatchError(HandoffError):
    """The prefill prompt differs from the encoder's; carries the first differing index."""

    def __init__(self, field: str, expected: Any, actual: Any, *, index: int,
                 expected_context: Any = None, actual_context: Any = None,
                 request_id: Any = None, hint: str | None = None) -> None:
        super().__init__(field, expected, actual, request_id=request_id, hint=hint)
        self.index = index
        self.expected_context = expected_context
        self.actual_context = actual_context

    def __str__(self) -> str:
        base = super().__str__()
        return _cut(f"{base}; first difference at index {_fmt(self.index)}: encoder has "
                    f"{_fmt(self.expected_context)}, prefill has {_fmt(self.actual_context)}", MAX_MESSAGE_CHARS)


class WireFormatError(HandoffError):
    """A wire payload is refused: malformed (wrong type, missing or unknown key, undecodable field), of
    another format version (field ``wire.version``), altered in transit (``wire.checksum``), or declaring
    more than the limits allow (rejected before anything is allocated)."""


class SkewError(HandoffError):
    """Encoder and prefill disagree on tokenizer, processor convention or family."""


class AdapterError(HandoffError):
    """An adapter could not be found, registered or built, or it failed in an untyped way."""


class AdapterNotFoundError(AdapterError, LookupError):
    """No adapter is registered for a key; the message lists the known families."""


class AdapterRegistrationError(AdapterError, TypeError):
    """The registry was called wrongly: no keys, a key that is not a string or class, a non-callable factory."""


class EngineNotSupportedError(HandoffError, RuntimeError):
    """The installed engine is missing, too old, or its hook points drifted."""


class UsageError(ValueError):
    """A command-line or API argument is wrong (not a handoff problem); the CLI prints it and exits 2."""


def typed_failures(field: str, error: type[HandoffError] = HandoffError):
    """Decorator for an entry point that reads what a caller hands it: any failure that is not already a
    :class:`HandoffError` (an object whose ``.shape`` or ``__index__`` raises, a conversion that fails, an
    index out of range on a value no check foresaw) becomes ``error`` naming ``field`` and the request
    (a ``request_id`` keyword), chained to the original; a :class:`HandoffError` passes as it is, naming
    that request when it named none. So every failure of an entry point reaches a serving policy as a typed
    error, however odd its input.
    """
    def decorate(fn):
        @functools.wraps(fn)
        def entry(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except HandoffError as exc:  # typed already: it names the request it was called for
                raise exc.with_request(kwargs.get("request_id"))  # noqa: B904 (the same error, or its copy)
            except Exception as exc:
                try:
                    what = f"{type(exc).__name__}: {exc}"
                except Exception:  # an exception whose str() raises
                    what = type(exc).__name__
                name = getattr(fn, "__name__", type(fn).__name__)  # a partial or a callable object has none
                raise error(field, f"inputs {name}() can read", what, request_id=kwargs.get("request_id"),
                            hint="an argument failed when read; see the chained exception") from exc
        return entry
    return decorate
