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
