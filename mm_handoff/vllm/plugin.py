"""vLLM's ``vllm.general_plugins`` entry point: vLLM calls :func:`register` in every process it starts.

It installs the in-engine check only when ``MM_HANDOFF_VLLM_CHECK`` is set to a truthy value
(1/true/yes/on), so installing mm-handoff next to vLLM changes nothing by itself.
"""

from __future__ import annotations

from .._env import VLLM_CHECK, env_flag


def register() -> None:
    """Install the check when ``MM_HANDOFF_VLLM_CHECK`` is on; otherwise do nothing."""
    if env_flag(VLLM_CHECK):
        from ._lifecycle import install

        install()
