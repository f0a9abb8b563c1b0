"""TensorRT-LLM glue: make the Qwen3-VL-family E -> PD multimodal handoff exact (TensorRT-LLM #20138).

Importing this package imports nothing from ``tensorrt_llm``; :func:`install` does, and raises
:class:`~mm_handoff.errors.EngineNotSupportedError` when it is absent, out of range, or a hook point
drifted. See ``docs/trtllm.md`` for the hook points, the policy at each, and worker processes.

>>> import mm_handoff.trtllm as glue
>>> glue.is_installed()
False
"""

from ._carrier import GRIDS_KEY, LAYOUT_KEY, VIDEO_METADATA_KEY
from ._compat import SUPPORTED_VERSIONS
from ._lifecycle import get_original, install, is_installed, status, uninstall
from ._targets import PATCH_TABLE, PatchSpec
from .prefill import PrefillRequest, prefill_request

__all__ = [
    "install",
    "uninstall",
    "is_installed",
    "status",
    "get_original",
    "prefill_request",
    "PrefillRequest",
    "PATCH_TABLE",
    "PatchSpec",
    "SUPPORTED_VERSIONS",
    "LAYOUT_KEY",
    "GRIDS_KEY",
    "VIDEO_METADATA_KEY",
]
