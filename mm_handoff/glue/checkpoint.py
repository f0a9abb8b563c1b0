"""The one check point every engine's wrappers run: check -> policy decision -> observers.

A :class:`CheckPoint` is one place of an engine where a request is checked, named from a closed set
(:data:`~mm_handoff.glue.signals.CHECK_POINTS`):

=============  ================================================================================================
``encoder``    what the encoder ships (TensorRT-LLM's ``MultimodalEncoder.generate_async``)
``admission``  the PD side holds the request's prompt against the layout before the engine uses it
               (TensorRT-LLM's ``BaseLLM._preprocess``; vLLM's ``Qwen3VLMultiModalProcessor.apply``; SGLang's
               ``get_validated_mm_data``)
``prefill``    the prompt rewrite from the carried layout (TensorRT-LLM's prefill method)
``ingress``    where the request enters the process that runs it (TensorRT-LLM's worker
               ``BaseWorker._enqueue_request``; SGLang's receiver ``MMReceiverBase.recv_mm_data``)
``slice``      the context-phase mRoPE slice (TensorRT-LLM's ``_prepare_tp_inputs``)
``output``     reserved: a check of what the engine produced after the request ran (no engine has one yet)
=============  ================================================================================================

Every hooked call at a check point is one :class:`Visit` (``with point.visit() as visit:``): the wrapper
calls the engine through :meth:`Visit.call` (its time is the engine's, not the hook's), names what it learns
(:meth:`Visit.named`, :meth:`Visit.uses`), and hands every failed check to :meth:`Visit.decide`, which applies
:func:`mm_handoff.glue.policy.decide` and the rule that another request's layout is refused under every policy
(``own=True``: :func:`~mm_handoff.glue.policy.not_this_requests`). When the visit ends, its one outcome goes to
the observers (:mod:`mm_handoff.glue.signals`): ``refused`` when a typed error of this hook leaves it (an
error the engine's call raised, e.g. a nested check point's, is that one's), else what the policy decided
(``fallback``, ``rebuilt``, ``shipped_grids``), else ``accepted``; a visit that found nothing to check
(:meth:`Visit.skip`) records its time only.
"""

from __future__ import annotations

import time

import attrs

from ..errors import HandoffError
from .policy import Decision, Policy, decide, not_this_requests
from .signals import CHECK_POINTS, ENGINES, SIGNALS, Signals, observer_failed

#: the outcome each decision records
_OUTCOME = {Decision.PASS_THROUGH: "fallback", Decision.REBUILD: "rebuilt", Decision.SHIP_GRIDS: "shipped_grids"}


def _one_of(allowed: tuple, field: str):
    def check(instance, attribute, value) -> None:
        if value not in allowed:
            raise HandoffError(f"CheckPoint.{field}", f"one of {list(allowed)}", value)

    return check


@attrs.frozen
class CheckPoint:
    """One check point of one engine, with the policy install bound and the hook it runs at (for events)."""

    engine: str = attrs.field(validator=_one_of(ENGINES, "engine"))
    name: str = attrs.field(validator=_one_of(CHECK_POINTS, "name"))
    policy: Policy = attrs.field(default=Policy.RAISE, validator=attrs.validators.instance_of(Policy))
    #: ``Class.attribute`` of the hook (from the hook table: a bounded name)
    hook: str = ""
    signals: Signals = attrs.field(default=SIGNALS, repr=False, eq=False)

    def visit(self, request_id=None) -> Visit:
        """One hooked call at this check point (a context manager)."""
        return Visit(self, request_id)


class Visit:
    """One hooked call at a check point (see the module doc). Not shared between calls or threads."""

    __slots__ = ("point", "request_id", "_adapter", "_start", "_engine", "_engine_error", "_decided", "_error",
                 "_skip")

    def __init__(self, point: CheckPoint, request_id=None) -> None:
        self.point, self.request_id = point, request_id
        self._adapter = None
        self._start = 0.0
        self._engine = 0.0
        self._engine_error: BaseException | None = None
        self._decided: str | None = None
        self._error: HandoffError | None = None
        self._skip = False

    # --------------------------------------------------------------------------- what the wrapper says
    def named(self, request_id) -> Visit:
        """The request this call is about, once the wrapper knows it."""
        self.request_id = request_id
        return self

    def uses(self, adapter) -> None:
        """The family adapter the checks ran with (its family labels the outcome)."""
        self._adapter = adapter

    def skip(self) -> None:
        """Nothing to check in this call (text only, a nested call the outer one decides): no outcome."""
        self._skip = True

    def call(self, fn, *args, **kwargs):
        """The engine's own function: its time is not the hook's, and what it raises is not this visit's."""
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            self._engine_error = exc
            raise
        finally:
            self._engine += time.perf_counter() - start

    async def call_async(self, fn, *args, **kwargs):
        """:meth:`call` for a coroutine function (its wall time, awaiting included, is the engine's)."""
        start = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        except BaseException as exc:
            self._engine_error = exc
            raise
        finally:
            self._engine += time.perf_counter() - start

    def decide(self, error: HandoffError, *, remedy: Decision | None = None, own: bool = False) -> Decision:
        """What this check point does with a failed check: the policy's decision, or ``error`` raised (under
        ``raise``, where nothing else is possible, or with ``own=True`` when ``error`` says the layout is
        another request's: refused under every policy)."""
        if own and not_this_requests(error):
            raise error
        decision = decide(self.point.policy, error, remedy=remedy)
        self._decided, self._error = _OUTCOME[decision], error
        return decision

    # --------------------------------------------------------------------------- the observers
    def __enter__(self) -> Visit:
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        seconds = max(time.perf_counter() - self._start - self._engine, 0.0)
        outcome, error = self._outcome(exc)
        point = self.point
        try:
            family = None if outcome is None or self._adapter is None else self._adapter.family
        except Exception:  # an adapter whose family cannot be read: not a label value
            family = None
        # the observers never fail the request nor replace its refusal (Signals' own never raise; this guards
        # any other): what they could not do is reported, rate-limited
        try:
            point.signals.record(point.engine, point.name, family, outcome, seconds, error)
            if error is not None:
                point.signals.event(engine=point.engine, check_point=point.name, hook=point.hook,
                                    policy=point.policy.value, family=family, outcome=outcome or "refused",
                                    error=error, request_id=self.request_id)
        except Exception as failure:
            observer_failed(failure)

    def _outcome(self, exc) -> tuple:
        """``(outcome or None, the error behind it or None)``."""
        if self._skip:
            return None, None
        if exc is not None:
            engine = self._engine_error
            if not isinstance(exc, HandoffError) or (engine is not None and (exc is engine or
                                                                            exc.__context__ is engine)):
                return None, None  # the engine's own exception (or a nested check point's): not this visit's
            return "refused", exc
        if self._decided is not None:
            return self._decided, self._error
        return "accepted", None
