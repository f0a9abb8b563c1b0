"""Stand-in for ``tensorrt_llm/_torch/models/modeling_multimodal_utils.py`` (E/P mode switch only)."""

import os


def _is_mm_disagg() -> bool:
    return os.getenv("TLLM_MULTIMODAL_DISAGGREGATED", "0") == "1"

