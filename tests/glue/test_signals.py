"""The check point's observers (mm_handoff.glue.signals): counters and host time by bounded labels, in process
and in the engine's Prometheus registry (multiprocess mode included), and one rate-limited event per refusal,
rebuild and fallback."""

import json
import logging
import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mm_handoff
from mm_handoff import errors as errors_module
from mm_handoff.errors import HandoffError, MropeLengthError, SkewError
from mm_handoff.glue import signals
from mm_handoff.glue.checkpoint import CheckPoint
from mm_handoff.glue.policy import Decision, Policy
from mm_handoff.glue.signals import CHECK_POINTS, ENGINES, ERROR_NAMES, OUTCOMES, EventLog, Signals

prometheus_client = pytest.importorskip("prometheus_client")

BUILTIN_FAMILIES = {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "cosmos3", "cosmos3_edge"}


class _Adapter:
    def __init__(self, family):
        self.family = family


class _LocalError(SkewError):
    """A subclass of a known error defined outside mm_handoff.errors: counted as "other"."""


def _visit(point, *, request_id, family, error=None, remedy=None, own=False, engine_raises=None):
    """One hooked call: the engine's call, then a check that fails with ``error`` (or passes)."""
    with point.visit(request_id) as visit:
        visit.uses(_Adapter(family))
        if engine_raises is not None:
            visit.call(_raiser(engine_raises))
        visit.call(lambda: None)
        if error is not None:
            visit.decide(error, remedy=remedy, own=own)
        return "answered"


def _raiser(exc):
    def engine():
        raise exc

    return engine


def _run(point, **kwargs):
    try:
        return _visit(point, **kwargs)
    except Exception as exc:  # a refusal, or the engine's own exception
        return exc


ERRORS = st.sampled_from([None, HandoffError, MropeLengthError, SkewError, _LocalError, errors_module.AdapterError,
                          errors_module.TokenMismatchError])


def _error(cls, actual):
    if cls is None:
        return None
    if cls is errors_module.TokenMismatchError:
        return cls("ids", 1, actual, index=3)
    return cls(f"field {actual!r}", "expected", actual)


# ------------------------------------------------------------------------------------ bounded labels
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ENGINES), st.sampled_from(CHECK_POINTS), st.sampled_from(list(Policy)),
       st.one_of(st.text(max_size=30), st.integers(), st.none()), st.one_of(st.text(max_size=20),
       st.sampled_from(sorted(BUILTIN_FAMILIES)), st.none(), st.integers()), ERRORS,
       st.one_of(st.text(max_size=50), st.integers()), st.sampled_from([None, Decision.REBUILD, Decision.SHIP_GRIDS]),
       st.booleans(), st.booleans())
def test_no_label_takes_unbounded_values(engine, name, policy, request_id, family, error_cls, actual, remedy, own,
                                         engine_fails):
    """Many varied requests, errors, families and request ids: every label value stays in its closed set, in
    process and in the Prometheus registry (never a request id, a field or a value)."""
    point = CheckPoint(engine, name, policy, "Thing.run")
    _run(point, request_id=request_id, family=family, error=_error(error_cls, actual), remedy=remedy, own=own,
         engine_raises=RuntimeError("engine") if engine_fails and error_cls is None else None)
    figures = mm_handoff.stats()
    families = BUILTIN_FAMILIES | {"other"}
    for row in figures["checks"]:
        assert row["engine"] in ENGINES and row["check_point"] in CHECK_POINTS and row["outcome"] in OUTCOMES
        assert row["family"] in families
    for row in figures["refusals"]:
        assert row["engine"] in ENGINES and row["check_point"] in CHECK_POINTS and row["error"] in ERROR_NAMES
    allowed = {"engine": set(ENGINES), "check_point": set(CHECK_POINTS), "outcome": set(OUTCOMES),
               "family": families, "error": set(ERROR_NAMES)}
    for metric in prometheus_client.REGISTRY.collect():
        if metric.name.startswith("mm_handoff_"):
            for sample in metric.samples:
                for label, value in sample.labels.items():
                    if label != "le":
                        assert value in allowed[label], (metric.name, label, value)


