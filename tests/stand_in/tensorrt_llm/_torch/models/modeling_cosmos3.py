"""Stand-in for ``tensorrt_llm/_torch/models/modeling_cosmos3.py``.

Default variant mirrors NVIDIA/TensorRT-LLM @ 1c58b177483d2f680ea284e53a9be0b678bc22cd:
``Cosmos3Model(Qwen3VLModel)`` registers ``Qwen3VLInputProcessorBase`` DIRECTLY
for ``cosmos3`` and for the backward-compatible alias ``cosmos3_omni`` (same
class, same placeholder metadata; the stand-in reuses Qwen3-VL's object), with ``@support_multimodal_disaggregated``.
(The older @ 08a1e42a2b47d223f1ca58e56538432929f1d874 registers ``cosmos3`` only.)

``Cosmos3InputProcessor`` is NOT upstream code. Upstream issue #20138 names a
``Cosmos3InputProcessor`` at ``modeling_cosmos3.py`` L59 (decorated with
``@support_multimodal_disaggregated`` at L68) at 785c948 / 760a584, but no
upstream version read contains that class (``modeling_cosmos3.py`` @ 1c58b177 and
@ 08a1e42a register ``Qwen3VLInputProcessorBase``). It is provided here as a
HYPOTHETICAL registered subclass that overrides
``build_disagg_prefill_multimodal_inputs`` WITHOUT calling ``super()``: it
calls this module's own reference to ``_expand_prompt_token_ids_for_mm_handoff``,
so patching only the base method does not cover it. It is registered only when
the environment variable ``TLLM_STAND_IN_COSMOS3_VARIANT=issue-20138`` is set
at import time; otherwise the class exists but is unregistered.
"""

import os
from typing import Any, Dict, List

from ...inputs import (
    TextPrompt,
    register_input_processor,
    support_multimodal_disaggregated,
)
from ...inputs.multimodal import DisaggPrefillMultimodalInputs
from .modeling_qwen3vl import (
    QWEN3_VL_PLACEHOLDER_METADATA,
    Qwen3VisionModel,
    Qwen3VisionModelBase,
    Qwen3VLInputProcessorBase,
    Qwen3VLModel,
    _expand_prompt_token_ids_for_mm_handoff,
)
from .modeling_utils import register_auto_model, register_vision_encoder

COSMOS3_VARIANT = os.getenv("TLLM_STAND_IN_COSMOS3_VARIANT", "1c58b17")

class Cosmos3InputProcessor(Qwen3VLInputProcessorBase):
    """HYPOTHETICAL (see module docstring): own override, no ``super()`` call."""

    def build_disagg_prefill_multimodal_inputs(self, inputs: TextPrompt, mm_handles: List[Dict[str, Any]]) -> DisaggPrefillMultimodalInputs:
        text_prompt = inputs.get("prompt")
        if not text_prompt:
            raise ValueError("Text prompt is required but not provided")
        if not isinstance(mm_handles, list):
            raise TypeError("mm_handles must be a list")
        input_ids = self.tokenizer(text_prompt, return_tensors="pt").input_ids[0]
        return _expand_prompt_token_ids_for_mm_handoff(
            input_ids,
            mm_handles,
            image_token_id=self.config.image_token_id,
            video_token_id=self.config.video_token_id,
            vision_start_token_id=self.config.vision_start_token_id,
        )


_PROCESSOR_CLS = Cosmos3InputProcessor if COSMOS3_VARIANT == "issue-20138" else Qwen3VLInputProcessorBase


@support_multimodal_disaggregated
@register_vision_encoder(Qwen3VisionModelBase, vlm_base_model=Qwen3VisionModel)
@register_auto_model("Cosmos3ForConditionalGeneration")
@register_input_processor(_PROCESSOR_CLS, model_type="cosmos3", placeholder_metadata=QWEN3_VL_PLACEHOLDER_METADATA)
# cosmos3_omni is the backward-compat alias for cosmos3 (upstream comment).
@register_input_processor(_PROCESSOR_CLS, model_type="cosmos3_omni", placeholder_metadata=QWEN3_VL_PLACEHOLDER_METADATA)
class Cosmos3Model(Qwen3VLModel):
    pass
