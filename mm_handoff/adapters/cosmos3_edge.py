"""Cosmos3-Edge: one group per frame (temporal patch 1), its own ids, the whole trio replaced.

``Cosmos3EdgeProcessor`` matches ``<|vision_start|><|video_pad|><|vision_end|>`` or a bare
``<|video_pad|>``, so its convention is ``replace_wrapper`` in every transformers version. Its
tokenizer is not public; without one the timestamp ids are unknown, so rebuilding video prompts
needs the tokenizer, while deriving layouts from the encoder's ids does not.
"""

from __future__ import annotations

from ..spec import REPLACE_WRAPPER
from .qwen_layout import QwenLayoutAdapter

__all__ = ["Cosmos3EdgeAdapter"]


class Cosmos3EdgeAdapter(QwenLayoutAdapter):
    """Cosmos3-Edge: video 18, image 19, vision_start 20, vision_end 21; no deepstack."""

    family = "cosmos3_edge"
    default_ids = {"image_pad": 19, "video_pad": 18, "vision_start": 20, "vision_end": 21}
    default_seconds_id = None
    default_temporal_patch_size = 1
    default_deepstack_levels = 0
    default_hidden_size = None
    fixed_convention = REPLACE_WRAPPER
