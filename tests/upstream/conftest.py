"""Conformance suite: mm-handoff's TensorRT-LLM glue against TensorRT-LLM's own Python files.

Runs only with ``MM_HANDOFF_TRTLLM_SRC`` set (``make conformance``); without it the real test modules are
not even collected (nothing heavy is imported) and ``test_requires_source.py`` reports one skip saying how
to run the suite. The shim (``trtllm_shim.py``) is activated once per session.
"""

import os
from pathlib import Path

import pytest

SOURCE = os.environ.get("MM_HANDOFF_TRTLLM_SRC")
HERE = Path(__file__).parent

if not SOURCE:
    collect_ignore = [p.name for p in HERE.glob("test_*.py") if p.name != "test_requires_source.py"]


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
        "qwen3vl_moe": "tensorrt_llm._torch.models.modeling_qwen3vl_moe",
    }
    return SimpleNamespace(tree=tree, **{k: importlib.import_module(v) for k, v in names.items()})


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

    def build(family="qwen3_vl"):
        if family not in built:
            module, model_cls, _ = flows.FAMILIES[family]
            upstream.tree.require(module)
            table = upstream.registry.INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type
            processor_cls = table[getattr(importlib.import_module(module), model_cls)]
            path, config = flows.hf_model_dir(tmp_path_factory.mktemp(f"tiny-{family}"), family)
            processor = processor_cls(str(path), config, AutoTokenizer.from_pretrained(str(path)),
                                      trust_remote_code=False)
            built[family] = SimpleNamespace(processor=processor, config=config, path=path, family=family)
        return built[family]

    return build


@pytest.fixture(scope="session")
def model(models):
    """The qwen3_vl entry of :func:`models`."""
    return models("qwen3_vl")
