"""What both engine glues share: the policy's decisions, the adapter cache, the instrumentor lifecycle,
and the vLLM wrapper applying the policy (without vLLM: a processor shaped like vLLM's)."""

import logging
import sys
import threading
import types

import pytest
from vllm_fakes import Inputs, Processor

from mm_handoff import get_adapter
from mm_handoff.errors import EngineNotSupportedError, HandoffError, TokenMismatchError
from mm_handoff.glue.engine_adapters import EngineAdapters
from mm_handoff.glue.hooks import Hook
from mm_handoff.glue.instrumentor import Instrumentor, supports
from mm_handoff.glue.policy import Decision, Policy, decide

LOG = logging.getLogger("mm_handoff.test")


# ------------------------------------------------------------------------------------ decisions
@pytest.mark.parametrize("policy, remedy, decision", [
    (Policy.FALLBACK, None, Decision.PASS_THROUGH),
    (Policy.FALLBACK, Decision.REBUILD, Decision.PASS_THROUGH),
    (Policy.FALLBACK, Decision.SHIP_GRIDS, Decision.SHIP_GRIDS),
    (Policy.REBUILD, Decision.REBUILD, Decision.REBUILD),
    (Policy.REBUILD, Decision.SHIP_GRIDS, Decision.SHIP_GRIDS),
])
def test_decide_returns_the_decision_the_check_point_acts_on(policy, remedy, decision, caplog):
    with caplog.at_level(logging.DEBUG, logger="mm_handoff"):
        assert decide(policy, HandoffError("f", 1, 2), remedy=remedy) is decision
    assert not caplog.records  # the check point writes the one event, decide() nothing


@pytest.mark.parametrize("policy, remedy", [(Policy.RAISE, None), (Policy.RAISE, Decision.REBUILD),
                                            (Policy.RAISE, Decision.SHIP_GRIDS), (Policy.REBUILD, None)])
def test_decide_raises_the_typed_error_where_nothing_else_is_possible(policy, remedy):
    error = HandoffError("f", 1, 2)
    with pytest.raises(HandoffError) as info:
        decide(policy, error, remedy=remedy)
    assert info.value is error


# --------------------------------------------------------------------------------- adapter cache
class _Owner:
    pass


def test_one_adapter_per_engine_object_and_key_across_threads():
    cache, owner, built = EngineAdapters(), _Owner(), []
    barrier = threading.Barrier(8)

    def build():
        built.append(object())
        return built[-1]

    def worker(out):
        barrier.wait()
        out.append(cache.get(owner, "k", build))

    outs: list = []
    threads = [threading.Thread(target=worker, args=(outs,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(a) for a in outs}) == 1 and outs[0] is built[0]
    assert cache.get(owner, "other", object) is not outs[0]
    assert cache.get(_Owner(), "k", object) is not outs[0]


def test_an_owner_that_cannot_be_weakly_referenced_is_built_each_time():
    cache = EngineAdapters()
    assert cache.get(3, "k", object) is not cache.get(3, "k", object)


# ------------------------------------------------------------------------------- the lifecycle
class _Toy(Instrumentor):
    engine = "mm_handoff_toy_engine"

    def instrumentation_dependencies(self):
        return ("mm_handoff_toy_engine >= 1.0, < 2",)

    label = "vllm"

    def _instrument(self, policy):
        self.apply([(_TOY_ROW, sys.modules[self.engine].Thing, "run")], policy)
        return True


def _toy_wrapper(wrapped, instance, args, kwargs, *, point):
    return (point.policy.value, point.engine, point.name, wrapped(*args, **kwargs))


_TOY_ROW = Hook("mm_handoff_toy_engine", "Thing", "run", _toy_wrapper, "admission")


@pytest.fixture
def toy(monkeypatch):
    module = types.ModuleType("mm_handoff_toy_engine")
    module.__version__ = "1.2"

    class Thing:
        def run(self):
            return "own"

    module.Thing = Thing
    monkeypatch.setitem(sys.modules, module.__name__, module)
    glue = _Toy(LOG)
    yield glue, module
    glue.uninstall()


def test_install_binds_the_policy_and_uninstall_restores(toy):
    glue, module = toy
    original = vars(module.Thing)["run"]
    report = glue.install(policy="fallback")
    assert report["installed"] and report["policy"] == "fallback" and report["mm_handoff_toy_engine"] == "1.2"
    assert module.Thing().run() == ("fallback", "vllm", "admission", "own")
    assert glue.install(policy="raise")["policy"] == "fallback"  # idempotent: nothing changed
    assert glue.get_original((module.Thing, "run")) is original
    assert not glue.uninstall()["installed"]
    assert vars(module.Thing)["run"] is original and module.Thing().run() == "own"
    assert not glue.uninstall()["installed"]  # harmless twice


def test_the_version_gate_refuses_before_touching_anything(toy):
    glue, module = toy
    module.__version__ = "2.0"
    with pytest.raises(EngineNotSupportedError) as info:
        glue.install()
    assert info.value.field == "mm_handoff_toy_engine version"
    assert "run" in vars(module.Thing) and module.Thing().run() == "own" and not glue.is_installed()


def test_a_missing_engine_is_refused(toy, monkeypatch):
    glue, module = toy
    monkeypatch.setitem(sys.modules, module.__name__, None)
    with pytest.raises(EngineNotSupportedError):
        glue.install()


def test_supports_reads_pep440_ranges():
    assert supports("0.32.0", ("vllm >= 0.32, < 0.33",)) and not supports("0.33.0", ("vllm >= 0.32, < 0.33",))
    assert supports("1.3.0rc25", ("tensorrt_llm >= 1.3.0rc25, < 1.5",)) and not supports(None, ("x >= 1",))


# --------------------------------------------------------------------- vLLM's wrapper and the policy


def _expanded_twice():
    """vLLM's answer to a prompt that was already expanded: a second pad in the raw prompt."""
    spec = get_adapter("qwen3_vl").spec
    raw = [1, spec.vision_start, spec.video_pad, spec.video_pad, spec.vision_end, 2]
    return Inputs(raw, {}), {"mm_placeholders": {"video": [object()]}, "prompt_token_ids": raw}


@pytest.mark.parametrize("policy", ["raise", "rebuild"])
def test_vllm_check_rejects_under_raise_and_rebuild(policy):
    from mm_handoff.vllm._hooks import HOOKS, apply_wrapper

    inputs, result = _expanded_twice()
    with pytest.raises(TokenMismatchError) as info:
        apply_wrapper(lambda *a, **k: result, Processor(), (inputs,), {}, point=HOOKS[0].point("vllm", Policy(policy)))
    assert info.value.field == "prompt_token_ids before vLLM's expansion" and info.value.index == 3


def test_vllm_check_passes_vllms_result_through_under_fallback(caplog):
    from mm_handoff.vllm._hooks import HOOKS, apply_wrapper

    inputs, result = _expanded_twice()
    with caplog.at_level(logging.WARNING, logger="mm_handoff"):
        assert apply_wrapper(lambda *a, **k: result, Processor(), (inputs,), {},
                             point=HOOKS[0].point("vllm", Policy.FALLBACK)) is result
    [event] = [r.mm_handoff_event for r in caplog.records if hasattr(r, "mm_handoff_event")]
    assert event["policy"] == "fallback" and event["outcome"] == "fallback" and event["engine"] == "vllm"
    assert event["check_point"] == "admission" and event["error"] == "TokenMismatchError"
