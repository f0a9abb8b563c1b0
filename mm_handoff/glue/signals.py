"""What every check point tells the outside: counters and host time (metrics), and one event per refusal,
rebuild and fallback (the log). One home for all three engines; docs/metrics.md is the dashboard's view.

**Metrics.** Three figures, by labels from closed sets only (never a request id or free text):

* ``mm_handoff_checks_total{engine, family, check_point, outcome}``: one per request a check point decided on;
* ``mm_handoff_refusals_total{engine, check_point, error}``: one per request refused there, by error class;
* ``mm_handoff_hook_seconds{engine, check_point}``: the hook's own host time (the engine's call excluded).

``engine`` is one of :data:`ENGINES`, ``check_point`` of :data:`CHECK_POINTS`, ``outcome`` of :data:`OUTCOMES`,
``error`` the name of a :class:`~mm_handoff.errors.HandoffError` class of :mod:`mm_handoff.errors` (else
``"other"``), ``family`` a registered family name (else ``"other"``). They are always kept in process
(:func:`stats`, exported as ``mm_handoff.stats()``), and also in the engine's own Prometheus registry when
prometheus_client is importable and ``MM_HANDOFF_METRICS`` does not turn that side off (in memory, the registry
reads the in-process figures when it is scraped; with ``PROMETHEUS_MULTIPROC_DIR``, what changed since the last
write goes to the metrics' files at most every :data:`FLUSH_SECONDS`, from the hooked call that finds it due or
from a daemon thread, and at exit: :class:`_Prometheus`, :meth:`Signals.flush`).

**Never a request's failure.** An observer that fails (the metrics' files cannot be written: a full disk, a
``PROMETHEUS_MULTIPROC_DIR`` that names no directory, an incompatible prometheus_client; a logging handler that
raises) does not fail the request or replace its typed refusal: the failure is logged (once, then at most once
every :data:`FAILURE_LOG_SECONDS` per kind, with how many since), a failing Prometheus side switches off, and the
in-process figures go on.

prometheus_client picks its value store (in memory, or the ``PROMETHEUS_MULTIPROC_DIR`` files) when it is first
imported, and the engines set that variable during their start-up; so it is imported at the first recorded
outcome, never at ``import mm_handoff`` or at install. The metrics are registered once per process on the default
``REGISTRY`` (registering twice raises); in either mode the hot path is the in-process figures' dict increments
and the histogram's bucket, under one lock.

**Events.** A refusal, a rebuild, a fallback and a shipped-grids decision each write one line on the
``mm_handoff`` logger: ``mm-handoff event {json}``, the same dict in ``extra={"mm_handoff_event": ...}``
(request id, engine, family, check point, hook, policy, outcome, error class, field, expected, actual; values
printed as the errors print them, at most 400 characters each). Each ``(engine, check point, error class)``
has a token bucket (:data:`EVENT_BURST` events at once, then :data:`EVENT_RATE` per second): a flood of bad
requests cannot flood the log, and the next event that is written says how many were suppressed.
"""

from __future__ import annotations

import atexit
import bisect
import importlib
import importlib.util
import json
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .. import _env
from .. import errors as _errors
from ..errors import HandoffError, printed

#: the engines (label ``engine``)
ENGINES = ("trtllm", "vllm", "sglang")
#: the check points (label ``check_point``), in the order a request meets them
CHECK_POINTS = ("encoder", "admission", "prefill", "ingress", "slice", "output")
#: what a check point did with a request (label ``outcome``): ``shipped_grids`` is the encoder's remedy (the
#: layout did not derive; the grids and video metadata travel without it, so the prefill side can rebuild)
OUTCOMES = ("accepted", "refused", "rebuilt", "fallback", "shipped_grids")
#: the label value for anything outside a closed set
OTHER = "other"
#: the error classes a refusal is counted under: every HandoffError class mm_handoff.errors defines
ERROR_CLASSES: dict[type, str] = {
    value: name for name, value in sorted(vars(_errors).items())
    if isinstance(value, type) and issubclass(value, HandoffError) and value.__module__ == _errors.__name__}
