"""Family adapters (``mm_handoff.adapters``, not a top-level ``adapters``: PyPI's popular
``adapters`` package would shadow, or be shadowed by, a root folder of that name).

The adapter protocol (:mod:`.base`), the built-in families as one table (:mod:`.families`), the shared
Qwen layout they follow (:mod:`.qwen_layout`, with HF's timestamps in :mod:`.timestamps`), and the
registry (:mod:`.registry`). Importing this package imports no engine. :func:`register_builtin` is the
``builtin`` entry point of the ``mm_handoff.adapters`` group; the registry calls it on first lookup.
"""

from __future__ import annotations

from .base import Adapter
from .families import (
    FAMILIES,
    TRTLLM_PROCESSOR_CLASSES,
    Cosmos3Adapter,
    Cosmos3EdgeAdapter,
    Qwen3_5Adapter,
    Qwen3_5MoeAdapter,
    Qwen3VLAdapter,
    Qwen3VLMoeAdapter,
    register_builtin,
)
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
