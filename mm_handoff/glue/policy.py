"""What to do when the prefill side has no (or a mismatching) encoder layout: one setting.

- ``raise`` (default): reject the request with the typed error; nothing else is affected.
- ``rebuild``: rebuild the exact aggregated ids through the family adapter from the grids and the
  video metadata carried with the request; raise when those are not carried either.
- ``fallback``: keep the engine's upstream behaviour, with a warning (explicit opt-in only).

The same policy applies at every check point of every engine (TensorRT-LLM: what the encoder attaches,
the prefill point, admission, worker ingress, the context-phase slice; vLLM and SGLang: admission).
``MM_HANDOFF_POLICY`` sets the process default.

A check point that failed asks :func:`decide` what to do and acts on the :class:`Decision` it gets:
the policy, and what that check point can do instead of raising (its ``remedy``), decide it. The check
point (:mod:`mm_handoff.glue.checkpoint`) asks through :meth:`~mm_handoff.glue.checkpoint.Visit.decide`, which
counts the outcome and writes the one event that says what happened there.

A layout that does not belong to the request (another request's: :func:`mm_handoff.checks.check_own_request`
fails on this request's own prompt, grids or video metadata) is not a mismatch to decide on: every check
point raises it under every policy, without asking :func:`decide` (:func:`not_this_requests` tells such a
verdict from an adapter that failed to give one). ``rebuild`` starts from this request's own prompt, grids
and metadata, never from such a layout, and ``fallback`` never passes it on.
"""

from __future__ import annotations

import enum
import os

from .. import _env
from ..errors import AdapterError, HandoffError


class Policy(str, enum.Enum):
    RAISE = "raise"
    REBUILD = "rebuild"
    FALLBACK = "fallback"


def resolve_policy(value: str | Policy | None = None, *, environ=None) -> Policy:
    """A policy from an argument, else ``$MM_HANDOFF_POLICY`` (of ``environ``, default the process's), else
    ``raise``; anything else is a typed error naming the argument or the variable."""
    field = "policy"
    if value is None:
        field, value = _env.POLICY, (os.environ if environ is None else environ).get(_env.POLICY) or Policy.RAISE
    try:
        return Policy(value.value if isinstance(value, Policy) else str(value).strip().lower())
    except ValueError:
        raise HandoffError(field, f"one of {[p.value for p in Policy]}", value) from None


class Decision(enum.Enum):
    """What a check point does with a failed check (under ``raise`` the error propagates instead)."""

    #: keep the engine's own behaviour (``fallback``), with a warning
    PASS_THROUGH = "pass through"
    #: the prefill point rebuilds the exact aggregated layout from the carried grids and metadata
    REBUILD = "rebuild"
    #: the encoder ships the grids and video metadata without a layout, so the prefill side can rebuild
    SHIP_GRIDS = "ship grids"


def decide(policy: Policy, error: HandoffError, *, remedy: Decision | None = None) -> Decision:
    """The decision for one failed check; under ``raise`` the typed error propagates.

    ``remedy``: what this check point can do instead of failing the request, if anything:
    :attr:`Decision.REBUILD` at the prefill point when grids are carried, :attr:`Decision.SHIP_GRIDS`
    at the encoder. ``fallback`` gives ``remedy`` where it is :attr:`Decision.SHIP_GRIDS` (the
    encoder has no engine behaviour to fall back to but shipping less), else
    :attr:`Decision.PASS_THROUGH`. ``rebuild`` gives ``remedy`` where there is one; without one it
    raises, as ``raise`` does (there is nothing to rebuild at that check point).

    It writes nothing: the check point that asked (:meth:`mm_handoff.glue.checkpoint.Visit.decide`) records
    the outcome and writes its one event (:mod:`mm_handoff.glue.signals`).
    """
    if policy is Policy.FALLBACK:
        return Decision.SHIP_GRIDS if remedy is Decision.SHIP_GRIDS else Decision.PASS_THROUGH
    if policy is Policy.REBUILD and remedy is not None:
        return remedy
    raise error


def not_this_requests(error: HandoffError) -> bool:
    """Whether a failed :func:`~mm_handoff.checks.check_own_request` says the layout is another request's,
    to be refused under every policy: every typed verdict does; an :class:`~mm_handoff.errors.AdapterError`
    (the adapter failed, it did not tell) does not, and goes to :func:`decide` like any other failure."""
    return not isinstance(error, AdapterError)
