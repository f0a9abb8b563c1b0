"""What to do when the prefill side has no (or a mismatching) encoder layout: one setting.

- ``raise`` (default): reject the request with the typed error; nothing else is affected.
- ``rebuild``: rebuild the exact aggregated ids through the family adapter from the grids and the
  video metadata carried with the request; raise when those are not carried either.
- ``fallback``: keep the engine's upstream behaviour, with a warning (explicit opt-in only).

The same policy applies at every check point (admission, prefill rebuild, worker ingress, the
context-phase slice). ``MM_HANDOFF_POLICY`` sets the process default.
"""

from __future__ import annotations

import enum
import os

from . import _env
from .errors import HandoffError

__all__ = ["Policy", "resolve_policy", "POLICY_ENV"]

POLICY_ENV = _env.POLICY


class Policy(str, enum.Enum):
    RAISE = "raise"
    REBUILD = "rebuild"
    FALLBACK = "fallback"


def resolve_policy(value: str | Policy | None = None) -> Policy:
    """A policy from an argument, else ``$MM_HANDOFF_POLICY``, else ``raise``."""
    if value is None:
        value = os.environ.get(POLICY_ENV) or Policy.RAISE
    try:
        return Policy(value.value if isinstance(value, Policy) else str(value).strip().lower())
    except ValueError:
        raise HandoffError("policy", f"one of {[p.value for p in Policy]}", value) from None
