"""install / uninstall / is_installed / status / get_original: the lock, the version gate, the state.

The public functions own the lock, the version gate, the hook probe and the state; the per-hook work
is the patch table (:mod:`._targets`), each row naming its wrapper, applied through the ledger
(:mod:`mm_handoff._ledger`). The policy reaches each wrapper as an argument bound at install time.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading

import attrs

from .._ledger import Ledger, find_owner, target_key
from ..errors import EngineNotSupportedError, HandoffError
from ..policy import Policy, resolve_policy
from ._targets import import_model_modules, probe, wrapper_name

__all__ = ["install", "uninstall", "is_installed", "status", "get_original", "SUPPORTED_VERSIONS",
           "version_in_range", "version_supported", "distribution_version", "ENGINE"]

log = logging.getLogger("mm_handoff.trtllm")

ENGINE = "tensorrt_llm"

#: Releases whose hook points this glue was checked against (requirement-string form, as OTel does):
#: the conformance suite (tests/upstream, docs/trtllm.md's table) ran upstream's own files of 1.3.0rc25's
#: code (the release of upstream issue #20138). Older releases use ``get_prompt_token_ids``, which
#: mm-handoff does not support.
SUPPORTED_VERSIONS = ("tensorrt_llm >= 1.3.0rc25, < 1.5",)

#: ``DisaggregatedParams`` fields that mean upstream carries the encoder layout itself.
UPSTREAM_FIX_FIELDS = ("multimodal_layout",)

#: Upstream carriers of (part of) the layout, and what mm-handoff does when the class has the field.
UPSTREAM_CARRIERS = {
    "multimodal_layout": "present: upstream carries the encoder's layout; mm-handoff stands down",
    "multimodal_item_runs": "present: item runs only, not the encoder's expanded prompt; mm-handoff stays "
                            "installed and ships its own layout",
    "multimodal_hash_positions": "present: hash positions only; mm-handoff stays installed",
}

#: where ``llm.py`` imports ``DisaggregatedParams`` from, newest first (it moved to executor/params)
_PARAMS_MODULES = ("llmapi.llm", "executor.params.disaggregation", "disaggregated_params")


# ------------------------------------------------------------------------------- version gate
def version_in_range(version: str, requirement: str) -> bool:
    """Whether ``version`` satisfies ``requirement`` (``"name >= A, < B"``), by PEP 440 (``packaging``,
    a dependency of TensorRT-LLM). Pre-releases count as inside the range, since TensorRT-LLM ships
    mostly ``rc`` builds; an unparsable version is outside every range."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        specifier = Requirement(requirement).specifier
    except InvalidRequirement:
        specifier = SpecifierSet(requirement)
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def version_supported(version: str | None) -> bool:
    return version is not None and bool(version) and all(version_in_range(version, r) for r in SUPPORTED_VERSIONS)


def distribution_version(name: str) -> str | None:
    """An installed distribution's version from its metadata, without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None
    except Exception:  # broken metadata must not break a status report
        return None


def engine_version(module) -> str | None:
    """``tensorrt_llm.__version__`` (the imported module's, else the distribution's)."""
    value = getattr(module, "__version__", None)
    if isinstance(value, str) and value:
        return value
    return distribution_version(ENGINE) or distribution_version("tensorrt-llm")


def params_class():
    """The ``DisaggregatedParams`` class ``llm.py`` actually uses (its own import), else the newest module's."""
    for name in _PARAMS_MODULES:
        try:
            cls = getattr(importlib.import_module(f"{ENGINE}.{name}"), "DisaggregatedParams", None)
        except Exception:
            continue
        if isinstance(cls, type):
            return cls
    return None


def _params_fields() -> dict:
    return getattr(params_class(), "__dataclass_fields__", None) or {}


def upstream_fix_fields() -> list:
    """The ``DisaggregatedParams`` fields that show upstream carries the layout itself (empty: no fix)."""
    fields = _params_fields()
    return [name for name in UPSTREAM_FIX_FIELDS if name in fields]


def upstream_carriers() -> dict:
    """``{field: what mm-handoff does}`` for each upstream layout carrier the params class has."""
    fields = _params_fields()
    return {name: decision for name, decision in UPSTREAM_CARRIERS.items() if name in fields}


def _refuse(field: str, expected, actual, hint: str | None = None) -> EngineNotSupportedError:
    return EngineNotSupportedError(field, expected, actual, hint=hint)


def _import_engine():
    try:
        return importlib.import_module(ENGINE)
    except Exception as exc:
        raise _refuse("tensorrt_llm", "an importable TensorRT-LLM", f"{type(exc).__name__}: {exc}",
                      hint="install it from NVIDIA's index, or do not call mm_handoff.trtllm.install()") from exc


def _check_version(version: str | None) -> None:
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


# ------------------------------------------------------------------------------------- state
@attrs.define
class _State:
    """Process-wide installer state; read and changed under :data:`_LOCK`."""

    installed: bool = False
    #: the policy bound into every wrapper by the last install()
    policy: Policy = Policy.RAISE
    #: upstream already carries the layout: install() stood down without patching
    standing_down: bool = False
    upstream_fix_fields: list = attrs.Factory(list)
    engine_version: str | None = None


