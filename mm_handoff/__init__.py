"""mm-handoff: an exact encoder -> prefill/decode multimodal handoff for the Qwen3-VL family.

The core (the contract in :mod:`mm_handoff.layout`, strict reading and bounds in :mod:`mm_handoff.reading`,
the accept step in :mod:`mm_handoff.checks`, the family adapters and their registry in
:mod:`mm_handoff.adapters`) needs only attrs and numpy. The HF reference
engine (:mod:`mm_handoff.hf`) and the engine glue (:mod:`mm_handoff.trtllm`, :mod:`mm_handoff.vllm`)
import their engines lazily, so ``import mm_handoff`` works without any of them.

Everything else stays importable from its module (``mm_handoff.errors``, ``mm_handoff.checks``,
``mm_handoff.layout.spec``, ...); this namespace holds what a user calls.
"""

from .adapters.registry import get_adapter, register_adapter
from .checks import SideFacts, accept_layout, check_mrope_slice, check_skew, validate
from .errors import (
    AdapterError,
    AdapterNotFoundError,
    EmbeddingCountError,
    HandoffError,
    LayoutError,
    MropeLengthError,
    SkewError,
    TokenMismatchError,
    WireFormatError,
)
from .glue.policy import Policy
from .glue.signals import stats
from .layout import PAD_ONLY, REPLACE_WRAPPER, HandoffLayout, MultimodalItem, PlaceholderRun, TokenSpec
from .reading import Limits

__all__ = [
    "__version__",
    "HandoffLayout",
    "MultimodalItem",
    "PlaceholderRun",
    "TokenSpec",
    "PAD_ONLY",
    "REPLACE_WRAPPER",
    "get_adapter",
    "register_adapter",
    "accept_layout",
    "SideFacts",
    "validate",
    "check_mrope_slice",
    "check_skew",
    "Policy",
    "Limits",
    "stats",
    "HandoffError",
    "LayoutError",
    "MropeLengthError",
    "EmbeddingCountError",
    "TokenMismatchError",
    "SkewError",
    "WireFormatError",
    "AdapterError",
    "AdapterNotFoundError",
]


def __getattr__(name: str):
    """``__version__`` is read on first use (it costs nothing at import time of every worker)."""
    if name == "__version__":
        from ._version import __version__

        return __version__
    raise AttributeError(f"module 'mm_handoff' has no attribute {name!r}")
