"""Adapter registry: names, configs, classes along the MRO, dotted names, duplicates, entry points."""

import types

import pytest

import mm_handoff.adapters.registry as registry_module
from mm_handoff.adapters import FAMILIES, Qwen3_5Adapter, Qwen3VLAdapter
from mm_handoff.adapters.registry import AdapterRegistry, class_key
from mm_handoff.errors import AdapterError, AdapterNotFoundError


class Base:  # stands in for an engine's processor base class
    pass


class Derived(Base):
    pass


class Explicit(Derived):
    pass


class Tagged(Qwen3VLAdapter):
    """A real adapter that remembers which factory built it: ``adapter[0]`` is the tag, ``[1]``/``[2]``
    the tokenizer and config it was given (the registry accepts only what follows the protocol)."""

    def __init__(self, tag, tokenizer, config):
        super().__init__(convention="pad_only")
        self._seen = (tag, tokenizer, config)

    def __getitem__(self, i):
        return self._seen[i]


def factory_for(tag):
    def factory(*, tokenizer=None, config=None):
        return Tagged(tag, tokenizer, config)
    return factory


@pytest.fixture
def reg():
    return AdapterRegistry(load_entry_points=False)


def test_names_are_case_insensitive(reg):
    reg.register("fam", factory_for("a"))
    assert reg.get("FAM")[0] == "a"


def test_subclass_inherits_and_explicit_registration_wins(reg):
    reg.register(Base, factory_for("base"))
    assert reg.get(Derived)[0] == "base"
    assert reg.get(Derived())[0] == "base"  # instances resolve through their class
    reg.register(Explicit, factory_for("explicit"))
    assert reg.get(Explicit)[0] == "explicit" and reg.get(Derived)[0] == "base"


def test_dotted_names_never_import(reg):
    """A key for a class that does not exist here costs nothing and matches by module:qualname."""
    reg.register("not_installed_engine.models:Proc", factory_for("x"))
    reg.register(f"{__name__}.Base", factory_for("dotted"))
    assert reg.get(Derived)[0] == "dotted"
    assert reg.get("not_installed_engine.models.Proc")[0] == "x"


def test_duplicates_raise_unless_replacing(reg):
    reg.register("fam", factory_for("a"))
    with pytest.raises(AdapterError, match="already") as info:
        reg.register("fam", factory_for("b"))
    assert "fam" in str(info.value)
    reg.register("fam", factory_for("b"), replace=True)
    assert reg.get("fam")[0] == "b"


def test_cache_clears_on_register(reg):
    assert reg._lookup(Derived) is None
    reg.register(Base, factory_for("late"))
    assert reg.get(Derived)[0] == "late"


def test_unknown_key_lists_known_families(reg):
    reg.register("alpha", factory_for("a"))
    with pytest.raises(AdapterNotFoundError) as info:
        reg.get("beta")
    assert "alpha" in str(info.value) and isinstance(info.value, LookupError)


def test_config_key_and_config_forwarding(reg):
    reg.register("fam", factory_for("a"))
    config = types.SimpleNamespace(model_type="fam", to_dict=dict)
    tag, tok, cfg = reg.get(config, tokenizer="tok")
    assert (tag, tok, cfg) == ("a", "tok", config)


def test_entry_points_load_once_with_blocking_and_broken_plugins(monkeypatch):
    """Third-party adapters arrive through the entry-point group; broken or blocked ones are skipped."""
    calls = []

    def good(registry):
        calls.append("good")
        registry.register("third_party", factory_for("tp"))

    def broken(registry):
        raise RuntimeError("boom")

    eps = [types.SimpleNamespace(name=n, value=v, load=lambda f=f: f)
           for n, v, f in [("good", "pkg:good", good), ("broken", "pkg:broken", broken),
                           ("blocked", "pkg:blocked", good)]]
    import importlib.metadata
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: eps if group == "mm_handoff.adapters" else [])
    monkeypatch.setenv("MM_HANDOFF_BLOCK_ADAPTERS", "blocked")
    reg = AdapterRegistry()
    assert reg.get("third_party")[0] == "tp"
    assert reg.get("qwen3_vl").family == "qwen3_vl"  # built-ins still come (source-tree fallback)
    reg.get("third_party")
    assert calls == ["good"]


def test_builtin_families_and_trtllm_processor_classes():
    """Every family resolves; the TensorRT-LLM processor classes resolve by dotted name, lazily."""
    for family, cls in FAMILIES.items():
        assert isinstance(registry_module.get_adapter(family), cls)
    assert registry_module.REGISTRY.resolve("tensorrt_llm._torch.models.modeling_qwen3vl.Qwen3VLInputProcessorBase")
    # a processor class defined elsewhere with upstream's module path and name, and a subclass of it
    mod = types.ModuleType("tensorrt_llm._torch.models.modeling_qwen3vl")
    Proc = type("Qwen3VLInputProcessorBase", (), {"__module__": mod.__name__})
    Sub = type("MyProcessor", (Proc,), {"__module__": "user_code"})
    assert isinstance(registry_module.get_adapter(Sub), Qwen3VLAdapter)
    cfg = types.SimpleNamespace(model_type="qwen3_5", to_dict=dict)
    assert isinstance(registry_module.get_adapter(Sub, config=cfg), Qwen3_5Adapter)
    assert class_key(Proc) == "tensorrt_llm._torch.models.modeling_qwen3vl:Qwen3VLInputProcessorBase"