_LOCK = threading.RLock()
_LEDGER = Ledger()
_STATE = _State()


# --------------------------------------------------------------------------------- lifecycle
def install(*, policy: str | Policy | None = None) -> dict:
    """Patch TensorRT-LLM's hook points (see the patch table); returns :func:`status`.

    Idempotent: a second call logs "already installed" and changes nothing. Refuses with
    :class:`~mm_handoff.errors.EngineNotSupportedError` (one line naming the hook or the version)
    before touching anything. Stands down when upstream already carries the encoder layout.
    """
    resolved = resolve_policy(policy)
    with _LOCK:
        if _STATE.installed:
            log.info("mm-handoff: already installed (policy=%s); nothing changed", _STATE.policy.value)
            return status()
        version = engine_version(_import_engine())
        _check_version(version)
        _STATE.engine_version = version
        _STATE.upstream_fix_fields = fix = upstream_fix_fields()
        if fix:
            _STATE.standing_down = True
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
        applied = _apply([p for p in points if p.state == "found"], resolved)
        _STATE.policy, _STATE.installed, _STATE.standing_down = resolved, True, False
        log.info("mm-handoff: installed on TensorRT-LLM %s (policy=%s): %s", version, resolved.value,
                 ", ".join(applied))
        return status()


def _apply(points, policy: Policy) -> list:
    """Wrap every point with its row's wrapper (policy bound); all or nothing."""
    applied = []
    try:
        for point in points:
            _LEDGER.apply(point.cls, point.attr, functools.partial(point.wrapper, policy=policy))
            applied.append(point.key)
    except Exception:
        for key in reversed(applied):
            _LEDGER.remove(key)
        raise
    return applied


def uninstall() -> dict:
    """Switch every wrapper off, then restore the originals (own: put back; inherited: delete).

    A wrapper that someone wrapped on top of is left in place, switched off, with a warning.
    Harmless when nothing is installed.
    """
    with _LOCK:
        if not _STATE.installed:
            log.info("mm-handoff: not installed; nothing to uninstall")
            _STATE.standing_down = False
            return status(probe_engine=False)
        _LEDGER.switch_off_all()
        for record in reversed(_LEDGER.records()):
            _LEDGER.remove(record.key)
        _STATE.installed = False
        return status(probe_engine=False)


def is_installed() -> bool:
    return _STATE.installed


def get_original(target) -> object:
    """The engine's own function for ``"module:Qualname.attr"`` or ``(cls, "attr")``, whether or not
    mm-handoff is installed now (the first original ever recorded wins)."""
    if isinstance(target, tuple):
        cls, attr = target
        key = target_key(cls, attr)
    else:
        key = str(target)
        cls, attr = None, None
    with _LOCK:
        original = _LEDGER.get_original(key)
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


# ------------------------------------------------------------------------------------ status
def _hook_state(point) -> str:
    record = next((r for r in _LEDGER.records() if r.key == point.key), None)
    if record is not None:
        return "patched" if _LEDGER.is_current(record) else "wrapped over by another patch"
    if point.key in _LEDGER.left_in_place():
        return "left in place (wrapped over)"
    return point.state


def _hook_row(point) -> dict:
    state, reason = _hook_state(point), point.reason
    if state == "missing" and not point.spec.required:  # an optional hook that moved or vanished
        state, reason = "unavailable", f"slice check unavailable on this version: {reason}"
    return {"wrapper": wrapper_name(point.wrapper), "target": point.key, "process": point.spec.process,
            "required": point.spec.required, "state": state, "reason": reason, "upstream": point.spec.upstream}


def status(*, probe_engine: bool = True) -> dict:
    """Where things stand: installed, policy, engine version and range, each hook point, upstream fix."""
    with _LOCK:
        try:
            policy = (_STATE.policy if _STATE.installed else resolve_policy(None)).value
        except HandoffError as exc:
            policy = f"invalid ({exc})"
        report = {
            "installed": _STATE.installed,
            "policy": policy,
            "tensorrt_llm": _STATE.engine_version,
            "supported": list(SUPPORTED_VERSIONS),
            "upstream_fix_detected": bool(_STATE.upstream_fix_fields),
            "upstream_fix_fields": list(_STATE.upstream_fix_fields),
            "standing_down": _STATE.standing_down,
            "upstream_carriers": {},
            "hooks": [],
            "left_in_place": _LEDGER.left_in_place(),
            "engine_error": None,
        }
        if not probe_engine:
            report["hooks"] = [{"target": r.key, "state": "patched" if _LEDGER.is_current(r) else "wrapped over"}
                               for r in _LEDGER.records()]
            return report
        try:
            report["tensorrt_llm"] = engine_version(importlib.import_module(ENGINE))
            fix = upstream_fix_fields()
            report["upstream_fix_detected"], report["upstream_fix_fields"] = bool(fix), fix
            report["upstream_carriers"] = upstream_carriers()
            import_model_modules()
            points = probe()
        except Exception as exc:
            report["engine_error"] = f"{type(exc).__name__}: {exc}"
            return report
        report["hooks"] = [_hook_row(point) for point in points]
        return report
