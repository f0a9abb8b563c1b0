"""Stand-in for ``tensorrt_llm._torch.pyexecutor.engine.runners.decoder``."""

from .runner import DecoderRunner

__all__ = ["DecoderRunner"]
