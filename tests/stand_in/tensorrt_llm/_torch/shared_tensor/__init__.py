"""Stand-in for ``tensorrt_llm._torch.shared_tensor``."""

from .shared_tensor import SharedTensorContainer, _SharedTensorRebuildMethodRegistry

__all__ = ["SharedTensorContainer", "_SharedTensorRebuildMethodRegistry"]
