"""Stand-in for ``tensorrt_llm/_torch/models/modeling_qwen3vl_moe.py``.

Mirrors NVIDIA/TensorRT-LLM @ 14b0c8f8de6db0db6f102e301aefb91362c7e114:
``Qwen3MoeVLModel(Qwen3VLModelBase)`` registers the SAME class object
``Qwen3VLInputProcessorBase`` for ``qwen3_vl_moe`` and carries
``@support_multimodal_disaggregated`` (upstream's comment: redundant, since the
flag lives on the shared processor class). Model internals are omitted; the
placeholder metadata is Qwen3-VL's object (the stand-in stores it, reads none of it).
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


@support_multimodal_disaggregated
@register_vision_encoder(Qwen3VisionModelBase, vlm_base_model=Qwen3VisionModel)
@register_auto_model("Qwen3VLMoeForConditionalGeneration")
@register_input_processor(
    Qwen3VLInputProcessorBase,
    model_type="qwen3_vl_moe",
    placeholder_metadata=QWEN3_VL_PLACEHOLDER_METADATA,
)
class Qwen3MoeVLModel(Qwen3VLModelBase):
    pass
