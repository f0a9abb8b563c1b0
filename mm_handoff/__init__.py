"""mm-handoff: an exact encoder -> prefill/decode multimodal handoff for the Qwen3-VL family.

The core (contract, validator, wire form, registry) needs only attrs and numpy. The HF reference
engine (:mod:`mm_handoff.hf`) and the TensorRT-LLM glue (:mod:`mm_handoff.trtllm`) import their
engines lazily, so ``import mm_handoff`` works without either.
"""

from ._version import __version__
from .accept import accept_layout
from .derive import derive_layout
from .errors import (
    AdapterAlreadyRegisteredError,
    AdapterError,
    UsageError,
    AdapterNotFoundError,
    EmbeddingCountError,
    EngineNotSupportedError,
    FingerprintMismatchError,
    GridMismatchError,
    HandoffError,
    LayoutError,
    MropeLengthError,
    SkewError,
    TokenMismatchError,
    WireChecksumError,
    WireFormatError,
    WireLimitError,
    WireVersionError,
)
from .layout import HandoffLayout, MultimodalItem, PlaceholderRun
from .mrope import mrope_positions
from .registry import get_adapter, register_adapter
from .spec import PAD_ONLY, REPLACE_WRAPPER, TimestampVocab, TokenSpec
from .policy import Policy, resolve_policy
from .checks import check_mrope_slice, check_skew, validate
from .wire import WireLimits, from_wire, to_wire

__all__ = [
    "__version__",
    "HandoffLayout",
    "MultimodalItem",
    "PlaceholderRun",
    "TokenSpec",
    "TimestampVocab",
    "PAD_ONLY",
    "REPLACE_WRAPPER",
    "derive_layout",
    "mrope_positions",
    "validate",
    "accept_layout",
    "check_mrope_slice",
    "check_skew",
    "Policy",
    "resolve_policy",
    "to_wire",
    "from_wire",
    "WireLimits",
    "register_adapter",
    "get_adapter",
    "HandoffError",
    "LayoutError",
    "MropeLengthError",
    "EmbeddingCountError",
    "GridMismatchError",
    "FingerprintMismatchError",
    "TokenMismatchError",
    "WireFormatError",
    "WireVersionError",
    "WireChecksumError",
    "WireLimitError",
    "SkewError",
    "AdapterError",
    "AdapterNotFoundError",
    "UsageError",
    "AdapterAlreadyRegisteredError",
    "EngineNotSupportedError",
]