#: the label values of ``error``
ERROR_NAMES = tuple(sorted(ERROR_CLASSES.values())) + (OTHER,)

CHECKS_TOTAL = "mm_handoff_checks_total"
REFUSALS_TOTAL = "mm_handoff_refusals_total"
HOOK_SECONDS = "mm_handoff_hook_seconds"
#: host time of one hook: 1 us .. 100 ms (the checks take microseconds; a long prompt's accept step milliseconds)
HOOK_SECONDS_BUCKETS = (1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
                        2.5e-2, 0.1)

#: multiprocess mode: the longest a recorded outcome waits in process before it is written to the files
FLUSH_SECONDS = 1.0
#: an observer's failure is logged at once, then at most once this often per kind (with how many since)
FAILURE_LOG_SECONDS = 60.0

#: events written at once per (engine, check point, error class), then EVENT_RATE per second
EVENT_BURST = 10
EVENT_RATE = 1.0
#: the longest request id an event carries (printed as the errors print it beyond that)
_MAX_ID_CHARS = 200

log = logging.getLogger("mm_handoff")

#: the events' levels: a refusal or a fallback is a warning, a rebuild or shipped grids what the policy asked for
_LEVELS = {"refused": logging.WARNING, "fallback": logging.WARNING, "rebuilt": logging.INFO,
           "shipped_grids": logging.INFO}


# ------------------------------------------------------------------------------------ the setting
def metrics_setting(environ=None) -> bool | None:
    """``MM_HANDOFF_METRICS``: None when unset or blank (on when prometheus_client is importable), else the
    switch (:func:`mm_handoff._env.env_flag`: a value that is neither on nor off is a typed error)."""
    value = (os.environ if environ is None else environ).get(_env.METRICS)
    if value is None or not value.strip():
        return None
    return _env.env_flag(_env.METRICS, {_env.METRICS: value})


def prometheus_importable() -> bool:
    """Whether prometheus_client can be imported, asked without importing it."""
    try:
        return importlib.util.find_spec("prometheus_client") is not None
    except (ImportError, ValueError):
        return False


# ------------------------------------------------------------------------------------ the labels
class _Families:
    """``family`` label values: a registered family's name, else ``"other"``; answers cached, boundedly."""

    MAX_CACHED = 256

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def label(self, family: Any) -> str:
        if not isinstance(family, str):
            return OTHER
        hit = self._known.get(family)
        if hit is not None:
            return hit
        from ..adapters.registry import REGISTRY

        try:
            answer = family if family in REGISTRY.families() else OTHER
        except Exception:  # a registry that cannot answer: not a label value to trust
            answer = OTHER
        if len(self._known) < self.MAX_CACHED:
            self._known[family] = answer
        return answer


def error_label(error: BaseException | None) -> str:
    return OTHER if error is None else ERROR_CLASSES.get(type(error), OTHER)


# ------------------------------------------------------------------------------------ Prometheus
def _multiprocess(prom) -> bool:
    """Whether prometheus_client keeps its values in ``PROMETHEUS_MULTIPROC_DIR`` files (decided at its import)."""
    values = importlib.import_module("prometheus_client.values")
    return getattr(values, "ValueClass", None) is not getattr(values, "MutexValue", None)