def test_each_outcome_is_counted_once_where_it_was_decided(fresh_signals):
    point = CheckPoint("vllm", "admission", Policy.FALLBACK, "P.apply")
    _visit(point, request_id="a", family="qwen3_vl")
    _visit(point, request_id="b", family="qwen3_vl", error=MropeLengthError("m", 1, 2))
    rebuild = CheckPoint("trtllm", "prefill", Policy.REBUILD, "P.prefill")
    _visit(rebuild, request_id="c", family="qwen3_5", error=SkewError("f", 1, 2), remedy=Decision.REBUILD)
    encoder = CheckPoint("trtllm", "encoder", Policy.REBUILD, "E.generate_async")
    _visit(encoder, request_id="d", family="cosmos3", error=HandoffError("f", 1, 2), remedy=Decision.SHIP_GRIDS)
    refusing = CheckPoint("sglang", "admission", Policy.FALLBACK, "P.get")
    assert isinstance(_run(refusing, request_id="e", family="x", error=_LocalError("f", 1, 2), own=True), _LocalError)
    assert isinstance(_run(refusing, request_id="f", family="qwen3_vl", engine_raises=KeyError("engine's")), KeyError)
    counts = {(r["engine"], r["family"], r["check_point"], r["outcome"]): r["count"]
              for r in mm_handoff.stats()["checks"]}
    assert counts == {("vllm", "qwen3_vl", "admission", "accepted"): 1,
                      ("vllm", "qwen3_vl", "admission", "fallback"): 1,
                      ("trtllm", "qwen3_5", "prefill", "rebuilt"): 1,
                      ("trtllm", "cosmos3", "encoder", "shipped_grids"): 1,
                      ("sglang", "other", "admission", "refused"): 1}
    assert [(r["engine"], r["check_point"], r["error"], r["count"]) for r in mm_handoff.stats()["refusals"]] == [
        ("sglang", "admission", "other", 1)]
    seconds = {(r["engine"], r["check_point"]): r["count"] for r in mm_handoff.stats()["hook_seconds"]}
    assert seconds[("sglang", "admission")] == 2  # the engine's own failure is timed, not counted as an outcome


def test_a_refusal_that_escapes_after_a_decision_is_a_refusal(fresh_signals):
    """rebuild decided, then the rebuild itself fails: the outcome is the refusal, named by the last error."""
    point = CheckPoint("trtllm", "prefill", Policy.REBUILD, "P.prefill")
    with pytest.raises(MropeLengthError):
        with point.visit("r") as visit:
            assert visit.decide(SkewError("f", 1, 2), remedy=Decision.REBUILD) is Decision.REBUILD
            raise MropeLengthError("m", 1, 2)
    [row] = mm_handoff.stats()["checks"]
    assert row["outcome"] == "refused"
    assert mm_handoff.stats()["refusals"][0]["error"] == "MropeLengthError"


def test_hook_time_leaves_the_engines_time_out(fresh_signals):
    point = CheckPoint("trtllm", "admission", Policy.RAISE, "B._preprocess")
    with point.visit() as visit:
        visit.call(time.sleep, 0.05)
    [row] = mm_handoff.stats()["hook_seconds"]
    assert row["count"] == 1 and 0 <= row["sum"] < 0.04


def test_check_points_and_engines_are_closed_sets():
    with pytest.raises(HandoffError) as info:
        CheckPoint("trtllm", "somewhere", Policy.RAISE)
    assert info.value.field == "CheckPoint.name" and info.value.actual == "somewhere"
    with pytest.raises(HandoffError):
        CheckPoint("tgi", "admission", Policy.RAISE)


# ------------------------------------------------------------------------------------ the setting
@pytest.mark.parametrize("value, wanted", [(None, True), ("", True), ("1", True), ("on", True), ("0", False),
                                           ("off", False), (" OFF ", False)])
def test_metrics_setting(value, wanted):
    environ = {} if value is None else {"MM_HANDOFF_METRICS": value}
    assert Signals().configure(environ) is wanted


@pytest.mark.parametrize("value", ["maybe", "2", "enabled", "of"])
def test_a_bad_metrics_setting_is_a_typed_error(value):
    with pytest.raises(HandoffError) as info:
        Signals().configure({"MM_HANDOFF_METRICS": value})
    assert info.value.field == "MM_HANDOFF_METRICS" and info.value.actual == value


