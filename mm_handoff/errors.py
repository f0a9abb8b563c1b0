"""Typed errors. Every check in mm-handoff raises one of these, never an ``assert``.

Each error carries the values it complains about as attributes (``request_id``, ``field``,
``expected``, ``actual``) and builds its message from them, so a log line names the request, the
field, what was expected and what was found. All of them are ``ValueError`` subclasses (through
:class:`HandoffError`), so callers that already catch ``ValueError`` per request keep working; the one
exception to the attributes is :class:`UsageError`, a command-line usage mistake (a plain ``ValueError``
with a message, no request).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HandoffError",
    "LayoutError",
    "MropeLengthError",
    "EmbeddingCountError",
    "GridMismatchError",
    "FingerprintMismatchError",
    "TokenMismatchError",
    "WireFormatError",
    "WireVersionError",
    "WireChecksumError",
    "WireLimitError",
    "SkewError",
    "AdapterError",
    "AdapterNotFoundError",
    "AdapterAlreadyRegisteredError",
    "AdapterRegistrationError",
    "EngineNotSupportedError",
    "UsageError",
]


def _fmt(value: Any) -> str:
    """The value as it is: messages are never truncated to fit (callers pass summaries, not payloads)."""
    return repr(value)


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

    def with_request(self, request_id: Any) -> "HandoffError":
        """Name the request on an error raised where it was not known yet."""
        if self.request_id is None:
            self.request_id = request_id
        return self

    def __str__(self) -> str:
        who = f"request {self.request_id!r}" if self.request_id is not None else "handoff"
        text = f"{who}: {self.field}: expected {_fmt(self.expected)}, got {_fmt(self.actual)}"
        if self.hint:
            text += f" ({self.hint})"
        return text


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
        return (f"{base}; first difference at index {self.index}: encoder has "
                f"{self.expected_context}, prefill has {self.actual_context}")


class WireFormatError(HandoffError):
    """A wire payload is malformed: wrong type, missing or unknown key, undecodable field."""


class WireVersionError(WireFormatError):
    """A wire payload of a format version this build does not read."""


class WireChecksumError(WireFormatError):
    """A wire payload whose content does not match its fingerprint (corrupted in transit)."""


class WireLimitError(WireFormatError):
    """A wire payload declares more than the configured limits allow; rejected before allocating."""


class SkewError(HandoffError):
    """Encoder and prefill disagree on tokenizer, processor convention or family."""


class AdapterError(HandoffError):
    """An adapter could not be found, registered or built, or it failed in an untyped way."""


class AdapterNotFoundError(AdapterError, LookupError):
    """No adapter is registered for a key; the message lists the known families."""


class AdapterAlreadyRegisteredError(AdapterError):
    """A key already has an adapter and replacing it was not asked for."""


class AdapterRegistrationError(AdapterError, TypeError):
    """The registry was called wrongly: no keys, a key that is not a string or class, a non-callable factory."""


class EngineNotSupportedError(HandoffError, RuntimeError):
    """The installed engine is missing, too old, or its hook points drifted."""


class UsageError(ValueError):
    """A command-line or API argument is wrong (not a handoff problem); the CLI prints it and exits 2."""