class _Prometheus:
    """The three metrics in this process's Prometheus registry.

    In memory (one process: vLLM's single API server), the registry reads the in-process figures when it is
    scraped (:class:`_Collector`, registered once on the default ``REGISTRY``). With ``PROMETHEUS_MULTIPROC_DIR``
    (SGLang with ``--enable-metrics``, trtllm-serve, vLLM's several API servers) :meth:`write` adds what changed
    since the last write to the files, which is what another process's ``MultiProcessCollector`` sums: the
    counters through their labelled children (``inc(n)``), the histogram through the values prometheus_client's
    own ``Histogram`` child writes (``_sum`` and one per bucket, non-cumulative, in the files as ``observe`` leaves
    them; the collector derives ``_bucket{le=..}``, ``_sum`` and ``_count``), since ``Histogram`` has no batch
    observe. A prometheus_client whose ``Histogram`` keeps them otherwise fails :meth:`write`, typed: the side is
    switched off.
    """

    def __init__(self, signals: Signals) -> None:
        import prometheus_client as prom

        self.multiprocess = _multiprocess(prom)
        if not self.multiprocess:
            _register(prom.REGISTRY, _Collector(signals))
            return
        self.checks = _metric(prom.Counter, CHECKS_TOTAL, _DOCS[CHECKS_TOTAL], ("engine", "family", "check_point",
                                                                                "outcome"))
        self.refusals = _metric(prom.Counter, REFUSALS_TOTAL, _DOCS[REFUSALS_TOTAL], ("engine", "check_point", "error"))
        self.seconds = _metric(prom.Histogram, HOOK_SECONDS, _DOCS[HOOK_SECONDS], ("engine", "check_point"),
                               buckets=HOOK_SECONDS_BUCKETS)

    def histogram(self, key: tuple) -> tuple:
        """``(sum value, [bucket values])`` of the histogram's child for ``key``, as ``observe`` writes them."""
        child = self.seconds.labels(*key)
        bounds, buckets, total = (getattr(child, "_upper_bounds", None), getattr(child, "_buckets", None),
                                  getattr(child, "_sum", None))
        if (bounds != list(HOOK_SECONDS_BUCKETS) + [float("inf")] or not isinstance(buckets, list)
                or len(buckets) != len(bounds) or not all(hasattr(v, "inc") for v in buckets + [total])):
            raise HandoffError("prometheus_client Histogram child", "_upper_bounds, _buckets and _sum as "
                               "prometheus_client 0.x keeps them, with mm-handoff's buckets", type(child).__name__)
        return total, buckets

    def write(self, checks: dict, refusals: dict, seconds: dict, buckets: dict) -> None:
        """What changed since the last write (counts by key; per histogram key ``(count, sum)`` and the counts
        per bucket) into the files."""
        for key, count in checks.items():
            self.checks.labels(*key).inc(count)
        for key, count in refusals.items():
            self.refusals.labels(*key).inc(count)
        for key, (_, total) in seconds.items():
            value_sum, values = self.histogram(key)
            for value, count in zip(values, buckets[key], strict=True):
                if count:
                    value.inc(count)
            value_sum.inc(total)


_DOCS = {CHECKS_TOTAL: "Requests an mm-handoff check point decided on",
         REFUSALS_TOTAL: "Requests an mm-handoff check point refused",
         HOOK_SECONDS: "Host time of an mm-handoff hook (the engine's own call excluded)"}


