"""Qwen3.5 and Qwen3.5-MoE: the Qwen3-VL processor with the Qwen3.5 vocabulary, no deepstack."""

from __future__ import annotations

from .qwen_layout import QwenLayoutAdapter

__all__ = ["Qwen3_5Adapter", "Qwen3_5MoeAdapter"]


class Qwen3_5Adapter(QwenLayoutAdapter):
    """Qwen3.5: ids 248053-248057, `` seconds`` is 6283; no deepstack."""

    family = "qwen3_5"
    default_ids = {"image_pad": 248056, "video_pad": 248057, "vision_start": 248053, "vision_end": 248054}
    default_seconds_id = 6283
    default_deepstack_levels = 0
    default_hidden_size = None


class Qwen3_5MoeAdapter(Qwen3_5Adapter):
    family = "qwen3_5_moe"
