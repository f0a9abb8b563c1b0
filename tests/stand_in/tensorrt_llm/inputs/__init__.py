"""Stand-in for ``tensorrt_llm/inputs/__init__.py`` (same public names as upstream's re-exports)."""

from .content_format import ContentFormat
from .data import PromptInputs, TextPrompt, TokensPrompt, prompt_inputs
from .multimodal import MultimodalInput, MultimodalParams
from .multimodal_data import VideoData
from .registry import (  # noqa: F401 (re-exports, as upstream's)
    INPUT_PROCESSOR_REGISTRY,
    MULTIMODAL_PLACEHOLDER_REGISTRY,
    BaseMultimodalDummyInputsBuilder,
    BaseMultimodalInputProcessor,
    ExtraProcessedInputs,
    MultimodalPlaceholderMetadata,
    MultimodalPlaceholderPlacement,
    create_input_processor,
    create_input_processor_with_hash,
    maybe_compute_mm_embed_cumsum,
    register_input_processor,
    support_multimodal_disaggregated,
)

