"""Stand-in for ``tensorrt_llm/_torch/models/modeling_qwen3_5.py`` (VLM wrappers only).

Mirrors NVIDIA/TensorRT-LLM @ 00620eb025e7c24895986e1042380bd1be4426d9:
``_Qwen3_5VLModel(Qwen3VLModelBase)`` and its two registered subclasses
``Qwen3_5MoeVLModel`` (``qwen3_5_moe``) and ``Qwen3_5VLModel`` (``qwen3_5``),
both registering ``Qwen3VLInputProcessorBase`` directly (upstream has NO
processor wrapper class in this file) with ``@support_multimodal_disaggregated``
(``# TODO(TRTLLM-13417)``). The text-only ``Qwen3_5*ForCausalLM`` classes and
all model internals are omitted.
Placeholder metadata: Qwen3-VL's object (the stand-in stores it, reads none of it).
"""

from ...inputs import register_input_processor, support_multimodal_disaggregated
from .modeling_qwen3vl import (
    QWEN3_VL_PLACEHOLDER_METADATA,
    Qwen3VisionModel,
    Qwen3VisionModelBase,
    Qwen3VLInputProcessorBase,
    Qwen3VLModelBase,
)
from .modeling_utils import register_auto_model, register_vision_encoder


class _Qwen3_5VLModel(Qwen3VLModelBase):
    pass


@support_multimodal_disaggregated
@register_vision_encoder(Qwen3VisionModelBase, vlm_base_model=Qwen3VisionModel)
@register_auto_model("Qwen3_5MoeForConditionalGeneration")
@register_input_processor(
    Qwen3VLInputProcessorBase, model_type="qwen3_5_moe", placeholder_metadata=QWEN3_VL_PLACEHOLDER_METADATA
)
class Qwen3_5MoeVLModel(_Qwen3_5VLModel):
    """Qwen3 vision encoder + Qwen3.5 MoE text decoder."""


@support_multimodal_disaggregated
@register_vision_encoder(Qwen3VisionModelBase, vlm_base_model=Qwen3VisionModel)
@register_auto_model("Qwen3_5ForConditionalGeneration")
@register_input_processor(
    Qwen3VLInputProcessorBase, model_type="qwen3_5", placeholder_metadata=QWEN3_VL_PLACEHOLDER_METADATA
)
class Qwen3_5VLModel(_Qwen3_5VLModel):
    """Qwen3 vision encoder + dense Qwen3.5 text decoder."""
