"""Stand-in for the ``tensorrt_llm`` package (NOT the real TensorRT-LLM).

Mirrors the hook points that the mm-handoff plugin touches, at upstream
commit 002f3cc3d0554c4ebd530d1354f96e89666d93b8 (per-file commits are named in
each module docstring and in ``tests/stand_in/README.md``). Importing it pulls
in nothing heavy: only the standard library and numpy.

Upstream's ``__init__`` eagerly imports ``LLM``, ``MultimodalEncoder``,
``SamplingParams`` and ``DisaggregatedParams``; here they resolve lazily.
"""

from .version import __version__

_STAND_IN = True

_LAZY = {
    "LLM": ("tensorrt_llm.llmapi.llm", "LLM"),
    "MultimodalEncoder": ("tensorrt_llm.llmapi.mm_encoder", "MultimodalEncoder"),
    "SamplingParams": ("tensorrt_llm.sampling_params", "SamplingParams"),
    "DisaggregatedParams": ("tensorrt_llm.disaggregated_params", "DisaggregatedParams"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        return getattr(importlib.import_module(module_name), attr)
    raise AttributeError(f"module 'tensorrt_llm' has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]
