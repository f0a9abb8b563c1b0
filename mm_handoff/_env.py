"""Every ``MM_HANDOFF_*`` environment variable the package reads, and the one rule for reading a switch.

The test suites read a few more of their own (a checkpoint for the GPU parity test, the conformance
suite's options); each is named where it is read."""

from __future__ import annotations

import os

#: the values that turn a switch on (case-insensitive, surrounding blanks ignored)
TRUTHY = ("1", "true", "yes", "on")
#: the values that leave it off (unset is off too); any other value is an error, never a guess
FALSY = ("", "0", "false", "no", "off")

#: install the TensorRT-LLM glue in every Python process that starts (the start-up hook)
AUTOINSTALL = "MM_HANDOFF_AUTOINSTALL"
#: with the start-up hook on, a bad setting or a failed install is logged and the process serves without
#: the fix, instead of stopping (an explicit opt-out of failing closed)
ALLOW_UNPROTECTED = "MM_HANDOFF_ALLOW_UNPROTECTED"
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
#: bounds on one request, ``name=value,...`` (:class:`mm_handoff.reading.Limits`)
LIMITS = "MM_HANDOFF_LIMITS"
#: the Prometheus side of mm-handoff's metrics: unset = on when prometheus_client is importable, a switch value
#: (:data:`TRUTHY` / :data:`FALSY`) = on (prometheus_client required) / off; anything else is an error at install
METRICS = "MM_HANDOFF_METRICS"
#: where the offline tokenizers are cached (``<dir>/tokenizers``; default ``~/.cache/mm-handoff``)
CACHE = "MM_HANDOFF_CACHE"


def env_flag(name: str, environ=None) -> bool:
    """True when the variable holds one of :data:`TRUTHY`, False when it is unset or one of :data:`FALSY`.

    Anything else (``ture``, ``2``, ``enabled``) is a :class:`~mm_handoff.errors.HandoffError` naming the
    variable: a mistyped switch is never read as off (nor as on).
    """
    value = (os.environ if environ is None else environ).get(name, "")
    word = value.strip().lower()
    if word in TRUTHY:
        return True
    if word in FALSY:
        return False
    from .errors import HandoffError

    raise HandoffError(name, f"one of {'/'.join(TRUTHY)} (on) or {'/'.join(FALSY[1:])} or unset (off)", value)
