"""The opt-in switch through vLLM's plugin entry point, without starting an engine."""

from importlib.metadata import entry_points

import pytest

pytest.importorskip("vllm")

import mm_handoff.vllm as glue
from mm_handoff import _env
from mm_handoff.vllm import plugin


def test_entry_point_is_registered():
    names = {ep.name: ep.value for ep in entry_points(group="vllm.general_plugins")}
    assert names.get("mm_handoff") == "mm_handoff.vllm.plugin:register"


@pytest.mark.parametrize("value, installed", [("1", True), ("on", True), ("", False), ("0", False)])
def test_register_installs_only_when_asked(monkeypatch, value, installed):
    from vllm.model_executor.models.qwen3_vl import Qwen3VLMultiModalProcessor

    original = Qwen3VLMultiModalProcessor.apply
    monkeypatch.setenv(_env.VLLM_CHECK, value)
    try:
        plugin.register()
        assert glue.is_installed() is installed
        assert (Qwen3VLMultiModalProcessor.apply is original) is not installed
        assert glue.install() == glue.status()  # idempotent
    finally:
        glue.uninstall()
    assert "apply" not in vars(Qwen3VLMultiModalProcessor)  # inherited attribute deleted, not shadowed
    assert Qwen3VLMultiModalProcessor.apply is original
