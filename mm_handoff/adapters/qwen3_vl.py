"""Qwen3-VL, Qwen3-VL-MoE and Cosmos3 (incl. the ``cosmos3_omni`` alias): one layout, Qwen3 ids.

Cosmos3-Omni is the Qwen3-VL architecture with its own ``model_type``; with ``Qwen3VLProcessor``
it produces exactly the Qwen3-VL layout, deepstack included.
"""

from __future__ import annotations

from .qwen_layout import QwenLayoutAdapter

__all__ = ["Qwen3VLAdapter", "Qwen3VLMoeAdapter", "Cosmos3Adapter"]


class Qwen3VLAdapter(QwenLayoutAdapter):
    """Qwen3-VL: ids 151652-151656, temporal patch 2, merge 2, 3 deepstack levels (Qwen3-VL-8B sizes)."""

    family = "qwen3_vl"


class Qwen3VLMoeAdapter(QwenLayoutAdapter):
    """Qwen3-VL-MoE: same processor and ids as Qwen3-VL."""

    family = "qwen3_vl_moe"


class Cosmos3Adapter(QwenLayoutAdapter):
    """Cosmos3 / Cosmos3-Omni: Qwen3-VL layout and deepstack; registered under both names."""

    family = "cosmos3"