def test_metrics_on_without_prometheus_client_fails_closed(monkeypatch):
    monkeypatch.setattr(signals, "prometheus_importable", lambda: False)
    with pytest.raises(HandoffError) as info:
        Signals().configure({"MM_HANDOFF_METRICS": "1"})
    assert info.value.field == "MM_HANDOFF_METRICS"
    assert Signals().configure({}) is False  # unset: the figures stay in process


def test_install_refuses_a_bad_metrics_setting(monkeypatch):
    from mm_handoff.vllm import install, is_installed

    monkeypatch.setenv("MM_HANDOFF_METRICS", "yes please")
    with pytest.raises(HandoffError) as info:
        install()
    assert info.value.field == "MM_HANDOFF_METRICS" and not is_installed()


def test_prometheus_off_keeps_the_figures_in_process():
    own = Signals()
    own.configure({"MM_HANDOFF_METRICS": "0"})
    point = CheckPoint("vllm", "admission", Policy.RAISE, "P.apply", signals=own)
    _visit(point, request_id="a", family="qwen3_vl")
    assert own.snapshot()["prometheus"] is False and own.snapshot()["checks"][0]["count"] == 1


# ------------------------------------------------------------------------------------ lazy import
_LAZY = """
import sys, types
import mm_handoff
from mm_handoff.glue.instrumentor import Instrumentor
from mm_handoff.glue.checkpoint import CheckPoint
from mm_handoff.glue.hooks import Hook
from mm_handoff.glue.policy import Policy

engine = types.ModuleType("toy_engine"); engine.__version__ = "1.0"
class Thing:
    def run(self):
        return "own"
engine.Thing = Thing
sys.modules["toy_engine"] = engine

def wrapper(wrapped, instance, args, kwargs, *, point):
    with point.visit() as visit:
        return visit.call(wrapped, *args, **kwargs)

class Toy(Instrumentor):
    engine = "toy_engine"
    label = "vllm"
    def instrumentation_dependencies(self):
        return ("toy_engine >= 1",)
    def _instrument(self, policy):
        self.apply([(Hook("toy_engine", "Thing", "run", wrapper, "admission"), Thing, "run")], policy)
        return True

import logging
Toy(logging.getLogger("toy")).install()
before = "prometheus_client" in sys.modules
Thing().run()
print(before, "prometheus_client" in sys.modules, mm_handoff.stats()["prometheus"])
"""