class _Collector:
    """The in-process figures as the three metrics, read when the registry is scraped."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals

    def describe(self) -> list:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        return [CounterMetricFamily(CHECKS_TOTAL, _DOCS[CHECKS_TOTAL]),
                CounterMetricFamily(REFUSALS_TOTAL, _DOCS[REFUSALS_TOTAL]),
                HistogramMetricFamily(HOOK_SECONDS, _DOCS[HOOK_SECONDS])]

    def collect(self) -> list:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        checks, refusals, seconds, buckets = self.signals.figures()
        checked = CounterMetricFamily(CHECKS_TOTAL, _DOCS[CHECKS_TOTAL],
                                      labels=("engine", "family", "check_point", "outcome"))
        for key, count in sorted(checks.items()):
            checked.add_metric(key, count)
        refused = CounterMetricFamily(REFUSALS_TOTAL, _DOCS[REFUSALS_TOTAL], labels=("engine", "check_point", "error"))
        for key, count in sorted(refusals.items()):
            refused.add_metric(key, count)
        timed = HistogramMetricFamily(HOOK_SECONDS, _DOCS[HOOK_SECONDS], labels=("engine", "check_point"))
        for key, (_, total) in sorted(seconds.items()):
            running, pairs = 0, []
            for bound, count in zip(HOOK_SECONDS_BUCKETS + (float("inf"),), buckets.get(key, ()), strict=False):
                running += count
                pairs.append(("+Inf" if bound == float("inf") else repr(bound), running))
            timed.add_metric(key, pairs, total)
        return [checked, refused, timed]


def _register(registry, collector) -> None:
    """``collector`` on ``registry``, once: a second copy of the figures (another Signals, a re-imported module)
    does not replace the first."""
    try:
        registry.register(collector)
    except ValueError:  # the names are registered already in this process
        log.warning("mm-handoff: the Prometheus registry already has mm-handoff's metrics; this copy's figures "
                    "stay in process only")


def _metric(kind, name: str, doc: str, labels: tuple, **kwargs):
    """``kind(name, ...)`` on the default registry, or the one already there (a registry refuses a name twice)."""
    from prometheus_client import REGISTRY

    try:
        return kind(name, doc, labels, **kwargs)
    except ValueError:  # created before in this process (another copy of this module): use that one
        existing = getattr(REGISTRY, "_names_to_collectors", {}).get(name)
        if existing is None:
            raise
        return existing


# ------------------------------------------------------------------------------------ the events
class EventLog:
    """One event per refusal, rebuild and fallback, rate-limited per key (see the module doc)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, burst: int = EVENT_BURST,
                 rate: float = EVENT_RATE, logger: logging.Logger = log) -> None:
        self.clock, self.burst, self.rate, self.logger = clock, burst, rate, logger
        self._lock = threading.Lock()
        #: key -> [tokens, last refill time, suppressed since the last written event]
        self._buckets: dict[tuple, list] = {}

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()

    def emit(self, event: dict) -> bool:
        """Write ``event`` unless its bucket is empty; whether it was written."""
        level = _LEVELS.get(event["outcome"], logging.WARNING)
        if not self.logger.isEnabledFor(level):
            return False
        key = (event["engine"], event["check_point"], event["error"])
        with self._lock:
            now = self.clock()
            bucket = self._buckets.setdefault(key, [float(self.burst), now, 0])
            bucket[0] = min(float(self.burst), bucket[0] + (now - bucket[1]) * self.rate)
            bucket[1] = now
            if bucket[0] < 1.0:
                bucket[2] += 1
                return False
            bucket[0] -= 1.0
            suppressed, bucket[2] = bucket[2], 0
        if suppressed:
            event = {**event, "suppressed": suppressed}
        self.logger.log(level, "mm-handoff event %s", json.dumps(event, sort_keys=True, default=str),
                        extra={"mm_handoff_event": event})
        return True


def _plain(value: Any) -> Any:
    """A JSON value as the errors print it: a small number or bool as itself, anything else printed (bounded)."""
    if value is None or isinstance(value, bool) or (isinstance(value, int) and abs(value) < 2 ** 53):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else printed(value)
    return printed(value)


def _request(request_id: Any) -> Any:
    if isinstance(request_id, str) and len(request_id) <= _MAX_ID_CHARS:
        return request_id
    return _plain(request_id)


