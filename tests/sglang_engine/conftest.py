"""SGLang 0.5.23's own Python, on CPU, for the SGLang glue tests; run by ``make test-sglang`` in ``.venv-sglang``.

One ``QwenVLImageProcessor`` per family SGLang lists for EPD video (its ``get_mm_data``'s list, less
``qwen4_exp`` and ``intern_s2_preview``, which mm-handoff has no family for), built the way SGLang's
receiver builds it: a model folder (the project's tiny HF config, saved with its architecture, and
the real processor with the family's Qwen tokenizer), SGLang's ``ServerArgs`` for it published for
the tokenizer role, then the processor class with the HF processor. No model weights: SGLang's PD
processor only reads the prompt, grids, timestamps and the embeddings' rows.

Without SGLang (the project's own ``.venv``) nothing here is collected. (The folder is not named
``sglang``: pytest puts ``tests/`` on ``sys.path``, where a ``tests/sglang`` folder would shadow it.)
"""

from __future__ import annotations

import importlib.util

import pytest


def _real_sglang() -> bool:
    spec = importlib.util.find_spec("sglang")
    return spec is not None and spec.origin is not None


collect_ignore_glob = [] if _real_sglang() else ["test_*.py"]

#: family -> the architecture SGLang serves it with
ARCHITECTURES = {
    "qwen3_vl": "Qwen3VLForConditionalGeneration",
    "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
    "qwen3_5": "Qwen3_5ForConditionalGeneration",
    "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
    "cosmos3_omni": "Cosmos3ForConditionalGeneration",
}
FAMILIES = tuple(ARCHITECTURES)


def build_processor(family: str, directory):
    """``(SGLang's QwenVLImageProcessor, the HF processor, the HF config)`` for ``family``."""
    from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_tokenizer

    from mm_handoff.hf.processors import build_processor as hf_processor
    from mm_handoff.hf.tiny import tiny_config

    config = tiny_config(family)
    config.architectures = [ARCHITECTURES[family]]
    config.save_pretrained(directory)
    processor = hf_processor(family)
    processor.save_pretrained(directory)
    # the Qwen3.5 families' linear-attention cache: SGLang's default (extra_buffer) needs a GPU platform
    hybrid = {"mamba_radix_cache_strategy": "no_buffer", "disable_overlap_schedule": True, "page_size": 1} \
        if family.startswith("qwen3_5") else {}
    server_args = ServerArgs(model_path=str(directory), device="cpu", **hybrid)
    set_global_server_args_for_tokenizer(server_args)
    return QwenVLImageProcessor(config, server_args, processor, "default"), processor, config


@pytest.fixture(scope="module", params=FAMILIES)
def sglang_processor(request, tmp_path_factory):
    """``(SGLang's processor, HF processor, HF config, family)``; the glue is uninstalled afterwards."""
    import mm_handoff.sglang as glue

    family = request.param
    proc, hf, config = build_processor(family, tmp_path_factory.mktemp(f"model_{family}"))
    yield proc, hf, config, family
    glue.uninstall()


@pytest.fixture(autouse=True)
def _uninstalled():
    import mm_handoff.sglang as glue

    yield
    glue.uninstall()
