"""Conformance suite: mm-handoff's TensorRT-LLM glue against TensorRT-LLM's own Python files.

Runs only with ``MM_HANDOFF_TRTLLM_SRC`` set (``make conformance``); without it the real test modules are
not even collected (nothing heavy is imported) and ``test_requires_source.py`` reports one skip saying how
to run the suite. The shim (``trtllm_shim.py``) is activated once per session.
"""

import json
import os
from pathlib import Path

import pytest

SOURCE = os.environ.get("MM_HANDOFF_TRTLLM_SRC")
HERE = Path(__file__).parent
#: where each test's outcome (passed / failed / harness-gap / not-applicable) is written, one JSON line
#: per test, for the matrix runner (``matrix.py``)
REPORT = os.environ.get("MM_HANDOFF_CONFORMANCE_REPORT")

if not SOURCE:
    collect_ignore = [p.name for p in HERE.glob("test_*.py") if p.name != "test_requires_source.py"]
elif ":" in SOURCE:
    raise pytest.UsageError("MM_HANDOFF_TRTLLM_SRC names several trees: run them through "
                            "`make conformance` (tests/upstream/matrix.py), one pytest run per tree")


def _discovered_families():
    from upstream.families import qwen_layout_families

    return qwen_layout_families(SOURCE)


def pytest_generate_tests(metafunc):
    """``family``: every Qwen3-VL-layout family the tree registers (read from its model files)."""
    if "family" in metafunc.fixturenames and SOURCE:
        found = _discovered_families()
        metafunc.parametrize("family", sorted(found) or ["<none registered>"])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failure caused by upstream reading something the harness lacks is reported as a harness gap."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        from upstream.harness import harness_gap_in

        gap = harness_gap_in(call.excinfo.value)
        if gap is not None:
            report.user_properties.append(("kind", "harness-gap"))
            report.longrepr = f"HARNESS GAP (not a glue failure): {gap}\n\n{report.longrepr}"
    if REPORT and (report.when == "call" or (report.when == "setup" and not report.passed)):
        kind = dict(report.user_properties).get("kind")
        if report.passed:
            kind = "passed"
        elif report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            kind = "n/a" if "not applicable" in reason else "skipped"
        elif kind is None:
            kind = "failed"
        message = "" if report.passed else str(report.longrepr).splitlines()[-1][:300] if report.longrepr else ""
        with open(REPORT, "a") as fh:
            fh.write(json.dumps({"test": item.nodeid.split("::", 1)[-1], "file": item.nodeid.split("::")[0],
                                 "kind": kind, "message": message}) + "\n")


@pytest.fixture(scope="session")
def tree():
    """The activated upstream tree (see trtllm_shim.UpstreamTree)."""
    from upstream.trtllm_shim import UpstreamTree

    root = Path(SOURCE)
    if not (root / "tensorrt_llm").is_dir():
        pytest.fail(f"MM_HANDOFF_TRTLLM_SRC={SOURCE} holds no tensorrt_llm/ directory")
    active = UpstreamTree(root).activate()
    _ACTIVE.append(active)
    yield active
    active.deactivate()


_ACTIVE = []


def pytest_terminal_summary(terminalreporter):
    """Per module: upstream code or stub, and the gaps filled (what the run actually exercised)."""
    for active in _ACTIVE:
        terminalreporter.write_sep("-", "TensorRT-LLM modules: upstream code vs stub")
        terminalreporter.write_line(active.summary())


@pytest.fixture(scope="session")
def upstream(tree):
    """The upstream modules the suite exercises, imported once through the shim."""
    import importlib
    from types import SimpleNamespace

    names = {
        "qwen3vl": "tensorrt_llm._torch.models.modeling_qwen3vl",
        "registry": "tensorrt_llm.inputs.registry",
        "multimodal": "tensorrt_llm.inputs.multimodal",
        "llm": "tensorrt_llm.llmapi.llm",
        "mm_encoder": "tensorrt_llm.llmapi.mm_encoder",
        "shared_tensor": "tensorrt_llm._torch.shared_tensor",
        "disagg": "tensorrt_llm.disaggregated_params",
    }
    loaded = {k: importlib.import_module(v) for k, v in names.items()}
    # every model file that registers a Qwen3-VL-layout family (the families' registrations run on import)
    for registration in _discovered_families().values():
        importlib.import_module(registration.module)
    return SimpleNamespace(tree=tree, families=_discovered_families(), **loaded)


@pytest.fixture
def glue(upstream):
    """mm_handoff.trtllm, uninstalled before and after the test."""
    import mm_handoff.trtllm as glue

    glue.uninstall()
    yield glue
    glue.uninstall()


@pytest.fixture(scope="session")
def models(upstream, tmp_path_factory):
    """``models(family)``: (the processor class registered for the family's model class, built through its
    own __init__ with the real HF processor; the tiny config; the checkpoint dir), built once per family."""
    import importlib
    from types import SimpleNamespace

    from transformers import AutoTokenizer
    from upstream import flows

    built = {}

    from upstream.families import registered_family

    def build(family="qwen3_vl"):
        if family not in built:
            registration = upstream.families.get(family)
            if registration is None:
                raise AssertionError(f"family {family!r}: no Qwen3-VL-layout registration in this tree "
                                     f"(registered: {sorted(upstream.families)})")
            upstream.tree.require(registration.module)
            _, processor_cls = registered_family(upstream.registry, registration)
            path, config = flows.hf_model_dir(tmp_path_factory.mktemp(f"tiny-{family}"), family,
                                              registration.architecture)
            processor = processor_cls(str(path), config, AutoTokenizer.from_pretrained(str(path)),
                                      trust_remote_code=False)
            built[family] = SimpleNamespace(processor=processor, config=config, path=path, family=family,
                                            registration=registration)
        return built[family]

    return build


@pytest.fixture(scope="session")
def model(models):
    """The qwen3_vl entry of :func:`models`."""
    return models("qwen3_vl")
