"""Fixtures for the TensorRT-LLM glue tests, run against the stand-in (tests/stand_in).

``engine`` puts the stand-in on ``sys.path`` for that test only and guarantees a clean engine for each test: mm-handoff
is uninstalled and every ``tensorrt_llm*`` module is purged before and after, so a test may
monkeypatch stand-in classes freely and no patch leaks into the next test. Executor workers run
in-process (``TLLM_WORKER_USE_SINGLE_PROCESS=1``) except in the subprocess tests.
"""

import sys
from types import SimpleNamespace

import pytest
from trtllm_helpers import STAND_IN_DIR


def _purge_engine():
    from mm_handoff.trtllm import uninstall

    uninstall()
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        del sys.modules[name]


@pytest.fixture
def engine(monkeypatch):
    """A freshly imported stand-in engine; returns the stand-in helper module."""
    monkeypatch.syspath_prepend(str(STAND_IN_DIR))
    monkeypatch.setenv("TLLM_WORKER_USE_SINGLE_PROCESS", "1")
    monkeypatch.delenv("MM_HANDOFF_POLICY", raising=False)
    monkeypatch.delenv("TLLM_STAND_IN_COSMOS3_VARIANT", raising=False)
    _purge_engine()
    import stand_in_helpers

    yield stand_in_helpers
    _purge_engine()


@pytest.fixture
def deployment(engine):
    """Factory: ``deployment(model_type=..., architecture=...)`` -> encoder, PD LLM, aggregated LLM."""
    made = []

    def build(name="stand-in/qwen3vl", **config_kwargs):
        from tensorrt_llm._torch.model_config import register_pretrained_config
        from tensorrt_llm.llmapi.llm import LLM
        from tensorrt_llm.llmapi.mm_encoder import MultimodalEncoder

        config = engine.make_qwen3vl_config(**config_kwargs)
        register_pretrained_config(name, config)
        tok = engine.FakeTokenizer()
        encoder = MultimodalEncoder(model=name, tokenizer=tok)
        encoder.input_processor._hf_expand = engine.make_hf_expand(tok, config)
        pd = LLM(model=name, tokenizer=tok)
        aggregated = LLM(model=name, tokenizer=tok)
        aggregated.input_processor._hf_expand = engine.make_hf_expand(tok, config)
        made.extend([encoder, pd, aggregated])
        return SimpleNamespace(encoder=encoder, pd=pd, aggregated=aggregated, config=config, tokenizer=tok)

    yield build
    for llm in made:
        llm.shutdown()




@pytest.fixture(autouse=True)
def fresh_signals():
    """mm-handoff's figures at zero and full event buckets for each test (events are rate-limited per process)."""
    from mm_handoff.glue.signals import SIGNALS

    SIGNALS.reset()
    yield SIGNALS
