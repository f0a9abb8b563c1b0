"""TensorRT-LLM glue: make the Qwen3-VL-family E -> PD multimodal handoff exact (TensorRT-LLM #20138).

Importing this package imports nothing from ``tensorrt_llm``; :func:`install` does, and raises
:class:`~mm_handoff.errors.EngineNotSupportedError` when it is absent, out of range, or a hook point
drifted. See ``docs/trtllm.md`` for the hook points, the policy at each, and worker processes.

Where a request is when the code runs: ``_encoder`` (the encoder's ``generate_async``),
``_admission`` (the PD side's ``_preprocess`` and the prefill method it calls), ``_worker`` (the
executor worker's ingress and context-phase slice); ``_hooks`` is the patch table naming each
wrapper, ``_lifecycle`` TensorRT-LLM's part of install/uninstall/status (the lifecycle itself is
:class:`mm_handoff.glue.instrumentor.Instrumentor`, which the vLLM glue shares), ``_carrier`` what travels
and what every side reads from a request, ``_prefill_request`` the patch-free PD path. Every check is
the core's (:mod:`mm_handoff.checks`); what a failed check leads to is :func:`mm_handoff.glue.policy.decide`'s.

>>> import mm_handoff.trtllm as glue
>>> glue.is_installed()
False
"""

from ._carrier import GRIDS_KEY, LAYOUT_KEY, VIDEO_METADATA_KEY
from ._hooks import PATCH_TABLE, PatchSpec
from ._lifecycle import SUPPORTED_VERSIONS, get_original, install, is_installed, status, uninstall
from ._prefill_request import PrefillRequest, prefill_request

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
