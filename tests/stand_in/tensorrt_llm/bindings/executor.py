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
