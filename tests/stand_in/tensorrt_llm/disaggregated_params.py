"""Stand-in for ``tensorrt_llm/disaggregated_params.py``.

Mirrors NVIDIA/TensorRT-LLM @ 01009a33a704c61e2c183c40514d7fb59159ab09:
a slotted, keyword-only dataclass with the P->D fields and the E->P fields
(``multimodal_embedding_handles``, ``multimodal_hashes``,
``mrope_position_ids_handle``, ``mrope_position_deltas_handle``).
``__post_init__`` lower-cases and validates ``request_type``, checks the
hashes against the handles, and, when no hashes are given, draws ONE random
8 x int32 hash and reuses it for every item (which disables KV reuse).

Simplified: the C++ binding types returned by ``get_context_phase_params`` /
``get_request_type`` come from the pure-Python ``tensorrt_llm.bindings``
stand-in. No field from the forks (``multimodal_layout``) or from PR #19727
(``multimodal_positions``/``multimodal_lengths``) exists here, as at the
mirrored commit.
"""

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Dict, List, Optional

import numpy as np

from tensorrt_llm.bindings import executor as tllme

_VALID_REQUEST_TYPES = ("context_only", "generation_only", "context_and_generation")


class DisaggScheduleStyle(IntEnum):
    CONTEXT_FIRST = 0
    GENERATION_FIRST = 1


@dataclass(slots=True, kw_only=True)
class DisaggregatedParams:
    """Parameters that travel between the E, P and D instances."""

    request_type: Optional[str] = None
    # P -> D
    first_gen_tokens: Optional[List[int]] = None
    first_gen_log_probs: Optional[List] = None
    first_gen_logits: Optional[List] = None
    ctx_request_id: Optional[int] = None
    opaque_state: Optional[bytes] = None
    draft_tokens: Optional[List[int]] = None
    disagg_request_id: Optional[int] = None
    ctx_dp_rank: Optional[int] = None
    ctx_info_endpoint: Optional[str] = None
    schedule_style: Optional[DisaggScheduleStyle] = None
    # E -> P
    multimodal_embedding_handles: Optional[List[Dict[str, Any]]] = None
    multimodal_hashes: Optional[List[List[int]]] = None
    mrope_position_ids_handle: Optional[Dict[str, Any]] = None
    mrope_position_deltas_handle: Optional[Dict[str, Any]] = None

    def get_context_phase_params(self) -> tllme.ContextPhaseParams:
        req_id = self.disagg_request_id if self.disagg_request_id is not None else self.ctx_request_id
        return tllme.ContextPhaseParams(
            self.first_gen_tokens,
            req_id,
            self.opaque_state,
            self.draft_tokens,
            self.ctx_dp_rank,
            self.ctx_info_endpoint,
        )

    def get_request_type(self) -> tllme.RequestType:
        mapping = {
            "context_only": tllme.RequestType.REQUEST_TYPE_CONTEXT_ONLY,
            "generation_only": tllme.RequestType.REQUEST_TYPE_GENERATION_ONLY,
            "context_and_generation": tllme.RequestType.REQUEST_TYPE_CONTEXT_AND_GENERATION,
        }
        if self.request_type not in mapping:
            raise ValueError(
                f"Unknown request type: {self.request_type}. Must be context_only, "
                "generation_only or context_and_generation"
            )
        return mapping[self.request_type]

    def __post_init__(self):
        if self.request_type is not None:
            self.request_type = self.request_type.lower()
            if self.request_type not in _VALID_REQUEST_TYPES:
                raise ValueError(
                    f"Unknown request type: {self.request_type}. Must be context_only, "
                    "generation_only or context_and_generation"
                )
        if self.multimodal_embedding_handles is None:
            return
        if self.multimodal_hashes is not None:
            # Caller-provided hashes: KV-cache reuse stays possible.
            assert len(self.multimodal_hashes) == len(self.multimodal_embedding_handles), (
                "multimodal_embedding_handles and multimodal_hashes must have the same length"
            )
            for item_hash in self.multimodal_hashes:
                assert isinstance(item_hash, list), "mm_hash must be a list"
                assert len(item_hash) == 8, "mm_hash must be a list of 8 integers"
                assert all(isinstance(v, int) for v in item_hash), "mm_hash must contain integers"
        else:
            assert len(self.multimodal_embedding_handles) > 0, (
                "multimodal_embedding_handles must be provided"
            )
            info = np.iinfo(np.int32)
            one_hash = np.random.randint(info.min, info.max, size=8, dtype=np.int32).tolist()
            # Same random hash for every item, as upstream does.
            self.multimodal_hashes = [one_hash] * len(self.multimodal_embedding_handles)
