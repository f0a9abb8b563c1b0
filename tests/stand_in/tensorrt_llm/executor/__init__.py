"""Stand-in for ``tensorrt_llm/executor/__init__.py``."""

from .executor import GenerationExecutor
from .request import DEFAULT_REQUEST_PRIORITY, GenerationRequest
from .result import CompletionOutput, GenerationResult
from .utils import RequestError

__all__ = [
    "GenerationExecutor",
    "GenerationRequest",
    "GenerationResult",
    "CompletionOutput",
    "RequestError",
    "DEFAULT_REQUEST_PRIORITY",
]