# ------------------------------------------------------------------------------------ failures
class _Failures:
    """An observer's failures, logged at once and then at most once every FAILURE_LOG_SECONDS per kind (with how
    many since); a logger that fails too falls back to stderr, and that failing is swallowed: never raises."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        #: kind -> [next time a line may be written, failures not written since]
        self._kinds: dict[str, list] = {}

    def report(self, kind: str, what: str, exc: BaseException) -> None:
        try:
            with self._lock:
                now = self.clock()
                state = self._kinds.setdefault(kind, [now, 0])
                if now < state[0]:
                    state[1] += 1
                    return
                since, state[0], state[1] = state[1], now + FAILURE_LOG_SECONDS, 0
            more = f" ({since} more since the last line)" if since else ""
            line = f"mm-handoff: {what}: {type(exc).__name__}: {exc}{more}"
            try:
                log.error("%s", line)
            except Exception:  # the logger fails too: stderr, as logging's own last resort does
                sys.stderr.write(line + "\n")
        except Exception:  # noqa: S110 - nothing left to tell it to; the request must not pay for it
            pass


# ------------------------------------------------------------------------------------ the flushing
#: the Signals with a multiprocess Prometheus side in this process (flushed at exit, reset in a forked child)
_WRITING: weakref.WeakSet = weakref.WeakSet()


def _flusher(ref: weakref.ref, wake: threading.Event) -> None:
    """The daemon thread of one Signals: its figures to the files every FLUSH_SECONDS, until it is gone or its
    Prometheus side is off (or another thread replaced this one: a fork)."""
    while not wake.wait(FLUSH_SECONDS):
        signals = ref()
        if signals is None or signals._wake is not wake or not signals._prometheus:
            return
        signals.flush(wait=False)
        del signals


#: the flush locks _before_fork holds (released in the parent after the fork)
_HELD_AT_FORK: list = []


def _before_fork() -> None:
    for signals in list(_WRITING):  # no flush half done by another thread in the child: its locks held forever
        if signals._flushing.acquire(timeout=FLUSH_SECONDS):
            _HELD_AT_FORK.append(signals._flushing)


def _after_fork_parent() -> None:
    while _HELD_AT_FORK:
        _HELD_AT_FORK.pop().release()


def _after_fork_child() -> None:
    _HELD_AT_FORK.clear()
    for signals in list(_WRITING):
        signals._forked()


def _at_exit() -> None:
    for signals in list(_WRITING):
        signals.flush()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent, after_in_child=_after_fork_child)
atexit.register(_at_exit)


# ------------------------------------------------------------------------------------ the observers
class Signals:
    """The observers of every check point: the in-process figures, Prometheus when on, the events."""

    def __init__(self, *, events: EventLog | None = None) -> None:
        self._lock = threading.Lock()
        self.events = events or EventLog()
        self.families = _Families()
        self._checks: dict[tuple, int] = {}
        self._refusals: dict[tuple, int] = {}
        self._seconds: dict[tuple, list] = {}
        #: per (engine, check point): how many calls fell in each bucket of HOOK_SECONDS_BUCKETS (+Inf last)
        self._buckets: dict[tuple, list] = {}
        #: None: not decided yet (at the first outcome); False: off; else the metrics
        self._prometheus: Any = None
        #: the setting read at install (None: not read yet; read at the first outcome then)
        self._wanted: bool | None = None
        self.failures = _Failures()
        #: multiprocess mode: the figures as last written to the files, what the next write adds to is the rest
        self._written: tuple = ({}, {}, {}, {})
        #: multiprocess mode: when the next write is due (monotonic; None: never, no clock read per call), and the
        #: flusher thread's wake-up
        self._due: float | None = None
        self._flushing = threading.Lock()
        self._wake: threading.Event | None = None

    def configure(self, environ=None) -> bool:
        """Read ``MM_HANDOFF_METRICS`` strictly (install calls this: a bad value fails it, closed); whether the
        Prometheus side will be on. Importing prometheus_client waits for the first outcome."""
        setting = metrics_setting(environ)
        importable = prometheus_importable()
        if setting and not importable:
            raise HandoffError(_env.METRICS, "prometheus_client importable (pip install 'mm-handoff[metrics]')",
                               "not installed", hint="unset it, or set it to 0, to run without Prometheus")
        with self._lock:
            self._wanted = importable if setting is None else setting
            if not self._wanted:
                self._prometheus = False
        return self._wanted

    def _start_prometheus(self):
        """The Prometheus side, decided at the first outcome (see the module doc)."""
        with self._lock:
            if self._prometheus is not None:
                return self._prometheus
            wanted = self._wanted
            if wanted is None:  # not installed through an instrumentor: the setting as it reads, never raising
                try:
                    wanted = prometheus_importable() if metrics_setting() is None else metrics_setting()
                except HandoffError as exc:
                    log.error("mm-handoff: %s; Prometheus metrics off", exc)
                    wanted = False
            try:
                self._prometheus = _Prometheus(self) if wanted else False
            except Exception as exc:  # an incompatible prometheus_client: the figures stay in process
                self._prometheus = False
                self.failures.report("prometheus", "Prometheus metrics off; the figures stay in process", exc)
            prometheus = self._prometheus
            if prometheus and prometheus.multiprocess:
                self._written = ({}, {}, {}, {})
                self._due = time.monotonic() + FLUSH_SECONDS
                self._start_flusher()
            return prometheus

    def _start_flusher(self) -> None:
        """The daemon thread that writes an idle process's figures (multiprocess mode)."""
        _WRITING.add(self)
        self._wake = wake = threading.Event()
        try:
            threading.Thread(target=_flusher, args=(weakref.ref(self), wake), name="mm-handoff-metrics",
                             daemon=True).start()
        except RuntimeError as exc:  # no thread now (interpreter shutdown): the hooked calls and the exit write
            self.failures.report("flusher", "no metrics flusher thread; the hooked calls write the figures", exc)

    def record(self, engine: str, check_point: str, family: Any, outcome: str | None, seconds: float,
               error: BaseException | None = None) -> None:
        """One hook call: its host time, and its outcome when it decided on a request (None: it did not). Never
        raises (see the module doc)."""
        try:
            self._record(engine, check_point, family, outcome, seconds, error)
        except Exception as exc:
            self.failures.report("record", "an outcome was not counted", exc)

    def _record(self, engine, check_point, family, outcome, seconds, error) -> None:
        family_label = self.families.label(family) if outcome is not None else OTHER
        error_name = error_label(error) if outcome == "refused" else None
        prom = self._prometheus
        if prom is None:
            prom = self._start_prometheus()
        # the registry reads these figures when scraped (in memory) or the next write adds them to the files
        # (multiprocess): only the histogram's bucket is added here
        bucket = bisect.bisect_left(HOOK_SECONDS_BUCKETS, seconds) if prom else -1
        with self._lock:
            key = (engine, check_point)
            timed = self._seconds.get(key)
            if timed is None:
                timed = self._seconds[key] = [0, 0.0]
                self._buckets[key] = [0] * (len(HOOK_SECONDS_BUCKETS) + 1)
            timed[0] += 1
            timed[1] += seconds
            if bucket >= 0:
                self._buckets[key][bucket] += 1
            if outcome is not None:
                checked = (engine, family_label, check_point, outcome)
                self._checks[checked] = self._checks.get(checked, 0) + 1
            if error_name is not None:
                refused = (engine, check_point, error_name)
                self._refusals[refused] = self._refusals.get(refused, 0) + 1
        due = self._due
        if due is not None and time.monotonic() >= due:  # multiprocess mode only
            self.flush(wait=False)

    def flush(self, *, wait: bool = True) -> bool:
        """Multiprocess mode: what changed since the last write into the metrics' files now (else nothing);
        whether anything was written. ``wait=False`` gives way to a write in progress. A write that fails switches
        the Prometheus side off (logged). Never raises."""
        prom = self._prometheus
        if not prom or not prom.multiprocess:
            return False
        if not self._flushing.acquire(blocking=wait):
            return False
        try:
            self._due = time.monotonic() + FLUSH_SECONDS
            changes = self._changes()
            if changes is None:
                return False
            prom.write(*changes)
            return True
        except Exception as exc:
            self._prometheus, self._due = False, None
            self.failures.report("prometheus", "writing the metrics' files failed; Prometheus metrics off, the "
                                 "figures stay in process (mm_handoff.stats())", exc)
            return False
        finally:
            self._flushing.release()

    def _changes(self) -> tuple | None:
        """What changed since the last write, and the figures now as the last written (None: nothing changed)."""
        with self._lock:
            written_checks, written_refusals, written_seconds, written_buckets = self._written
            checks = {k: n - written_checks.get(k, 0) for k, n in self._checks.items() if n != written_checks.get(k, 0)}
            refusals = {k: n - written_refusals.get(k, 0) for k, n in self._refusals.items()
                        if n != written_refusals.get(k, 0)}
            seconds, buckets = {}, {}
            for key, (count, total) in self._seconds.items():
                before_count, before_total = written_seconds.get(key, (0, 0.0))
                if count != before_count:
                    before = written_buckets.get(key) or [0] * len(self._buckets[key])
                    seconds[key] = (count - before_count, total - before_total)
                    buckets[key] = [n - b for n, b in zip(self._buckets[key], before, strict=True)]
            if not (checks or refusals or seconds):
                return None
            self._written = (dict(self._checks), dict(self._refusals), {k: tuple(v) for k, v in self._seconds.items()},
                             {k: list(v) for k, v in self._buckets.items()})
        return checks, refusals, seconds, buckets

    def _forked(self) -> None:
        """In a forked child: new locks (another thread may have held them at the fork), nothing to write of the
        parent's (its figures so far count as written: the parent writes them), its own flusher thread."""
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self.events._lock = threading.Lock()
        self.failures._lock = threading.Lock()
        self._written = self.figures()
        if self._prometheus and self._prometheus.multiprocess:
            self._due = time.monotonic() + FLUSH_SECONDS
            self._start_flusher()

    def figures(self) -> tuple:
        """``(checks, refusals, seconds, buckets)``: copies of the in-process figures, read at one moment."""
        with self._lock:
            return (dict(self._checks), dict(self._refusals), {k: tuple(v) for k, v in self._seconds.items()},
                    {k: list(v) for k, v in self._buckets.items()})

    def event(self, *, engine: str, check_point: str, hook: str, policy: str, family: Any, outcome: str,
              error: HandoffError, request_id: Any) -> bool:
        """The event of a refusal, rebuild, fallback or shipped grids (rate-limited); whether it was written.
        Never raises (a logging handler that does is reported once, see the module doc)."""
        try:
            return self._event(engine=engine, check_point=check_point, hook=hook, policy=policy, family=family,
                               outcome=outcome, error=error, request_id=request_id)
        except Exception as exc:
            self.failures.report("event", "an mm-handoff event was not written", exc)
            return False

    def _event(self, *, engine, check_point, hook, policy, family, outcome, error, request_id) -> bool:
        return self.events.emit({
            "event": "mm_handoff.check", "engine": engine, "check_point": check_point, "hook": hook,
            "policy": policy, "family": self.families.label(family), "outcome": outcome,
            "request_id": _request(request_id if request_id is not None else error.request_id),
            "error": error_label(error), "field": printed(error.field), "expected": _plain(error.expected),
            "actual": _plain(error.actual)})

    def snapshot(self) -> dict:
        """The figures so far, by the metrics' labels (see :func:`stats`)."""
        checks, refusals, seconds, _ = self.figures()
        return {
            "checks": [dict(zip(("engine", "family", "check_point", "outcome"), k, strict=True), count=n)
                       for k, n in sorted(checks.items())],
            "refusals": [dict(zip(("engine", "check_point", "error"), k, strict=True), count=n)
                         for k, n in sorted(refusals.items())],
            "hook_seconds": [dict(zip(("engine", "check_point"), k, strict=True), count=v[0], sum=v[1])
                             for k, v in sorted(seconds.items())],
            "prometheus": bool(self._prometheus),
        }

    def reset(self) -> None:
        """Forget the in-process figures and the events' buckets (for tests and benchmarks; Prometheus keeps its
        own figures: in multiprocess mode what was not written yet is written first)."""
        self.flush()
        with self._lock:
            self._written = ({}, {}, {}, {})
            self._checks.clear()
            self._refusals.clear()
            self._seconds.clear()
            self._buckets.clear()
        self.events.reset()


#: the observers of this process
SIGNALS = Signals()
#: the failures of observers other than a Signals' own (a check point's signals replaced by another object)
_OTHER_FAILURES = _Failures()


def observer_failed(exc: BaseException) -> None:
    """An observer raised out of a check point: reported (rate-limited), never raised."""
    _OTHER_FAILURES.report("observer", "a check point's observer failed", exc)


def stats() -> dict:
    """mm-handoff's figures in this process, by the labels of its metrics (docs/metrics.md), whether or not
    prometheus_client is installed: ``{"checks": [{engine, family, check_point, outcome, count}, ...],
    "refusals": [{engine, check_point, error, count}, ...], "hook_seconds": [{engine, check_point, count,
    sum}, ...], "prometheus": whether the Prometheus side is on}``. Imports no engine and no prometheus_client."""
    return SIGNALS.snapshot()
