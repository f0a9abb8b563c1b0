"""Stand-in for ``tensorrt_llm.bindings.executor`` (C++ bindings, pure Python here).

Only what ``DisaggregatedParams`` and ``MultimodalInput.to_binding`` use.
"""

import enum
from typing import Any, List, NamedTuple, Optional


class RequestType(enum.IntEnum):
    REQUEST_TYPE_CONTEXT_AND_GENERATION = 0
    REQUEST_TYPE_CONTEXT_ONLY = 1
    REQUEST_TYPE_GENERATION_ONLY = 2


class ContextPhaseParams(NamedTuple):
    first_gen_tokens: Optional[List[int]]
    req_id: Optional[int]
    opaque_state: Optional[bytes]
    draft_tokens: Optional[List[int]]
    ctx_dp_rank: Optional[int]
    ctx_info_endpoint: Optional[str]


class MultimodalInput:
    """Plain record standing in for the C++ ``executor.MultimodalInput``."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class Request:
    """Record standing in for the C++ ``executor.Request`` built by ``BaseWorker._enqueue_request``."""

    def __init__(
        self,
        *,
        client_id: int,
        input_token_ids: List[int],
        max_tokens: Optional[int] = None,
        multimodal_input: Optional[MultimodalInput] = None,
        multimodal_embedding: Any = None,
        mrope_config: Any = None,
        context_phase_params: Optional[ContextPhaseParams] = None,
        type: RequestType = RequestType.REQUEST_TYPE_CONTEXT_AND_GENERATION,
        **kwargs: Any,
    ) -> None:
        self.client_id = client_id
        self.input_token_ids = list(input_token_ids)
        self.max_tokens = max_tokens
        self.multimodal_input = multimodal_input
        self.context_phase_params = context_phase_params
        self.type = type
        self.py_multimodal_data = None
        self.py_disaggregated_params = None
