"""Every ``MM_HANDOFF_*`` environment variable the package reads, and the one rule for reading a switch.

The test suites read a few more of their own (a checkpoint for the GPU parity test, the conformance
suite's options); each is named where it is read."""

from __future__ import annotations

import os

__all__ = ["TRUTHY", "env_flag", "AUTOINSTALL", "POLICY", "BLOCK_ADAPTERS", "VLLM_CHECK", "TRTLLM_SRC", "SLOW", "CACHE",
           "LIMITS"]

#: the values that turn a switch on (case-insensitive, surrounding blanks ignored)
TRUTHY = ("1", "true", "yes", "on")

#: install the TensorRT-LLM glue in every Python process that starts (the start-up hook)
AUTOINSTALL = "MM_HANDOFF_AUTOINSTALL"
#: what to do on a mismatch: raise, rebuild or fallback
POLICY = "MM_HANDOFF_POLICY"
#: comma-separated entry-point names of the ``mm_handoff.adapters`` group to skip
BLOCK_ADAPTERS = "MM_HANDOFF_BLOCK_ADAPTERS"
#: install the vLLM check in every vLLM process (its ``vllm.general_plugins`` entry point)
VLLM_CHECK = "MM_HANDOFF_VLLM_CHECK"
#: a TensorRT-LLM source tree for the conformance suite
TRTLLM_SRC = "MM_HANDOFF_TRTLLM_SRC"
#: run the slow test cases too
SLOW = "MM_HANDOFF_SLOW"
#: bounds on one request, ``name=value,...`` (:class:`mm_handoff.limits.Limits`)
LIMITS = "MM_HANDOFF_LIMITS"
#: where the offline tokenizers are cached (``<dir>/tokenizers``; default ``~/.cache/mm-handoff``)
CACHE = "MM_HANDOFF_CACHE"


def env_flag(name: str, environ=None) -> bool:
    """True when the variable holds one of :data:`TRUTHY`."""
    value = (os.environ if environ is None else environ).get(name, "")
    return value.strip().lower() in TRUTHY