def test_prometheus_client_is_imported_at_the_first_outcome_not_at_install():
    env = {k: v for k, v in os.environ.items() if k != "MM_HANDOFF_METRICS"}
    out = subprocess.run([sys.executable, "-c", _LAZY], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["False", "True", "True"]


# ------------------------------------------------------------------------------------ multiprocess
_CHILD = """
import sys
from mm_handoff.errors import MropeLengthError
from mm_handoff.glue.checkpoint import CheckPoint
from mm_handoff.glue.policy import Policy

point = CheckPoint("sglang", "admission", Policy.RAISE, "P.get")
for i in range(int(sys.argv[1])):
    try:
        with point.visit(f"r{i}") as visit:
            if i % 2:
                raise MropeLengthError("m", 1, 2)
    except MropeLengthError:
        pass
"""


def test_multiprocess_mode_sums_every_process(tmp_path):
    """Each process writes its figures to PROMETHEUS_MULTIPROC_DIR (as SGLang's --enable-metrics and
    trtllm-serve's /prometheus/metrics read them): a MultiProcessCollector registry sums them."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    env.pop("MM_HANDOFF_METRICS", None)
    for n in (4, 6):
        subprocess.run([sys.executable, "-c", _CHILD, str(n)], check=True, env=env, capture_output=True)
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    labels = {"engine": "sglang", "family": "other", "check_point": "admission"}
    assert registry.get_sample_value("mm_handoff_checks_total", {**labels, "outcome": "accepted"}) == 5
    assert registry.get_sample_value("mm_handoff_checks_total", {**labels, "outcome": "refused"}) == 5
    assert registry.get_sample_value("mm_handoff_refusals_total", {"engine": "sglang", "check_point": "admission",
                                                                   "error": "MropeLengthError"}) == 5
    assert registry.get_sample_value("mm_handoff_hook_seconds_count", {"engine": "sglang",
                                                                       "check_point": "admission"}) == 10


# ------------------------------------------------------------------------------------ events
class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _event(error="MropeLengthError", check_point="admission"):
    return {"engine": "vllm", "check_point": check_point, "error": error, "outcome": "refused", "request_id": "r"}


def test_events_are_rate_limited_per_check_point_and_error_and_say_what_they_suppressed(caplog):
    clock = _Clock()
    events = EventLog(clock=clock, burst=3, rate=0.5, logger=logging.getLogger("mm_handoff.test_events"))
    with caplog.at_level(logging.INFO, logger="mm_handoff.test_events"):
        written = [events.emit(_event()) for _ in range(10)]
        assert written == [True] * 3 + [False] * 7
        assert events.emit(_event(error="SkewError"))  # another key has its own bucket
        assert events.emit(_event(check_point="prefill"))
        clock.now += 1.0  # half a token
        assert not events.emit(_event())
        clock.now += 1.0  # one token
        assert events.emit(_event())
        assert not events.emit(_event())
        clock.now += 1000.0  # refilled, up to the burst only
        assert [events.emit(_event()) for _ in range(4)] == [True, True, True, False]
    said = [r.mm_handoff_event for r in caplog.records]
    assert len(said) == 3 + 2 + 1 + 3
    assert said[5]["suppressed"] == 8 and said[6]["suppressed"] == 1
    assert "suppressed" not in said[7] and "suppressed" not in said[0]


def test_one_event_per_refusal_with_bounded_values(caplog, fresh_signals):
    point = CheckPoint("trtllm", "admission", Policy.RAISE, "BaseLLM._preprocess")
    huge = list(range(100_000))
    with caplog.at_level(logging.WARNING, logger="mm_handoff"), pytest.raises(MropeLengthError):
        with point.visit("x" * 5000) as visit:
            visit.uses(_Adapter("qwen3_vl"))
            visit.decide(MropeLengthError("mrope_position_ids.shape[-1]", "prompt length 10", huge))
    [record] = [r for r in caplog.records if hasattr(r, "mm_handoff_event")]
    message = record.getMessage()
    assert message.startswith("mm-handoff event ") and len(message) < 2000
    event = json.loads(message[len("mm-handoff event "):])
    assert event == record.mm_handoff_event
    assert {k: event[k] for k in ("engine", "check_point", "family", "outcome", "error", "field", "expected",
                                  "policy", "hook")} == {
        "engine": "trtllm", "check_point": "admission", "family": "qwen3_vl", "outcome": "refused",
        "error": "MropeLengthError", "field": "mrope_position_ids.shape[-1]", "expected": "prompt length 10",
        "policy": "raise", "hook": "BaseLLM._preprocess"}
    assert len(event["actual"]) <= 400 and len(event["request_id"]) <= 400


def test_accepted_requests_write_no_event(caplog, fresh_signals):
    with caplog.at_level(logging.DEBUG, logger="mm_handoff"):
        _visit(CheckPoint("vllm", "admission", Policy.RAISE, "P.apply"), request_id="a", family="qwen3_vl")
    assert not [r for r in caplog.records if hasattr(r, "mm_handoff_event")]


# ------------------------------------------------------------------------------------ multiprocess: batched writes
#: a process that records ``n`` hooked calls at sglang's admission (every other one refused), then, by ``how``:
#: ``flush``: flushes, says "ready" and waits for its stdin to close; ``idle``: says "ready" and waits (the
#: flusher thread must write them); ``exit``: exits (the exit hook must write them)
_RECORDER = """
import sys
from mm_handoff.errors import MropeLengthError
from mm_handoff.glue.checkpoint import CheckPoint
from mm_handoff.glue.policy import Policy
from mm_handoff.glue.signals import SIGNALS

n, how = int(sys.argv[1]), sys.argv[2]
point = CheckPoint("sglang", "admission", Policy.RAISE, "P.get")
for i in range(n):
    try:
        with point.visit(f"r{i}") as visit:
            if i % 2:
                raise MropeLengthError("m", 1, 2)
    except MropeLengthError:
        pass
if how == "flush":
    SIGNALS.flush()
if how != "exit":
    print("ready", flush=True)
    sys.stdin.read()
"""


def _multiprocess_env(path, **extra):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(path), **extra}
    env.pop("MM_HANDOFF_METRICS", None)
    return env


def _recorder(path, n, how):
    child = subprocess.Popen([sys.executable, "-c", _RECORDER, str(n), how], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=_multiprocess_env(path))
    if how != "exit":
        assert child.stdout.readline().strip() == "ready"
    return child


def _release(child):
    child.communicate("", timeout=30)
    assert child.returncode == 0


def _read(path):
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(path))
    labels = {"engine": "sglang", "check_point": "admission"}
    get = registry.get_sample_value
    return (get("mm_handoff_checks_total", {**labels, "family": "other", "outcome": "accepted"}),
            get("mm_handoff_checks_total", {**labels, "family": "other", "outcome": "refused"}),
            get("mm_handoff_refusals_total", {**labels, "error": "MropeLengthError"}),
            get("mm_handoff_hook_seconds_count", labels))


def test_multiprocess_flush_writes_every_processs_figures_before_it_exits(tmp_path):
    """Two live processes record and flush: the parent's MultiProcessCollector sums both, neither has exited."""
    children = [_recorder(tmp_path, n, "flush") for n in (4, 6)]
    try:
        assert _read(tmp_path) == (5, 5, 5, 10)
    finally:
        for child in children:
            _release(child)


def test_multiprocess_flusher_writes_an_idle_processs_figures(tmp_path):
    """A process that records and then goes idle (no flush call, no exit): its figures reach the files within
    FLUSH_SECONDS and a little."""
    child = _recorder(tmp_path, 6, "idle")
    try:
        start = time.monotonic()
        while time.monotonic() - start < 10 and not any(name.endswith(".db") for name in os.listdir(tmp_path)):
            time.sleep(0.02)
        while time.monotonic() - start < 10 and _read(tmp_path)[3] != 6:
            time.sleep(0.02)
        lag = time.monotonic() - start
        assert _read(tmp_path) == (3, 3, 3, 6)
        assert lag < signals.FLUSH_SECONDS + 1.5, lag
    finally:
        _release(child)


def test_multiprocess_figures_are_written_at_exit(tmp_path):
    for n in (3, 5):
        _release(_recorder(tmp_path, n, "exit"))
    assert _read(tmp_path) == (5, 3, 3, 8)


_FORKS = """
import os, sys
from mm_handoff.glue.checkpoint import CheckPoint
from mm_handoff.glue.policy import Policy
from mm_handoff.glue.signals import SIGNALS

point = CheckPoint("sglang", "admission", Policy.RAISE, "P.get")
def visits(n):
    for _ in range(n):
        with point.visit():
            pass
visits(2)  # not flushed yet: the parent's to write, never the child's
pid = os.fork()
if pid == 0:
    visits(1)
    SIGNALS.flush()
    os._exit(0)
os.waitpid(pid, 0)
SIGNALS.flush()
"""


def test_a_forked_child_writes_only_its_own_figures(tmp_path):
    subprocess.run([sys.executable, "-c", _FORKS], check=True, env=_multiprocess_env(tmp_path), timeout=60)
    assert _read(tmp_path)[0] == 3 and _read(tmp_path)[3] == 3


#: one process observes ``SECONDS`` through prometheus_client's own Histogram, another records them through
#: mm-handoff's batched writes: a MultiProcessCollector reads the same histogram from both
_OBSERVED = """
import sys
how, seconds = sys.argv[1], [float(s) for s in sys.argv[2].split(",")]
if how == "prometheus_client":
    from prometheus_client import Histogram
    from mm_handoff.glue.signals import HOOK_SECONDS, HOOK_SECONDS_BUCKETS, _DOCS
    metric = Histogram(HOOK_SECONDS, _DOCS[HOOK_SECONDS], ("engine", "check_point"), buckets=HOOK_SECONDS_BUCKETS)
    for s in seconds:
        metric.labels("trtllm", "slice").observe(s)
else:
    from mm_handoff.glue.signals import SIGNALS
    for s in seconds:
        SIGNALS.record("trtllm", "slice", None, None, s)
    SIGNALS.flush()
"""
SECONDS = (0.0, 1e-06, 1.5e-06, 1e-05, 3e-05, 3e-05, 0.004, 0.1, 0.5, 2.0, 7e-07)


def test_batched_histogram_reads_as_prometheus_clients_own(tmp_path):
    samples = {}
    for how in ("prometheus_client", "mm_handoff"):
        path = tmp_path / how
        path.mkdir()
        subprocess.run([sys.executable, "-c", _OBSERVED, how, ",".join(map(repr, SECONDS))], check=True,
                       env=_multiprocess_env(path), timeout=60)
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(path))
        samples[how] = sorted((s.name, tuple(sorted(s.labels.items())), s.value) for metric in registry.collect()
                              if metric.name == "mm_handoff_hook_seconds" for s in metric.samples)
    assert samples["mm_handoff"] == samples["prometheus_client"]
    assert {name for name, _, _ in samples["mm_handoff"]} == {"mm_handoff_hook_seconds_bucket",
                                                              "mm_handoff_hook_seconds_sum",
                                                              "mm_handoff_hook_seconds_count"}


