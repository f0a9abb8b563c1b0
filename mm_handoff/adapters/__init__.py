"""Family adapters (``mm_handoff.adapters``, not a top-level ``adapters``: PyPI's popular
``adapters`` package would shadow, or be shadowed by, a root folder of that name).

Importing this package imports no engine. :func:`register_builtin` is the ``builtin`` entry point of
the ``mm_handoff.adapters`` group; the registry calls it on first lookup.
"""

from __future__ import annotations

from .base import Adapter
from .cosmos3_edge import Cosmos3EdgeAdapter
from .qwen3_5 import Qwen3_5Adapter, Qwen3_5MoeAdapter
from .qwen3_vl import Cosmos3Adapter, Qwen3VLAdapter, Qwen3VLMoeAdapter
from .qwen_layout import QwenLayoutAdapter, detect_convention

__all__ = [
    "Adapter",
    "QwenLayoutAdapter",
    "Qwen3VLAdapter",
    "Qwen3VLMoeAdapter",
    "Cosmos3Adapter",
    "Qwen3_5Adapter",
    "Qwen3_5MoeAdapter",
    "Cosmos3EdgeAdapter",
    "FAMILIES",
    "TRTLLM_PROCESSOR_CLASSES",
    "register_builtin",
    "detect_convention",
]

#: family name / HF model_type -> adapter class
FAMILIES = {
    "qwen3_vl": Qwen3VLAdapter,
    "qwen3_vl_moe": Qwen3VLMoeAdapter,
    "cosmos3": Cosmos3Adapter,
    "cosmos3_omni": Cosmos3Adapter,
    "qwen3_5": Qwen3_5Adapter,
    "qwen3_5_moe": Qwen3_5MoeAdapter,
    "cosmos3_edge": Cosmos3EdgeAdapter,
}

#: TensorRT-LLM input-processor classes (by dotted name, resolved lazily) -> default family.
#: One processor class serves several model types upstream, so the adapter follows the model
#: config's ``model_type`` when one is given.
TRTLLM_PROCESSOR_CLASSES = {
    "tensorrt_llm._torch.models.modeling_qwen3vl:Qwen3VLInputProcessorBase": "qwen3_vl",
    "tensorrt_llm._torch.models.modeling_cosmos3:Cosmos3InputProcessor": "cosmos3",
    # the Qwen3.5 wrapper of the older modeling_qwen3_5.py (87,053 chars; its get_prompt_token_ids era:
    # install refuses it). The newer file registers Qwen3VLInputProcessorBase for qwen3_5 / qwen3_5_moe.
    "tensorrt_llm._torch.models.modeling_qwen3_5:Qwen3_5InputProcessorBase": "qwen3_5",
}


def _family_factory(family: str):
    cls = FAMILIES[family]

    def factory(*, tokenizer=None, config=None, convention=None):
        return cls(tokenizer=tokenizer, config=config, convention=convention)

    factory.__qualname__ = f"{cls.__name__}[{family}]"
    return factory


def _processor_factory(default_family: str):
    def factory(*, tokenizer=None, config=None, convention=None):
        model_type = getattr(config, "model_type", None) if config is not None else None
        family = model_type if model_type in FAMILIES else default_family
        return FAMILIES[family](tokenizer=tokenizer, config=config, convention=convention)

    factory.__qualname__ = f"processor[{default_family}]"
    return factory


def register_builtin(registry) -> None:
    """Register the built-in families and TensorRT-LLM processor classes in ``registry``."""
    for family in FAMILIES:
        registry.register(family, _family_factory(family))
    for dotted, family in TRTLLM_PROCESSOR_CLASSES.items():
        registry.register(dotted, _processor_factory(family))
