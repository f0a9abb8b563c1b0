"""install / uninstall / status: the check inside SGLang's EPD prefill side, on the lifecycle every engine
glue shares (:class:`mm_handoff.glue.instrumentor.Instrumentor`); the hook table and its wrappers are :mod:`._hooks`'.
"""

from __future__ import annotations

import logging

from ..glue.instrumentor import Instrumentor
from ..glue.policy import Policy
from ._hooks import hook_points

log = logging.getLogger("mm_handoff.sglang")

#: Releases whose hook points this glue was checked against (``make test-sglang`` runs SGLang 0.5.23's Python)
SUPPORTED_VERSIONS = ("sglang >= 0.5.23, < 0.5.24",)


class SGLangInstrumentor(Instrumentor):
    """The SGLang glue's part of the lifecycle: the two hook points of the module doc."""

    engine = "sglang"
    label = "sglang"
    distributions = ("sglang",)
    install_hint = "install SGLang (docs/sglang.md: on CPU, pip install --no-deps sglang==0.5.23 plus its imports)"

    def instrumentation_dependencies(self) -> tuple[str, ...]:
        return SUPPORTED_VERSIONS

    def _instrument(self, policy: Policy) -> bool:
        applied = self.apply(hook_points(), policy)
        log.info("mm-handoff: SGLang check installed on %s (policy=%s)", ", ".join(applied), policy.value)
        return True


_SGLANG = SGLangInstrumentor(log)


def install(*, policy: str | Policy | None = None) -> dict:
    """Wrap SGLang's EPD prefill hook points (idempotent); returns :func:`status`.

    Raises :class:`~mm_handoff.errors.EngineNotSupportedError` before touching anything when SGLang is
    missing, outside :data:`SUPPORTED_VERSIONS`, or a hook point is missing. ``policy`` (else
    ``$MM_HANDOFF_POLICY``): ``raise`` (default), ``rebuild`` or ``fallback`` (see the module doc).
    """
    return _SGLANG.install(policy=policy)


def uninstall() -> dict:
    """Switch the wrappers off and restore SGLang's own methods; harmless when not installed."""
    _SGLANG.uninstall()
    return status()


def is_installed() -> bool:
    return _SGLANG.is_installed()


def status() -> dict:
    """Installed or not, the policy, SGLang's version and range, and the hook points' state."""
    return _SGLANG.status()
