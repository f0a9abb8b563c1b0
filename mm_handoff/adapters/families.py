"""The built-in families, in one table: each family's adapter class (its ids and sizes over the shared
Qwen layout), the names it is registered under, the TensorRT-LLM processor classes that serve it, and where
it lives in transformers (:data:`HF_FAMILIES`: the tokenizer, processor, config and model classes that the HF
reference, the CLI, the oracle and the corpus read).

A new family is one class here and one row in :data:`FAMILIES` and :data:`HF_FAMILIES` (plus its test data).
Every family shares :class:`~mm_handoff.adapters.qwen_layout.QwenLayoutAdapter`'s layout: the processor's
groups, timestamps and mRoPE; a class states only what differs from Qwen3-VL.
"""

from __future__ import annotations

import attrs

from ..layout.spec import REPLACE_WRAPPER
from ..layout.vocabularies import QWEN3_5
from .qwen_layout import QwenLayoutAdapter


class Qwen3VLAdapter(QwenLayoutAdapter):
    """Qwen3-VL: ids 151652-151656, temporal patch 2, merge 2, 3 deepstack levels (Qwen3-VL-8B sizes)."""

    family = "qwen3_vl"


class Qwen3VLMoeAdapter(QwenLayoutAdapter):
    """Qwen3-VL-MoE: same processor and ids as Qwen3-VL."""

    family = "qwen3_vl_moe"


class Cosmos3Adapter(QwenLayoutAdapter):
    """Cosmos3 / Cosmos3-Omni: the Qwen3-VL architecture with its own ``model_type``; with
    ``Qwen3VLProcessor`` it produces exactly the Qwen3-VL layout, deepstack included. Registered under
    both names."""

    family = "cosmos3"


class Qwen3_5Adapter(QwenLayoutAdapter):
    """Qwen3.5: the Qwen3-VL processor with the Qwen3.5 vocabulary: ids 248053-248057, `` seconds`` is
    6283; no deepstack."""

    family = "qwen3_5"
    default_ids = {"image_pad": 248056, "video_pad": 248057, "vision_start": 248053, "vision_end": 248054}
    vocabulary = QWEN3_5
    default_deepstack_levels = 0
    default_hidden_size = None


class Qwen3_5MoeAdapter(Qwen3_5Adapter):
    """Qwen3.5-MoE: same processor and ids as Qwen3.5."""

    family = "qwen3_5_moe"


class Cosmos3EdgeAdapter(QwenLayoutAdapter):
    """Cosmos3-Edge: one group per frame (temporal patch 1), its own ids (video 18, image 19, vision_start
    20, vision_end 21), no deepstack, the whole trio replaced.

    ``Cosmos3EdgeProcessor`` matches ``<|vision_start|><|video_pad|><|vision_end|>`` or a bare
    ``<|video_pad|>``, so its convention is ``replace_wrapper`` in every transformers version. Its
    tokenizer is not public; without one the timestamp ids are unknown, so rebuilding video prompts
    needs the tokenizer, while deriving layouts from the encoder's ids does not.
    """

    family = "cosmos3_edge"
    default_ids = {"image_pad": 19, "video_pad": 18, "vision_start": 20, "vision_end": 21}
    vocabulary = None
    default_temporal_patch_size = 1
    default_deepstack_levels = 0
    default_hidden_size = None
    fixed_convention = REPLACE_WRAPPER


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

@attrs.frozen
class HFFamily:
    """A family as transformers has it: the model type the HF reference builds and the classes it uses."""

    #: the HF ``model_type`` (a key of :data:`FAMILIES`)
    name: str
    #: the released vocabulary its tokenizer is (``"qwen3"`` / ``"qwen3_5"``; Cosmos3-Edge's is not public, and
    #: the Qwen3 tokenizer stands in for it)
    tokenizer: str
    #: transformers' processor, config and ``*ForConditionalGeneration`` classes
    processor: str
    config: str
    model: str

    @property
    def adapter(self) -> type[QwenLayoutAdapter]:
        return FAMILIES[self.name]

    @property
    def deepstack(self) -> bool:
        """The text model adds deepstack features (Qwen3-VL, -MoE, Cosmos3-Omni)."""
        return self.adapter.default_deepstack_levels > 0

    @property
    def qwen_processor(self) -> bool:
        """Served by ``Qwen3VLProcessor`` (every family but Cosmos3-Edge): the E/PD reference engine runs it."""
        return self.processor == "Qwen3VLProcessor"


#: the families the HF reference, the tiny models, the oracle and the corpus cover, in this order
HF_FAMILIES = {row.name: row for row in (
    HFFamily("qwen3_vl", "qwen3", "Qwen3VLProcessor", "Qwen3VLConfig", "Qwen3VLForConditionalGeneration"),
    HFFamily("qwen3_vl_moe", "qwen3", "Qwen3VLProcessor", "Qwen3VLMoeConfig", "Qwen3VLMoeForConditionalGeneration"),
    HFFamily("qwen3_5", "qwen3_5", "Qwen3VLProcessor", "Qwen3_5Config", "Qwen3_5ForConditionalGeneration"),
    HFFamily("qwen3_5_moe", "qwen3_5", "Qwen3VLProcessor", "Qwen3_5MoeConfig", "Qwen3_5MoeForConditionalGeneration"),
    HFFamily("cosmos3_omni", "qwen3", "Qwen3VLProcessor", "Cosmos3OmniConfig", "Cosmos3OmniForConditionalGeneration"),
    HFFamily("cosmos3_edge", "qwen3", "Cosmos3EdgeProcessor", "Cosmos3EdgeConfig",
             "Cosmos3EdgeForConditionalGeneration"),
)}

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


def same_family(a: str, b: str) -> bool:
    """Two family names of one family: equal, or registered for one adapter class (``cosmos3_omni`` is
    ``cosmos3``)."""
    return a == b or (a in FAMILIES and FAMILIES.get(b) is FAMILIES[a])
