"""Stand-in for ``tensorrt_llm/_torch/pyexecutor/llm_request.py`` (``LlmRequest``, ``PyResult``).

Only the attributes the mirrored runner code reads. ``ScheduledRequests`` (from
upstream's ``scheduler``) is defined here too.
"""

from dataclasses import dataclass, field
from typing import Any, List, Optional

from tensorrt_llm.bindings import executor as tllm


class PyResult:
    def __init__(self) -> None:
        self.mm_embeddings: Optional[List[Any]] = None
        self.mm_embedding_lengths: Optional[List[int]] = None
        self.mrope_position_ids = None
        self.mrope_position_deltas = None

    def append_mm_embeddings(self, mm_embeddings: List[Any], mm_embedding_lengths: List[int]) -> None:
        self.mm_embeddings = list(mm_embeddings)
        self.mm_embedding_lengths = list(mm_embedding_lengths)

    def set_mrope_position(self, ids, deltas) -> None:
        self.mrope_position_ids = ids
        self.mrope_position_deltas = deltas


class LlmRequest:
    def __init__(self, *, request_id: int, executor_request: Any) -> None:
        self.py_request_id = request_id
        self.py_client_id = executor_request.client_id
        self._tokens = list(executor_request.input_token_ids)
        self.py_prompt_len = len(self._tokens)
        self.py_max_new_tokens = executor_request.max_tokens
        self.context_current_position = 0
        self.context_chunk_size = len(self._tokens)
        self.py_seq_slot = 0
        self.py_batch_idx = None
        self.py_num_compressed_tokens = 0
        self.cached_tokens = 0
        self.py_multimodal_data = getattr(executor_request, "py_multimodal_data", None)
        self.py_disaggregated_params = getattr(executor_request, "py_disaggregated_params", None)
        self.py_mrope_position_delta = None
        self.py_mrope_delta_cache_slot = None
        self.py_mm_encoder_event = None
        self.py_result = PyResult()
        self.request_type = executor_request.type
        mm_input = executor_request.multimodal_input
        self.multimodal_hashes = getattr(mm_input, "multimodal_hashes", None)
        self.multimodal_positions = getattr(mm_input, "multimodal_positions", None)
        self.multimodal_lengths = getattr(mm_input, "multimodal_lengths", None)

    @property
    def is_context_only_request(self) -> bool:
        return self.request_type == tllm.RequestType.REQUEST_TYPE_CONTEXT_ONLY

    def get_tokens(self, beam: int) -> List[int]:
        return list(self._tokens)

    def get_tokens_range(self, beam: int, begin: int, end: int) -> List[int]:
        return self._tokens[begin:end]

    def get_num_tokens(self, beam: int) -> int:
        return len(self._tokens)


@dataclass
class ScheduledRequests:
    context_requests: List[LlmRequest] = field(default_factory=list)
    generation_requests: List[LlmRequest] = field(default_factory=list)