# ------------------------------------------------------------------------------------ observers never fail a request
class _Raising(logging.Handler):
    def emit(self, record):
        raise RuntimeError("a handler that raises")


def test_a_logging_handler_that_raises_fails_no_request(fresh_signals):
    """An event's handler raises: an accepted (rebuilt) request is still answered, a refusal is still its typed
    error, and the figures go on."""
    logger = logging.getLogger("mm_handoff")
    handler = _Raising(level=logging.DEBUG)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        rebuild = CheckPoint("trtllm", "prefill", Policy.REBUILD, "P.prefill")
        assert _visit(rebuild, request_id="a", family="qwen3_vl", error=SkewError("f", 1, 2),
                      remedy=Decision.REBUILD) == "answered"
        refusing = CheckPoint("vllm", "admission", Policy.RAISE, "P.apply")
        for request_id in ("b", "c"):
            refused = _run(refusing, request_id=request_id, family="qwen3_vl", error=MropeLengthError("m", 1, 2))
            assert type(refused) is MropeLengthError
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    outcomes = {(r["check_point"], r["outcome"]): r["count"] for r in mm_handoff.stats()["checks"]}
    assert outcomes == {("prefill", "rebuilt"): 1, ("admission", "refused"): 2}


#: records through a Prometheus side that fails: ``missing`` (PROMETHEUS_MULTIPROC_DIR names no directory) or
#: ``full`` (every write to the files fails with ENOSPC after the first flush); prints what the requests got
_BROKEN = """
import errno, json, logging, sys
from mm_handoff.errors import MropeLengthError
from mm_handoff.glue.checkpoint import CheckPoint
from mm_handoff.glue.policy import Policy
from mm_handoff.glue.signals import SIGNALS
import mm_handoff

errors = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.ERROR:
            errors.append(record.getMessage())
logging.getLogger("mm_handoff").addHandler(Keep())

point = CheckPoint("sglang", "admission", Policy.RAISE, "P.get")
def visit(i):
    try:
        with point.visit(f"r{i}") as v:
            if i % 2:
                raise MropeLengthError("m", 1, 2)
        return "answered"
    except Exception as exc:
        return type(exc).__name__

got = [visit(0)]
if sys.argv[1] == "full":
    SIGNALS.flush()
    from prometheus_client import mmap_dict
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    mmap_dict.MmapedDict.write_value = full
got += [visit(i) for i in range(1, 6)]
try:
    SIGNALS.flush()
    flushed = "ok"
except Exception as exc:
    flushed = type(exc).__name__
got += [visit(i) for i in range(6, 10)]
SIGNALS.flush()
stats = mm_handoff.stats()
print(json.dumps({"got": got, "flush": flushed, "prometheus": stats["prometheus"],
                  "checks": sum(r["count"] for r in stats["checks"]), "errors": len(errors)}))
"""


@pytest.mark.parametrize("how", ["missing", "full"])
def test_a_failing_prometheus_side_fails_no_request(tmp_path, how):
    """The files cannot be written (a bad PROMETHEUS_MULTIPROC_DIR, a full disk): every request gets what it got
    without metrics, the Prometheus side switches off, logged once, and the figures go on in process."""
    path = tmp_path / "missing" if how == "missing" else tmp_path
    out = subprocess.run([sys.executable, "-c", _BROKEN, how], capture_output=True, text=True, timeout=60,
                         env=_multiprocess_env(path))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["got"] == ["answered", "MropeLengthError"] * 5
    assert report["flush"] == "ok" and report["prometheus"] is False and report["checks"] == 10
    assert report["errors"] == 1, out.stderr
