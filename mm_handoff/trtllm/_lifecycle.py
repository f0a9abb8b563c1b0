"""install / uninstall / is_installed / status / get_original: the lock, the gates, the flag.

The public functions own the lock, the version gate, the hook probe and the state; the per-hook work
is the patch table (:mod:`._targets`) applied through the ledger (:mod:`._ledger`).
"""

from __future__ import annotations

import importlib
import logging
from typing import Optional, Union

from ..errors import EngineNotSupportedError, HandoffError
from ..policy import Policy, resolve_policy
from ._compat import ENGINE, SUPPORTED_VERSIONS, engine_version, upstream_fix_fields, version_in_range
from ._hooks import make_hook
from ._ledger import find_owner, target_key
from ._state import LEDGER, LOCK, STATE
from ._targets import import_model_modules, probe

__all__ = ["install", "uninstall", "is_installed", "status", "get_original"]

log = logging.getLogger("mm_handoff.trtllm")


def _refuse(field: str, expected, actual, hint: Optional[str] = None) -> EngineNotSupportedError:
    return EngineNotSupportedError(field, expected, actual, hint=hint)


def _import_engine():
    try:
        return importlib.import_module(ENGINE)
    except Exception as exc:
        raise _refuse("tensorrt_llm", "an importable TensorRT-LLM", f"{type(exc).__name__}: {exc}",
                      hint="install it from NVIDIA's index, or do not call mm_handoff.trtllm.install()") from exc


def _check_version(version: Optional[str]) -> None:
    if version is None:
        raise _refuse("tensorrt_llm.__version__", " and ".join(SUPPORTED_VERSIONS), None)
    for requirement in SUPPORTED_VERSIONS:
        if not version_in_range(version, requirement):
            raise _refuse("tensorrt_llm version", requirement, version,
                          hint="mm-handoff's hook points were checked for that range only")


def _refuse_on_drift(points) -> None:
    for point in points:
        if point.state == "drifted":
            expected, actual = point.drift
            raise _refuse(f"hook {point.key}", expected, actual,
                          hint="the engine changed; mm-handoff refuses rather than wrap it")
        if point.state == "missing" and point.spec.required:
            raise _refuse(f"hook {point.key}", "present", point.reason,
                          hint="a required hook point is missing from this TensorRT-LLM")


def install(*, policy: Optional[Union[str, Policy]] = None) -> dict:
    """Patch TensorRT-LLM's hook points (see the patch table); returns :func:`status`.

    Idempotent: a second call logs "already installed" and changes nothing. Refuses with
    :class:`~mm_handoff.errors.EngineNotSupportedError` (one line naming the hook or the version)
    before touching anything. Stands down when upstream already carries the encoder layout.
    """
    resolved = resolve_policy(policy)
    with LOCK:
        if STATE.installed:
            log.info("mm-handoff: already installed (policy=%s); nothing changed", STATE.policy.value)
            return status()
        module = _import_engine()
        version = engine_version(module)
        _check_version(version)
        STATE.engine_version = version
        fix = upstream_fix_fields()
        STATE.upstream_fix_fields = fix
        if fix:
            STATE.standing_down = True
            log.warning("mm-handoff: TensorRT-LLM %s already carries the encoder layout "
                        "(DisaggregatedParams.%s); standing down, nothing patched", version, ", ".join(fix))
            return status()
        try:
            import_model_modules()
        except Exception as exc:
            raise _refuse("tensorrt_llm._torch.models.modeling_qwen3vl", "importable",
                          f"{type(exc).__name__}: {exc}") from exc
        points = probe()
        _refuse_on_drift(points)
        applied = []
        try:
            for point in points:
                if point.state == "found":
                    LEDGER.apply(point.cls, point.attr, make_hook(point.spec.kind, point.attr))
                    applied.append(point.key)
        except Exception:
            for key in reversed(applied):
                LEDGER.remove(key)
            raise
        STATE.policy, STATE.installed, STATE.standing_down = resolved, True, False
        log.info("mm-handoff: installed on TensorRT-LLM %s (policy=%s): %s", version, resolved.value,
                 ", ".join(applied))
        return status()


def uninstall() -> dict:
    """Switch every wrapper off, then restore the originals (own: put back; inherited: delete).

    A wrapper that someone wrapped on top of is left in place, switched off, with a warning.
    Harmless when nothing is installed.
    """
    with LOCK:
        if not STATE.installed:
            log.info("mm-handoff: not installed; nothing to uninstall")
            STATE.standing_down = False
            return status(probe_engine=False)
        LEDGER.switch_off_all()
        for record in reversed(LEDGER.records()):
            LEDGER.remove(record.key)
        STATE.installed = False
        return status(probe_engine=False)


def is_installed() -> bool:
    return STATE.installed


def get_original(target) -> object:
    """The engine's own function for ``"module:Qualname.attr"`` or ``(cls, "attr")``, whether or not
    mm-handoff is installed now (the first original ever recorded wins)."""
    if isinstance(target, tuple):
        cls, attr = target
        key = target_key(cls, attr)
    else:
        key = str(target)
        cls, attr = None, None
    with LOCK:
        original = LEDGER.get_original(key)
    if original is not None:
        return original
    if cls is None:
        module_name, _, rest = key.partition(":")
        qual, _, attr = rest.rpartition(".")
        cls = importlib.import_module(module_name)
        for part in qual.split("."):
            cls = getattr(cls, part)
    owner, raw = find_owner(cls, attr)
    if owner is None:
        raise AttributeError(f"{key}: no such attribute")
    return raw


def _hook_state(point) -> str:
    record = next((r for r in LEDGER.records() if r.key == point.key), None)
    if record is not None:
        return "patched" if LEDGER.is_current(record) else "wrapped over by another patch"
    if point.key in LEDGER.left_in_place():
        return "left in place (wrapped over)"
    return point.state


def status(*, probe_engine: bool = True) -> dict:
    """Where things stand: installed, policy, engine version and range, each hook point, upstream fix."""
    with LOCK:
        try:
            policy = (STATE.policy if STATE.installed else resolve_policy(None)).value
        except HandoffError as exc:
            policy = f"invalid ({exc})"
        report = {
            "installed": STATE.installed,
            "policy": policy,
            "tensorrt_llm": STATE.engine_version,
            "supported": list(SUPPORTED_VERSIONS),
            "upstream_fix_detected": bool(STATE.upstream_fix_fields),
            "upstream_fix_fields": list(STATE.upstream_fix_fields),
            "standing_down": STATE.standing_down,
            "hooks": [],
            "left_in_place": LEDGER.left_in_place(),
            "engine_error": None,
        }
        if not probe_engine:
            report["hooks"] = [{"target": r.key, "state": "patched" if LEDGER.is_current(r) else "wrapped over"}
                               for r in LEDGER.records()]
            return report
        try:
            module = importlib.import_module(ENGINE)
            report["tensorrt_llm"] = engine_version(module)
            fix = upstream_fix_fields()
            report["upstream_fix_detected"], report["upstream_fix_fields"] = bool(fix), fix
            import_model_modules()
            points = probe()
        except Exception as exc:
            report["engine_error"] = f"{type(exc).__name__}: {exc}"
            return report
        for point in points:
            report["hooks"].append({
                "kind": point.spec.kind,
                "target": point.key,
                "process": point.spec.process,
                "required": point.spec.required,
                "state": _hook_state(point),
                "reason": point.reason,
                "upstream": point.spec.upstream,
            })
        return report
