"""install / uninstall / is_installed / status / get_original for TensorRT-LLM.

The lifecycle itself (lock, state, version gate, the ledger, idempotent install and uninstall) is the
shared :class:`mm_handoff.glue.instrumentor.Instrumentor`; this module supplies TensorRT-LLM's part: the
supported range, the upstream carriers of the layout, and the patch table's rows (:mod:`._hooks`),
each naming its wrapper and check point. The policy reaches each wrapper in its check point
(:class:`mm_handoff.glue.checkpoint.CheckPoint`), bound at install time.

What install does is decided by what the installed files have, not by the version string:

* ``mode="carry"``: ``DisaggregatedParams`` has no ``multimodal_layout``; mm-handoff carries the encoder's
  layout itself and answers the prefill method from it (every row of the patch table);
* ``mode="validate"``: upstream carries the layout (``DisaggregatedParams.multimodal_layout``) and no longer
  calls the prefill method for a request that carries it: such a request is never rewritten; admission
  reads upstream's carried layout as a ``HandoffLayout`` and accepts or refuses it
  (:mod:`._upstream_layout`), the slice and ingress checks stay. The prefill hook stays installed for
  upstream's own compatibility path only (a request without ``multimodal_layout``, from an older encoder,
  for which upstream falls back to rebuilding the prompt from text: the #20138 bug).

Either way the context-phase slice check goes wherever the installed version has the slice (one of the
``role="slice"`` rows); when none resolves, install logs an error, ``status()["slice_check"]`` says
``placed: False`` with the reason, and ``mm-handoff doctor`` prints it.
"""

from __future__ import annotations

import importlib
import logging

from ..errors import EngineNotSupportedError
from ..glue.instrumentor import Instrumentor, engine_version, supports
from ..glue.policy import Policy
from ._hooks import import_model_modules, probe, wrapper_name

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
    "multimodal_layout": "present: upstream carries the encoder's layout; mm-handoff validates it (admission, "
                         "slice, ingress) and rewrites no request that carries it",
    "multimodal_item_runs": "present: item runs only, not the encoder's expanded prompt; mm-handoff stays "
                            "installed and ships its own layout",
    "multimodal_hash_positions": "present: hash positions only; mm-handoff stays installed",
}

#: where ``llm.py`` imports ``DisaggregatedParams`` from, newest first (it moved to executor/params)
_PARAMS_MODULES = ("llmapi.llm", "executor.params.disaggregation", "disaggregated_params")


def version_supported(version: str | None) -> bool:
    return supports(version, SUPPORTED_VERSIONS)


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


MODE_CARRY = "carry"
MODE_VALIDATE = "validate"
#: what each mode means, for status() and doctor
MODES = {
    MODE_CARRY: "mm-handoff carries the encoder's layout and answers the prefill from it",
    MODE_VALIDATE: "upstream carries the layout (DisaggregatedParams.multimodal_layout); mm-handoff validates it "
                   "at admission, never rewrites a request that carries it, and keeps the slice and ingress checks",
}


def slice_check(points, states: dict | None = None) -> dict:
    """Whether the context-phase slice check is placed: ``{"placed", "where", "reason"}``.

    Placed when at least one ``role="slice"`` row resolved (``states``: the status rows' states by target,
    where a found row counts only when it is patched or found)."""
    rows = [p for p in points if p.hook.role == "slice"]
    ok = ("found", "patched")
    where = [p.key for p in rows if p.state == "found" and (states is None or states.get(p.key) in ok)]
    if where:
        return {"placed": True, "where": where, "reason": ""}
    reason = "; ".join(p.reason or f"{p.key}: {p.state}" for p in rows) or "no slice row in the patch table"
    return {"placed": False, "where": [],
            "reason": f"none of the places upstream has sliced the context request's mRoPE ids is here ({reason})"}


def _refuse_on_drift(points) -> None:
    for point in points:
        if point.state == "drifted":
            expected, actual = point.drift
            raise EngineNotSupportedError(f"hook {point.key}", expected, actual,
                          hint="the engine changed; mm-handoff refuses rather than wrap it")
        if point.state == "missing" and point.hook.required:
            raise EngineNotSupportedError(f"hook {point.key}", "present", point.reason,
                          hint="a required hook point is missing from this TensorRT-LLM")


# ------------------------------------------------------------------------------- instrumentor
class TensorRTLLMInstrumentor(Instrumentor):
    """The TensorRT-LLM glue's part of the lifecycle: the upstream carriers, the patch table's rows."""

    engine = ENGINE
    label = "trtllm"
    distributions = (ENGINE, "tensorrt-llm")
    install_hint = "install it from NVIDIA's index, or do not call mm_handoff.trtllm.install()"

    def __init__(self) -> None:
        super().__init__(log)
        #: kept for status() compatibility: install no longer stands down (upstream's carrier -> mode=validate)
        self.standing_down = False
        self.upstream_fix_fields: list = []
        #: "carry" | "validate" (see the module doc); None before install
        self.mode: str | None = None

    def instrumentation_dependencies(self) -> tuple[str, ...]:
        return SUPPORTED_VERSIONS

    def _instrument(self, policy: Policy) -> bool:
        """Probe every row, refuse drift, patch; the mode follows upstream's carrier (see the module doc)."""
        self.upstream_fix_fields = fix = upstream_fix_fields()
        mode = MODE_VALIDATE if fix else MODE_CARRY
        try:
            import_model_modules()
        except Exception as exc:
            raise EngineNotSupportedError("tensorrt_llm._torch.models.modeling_qwen3vl", "importable",
                                          f"{type(exc).__name__}: {exc}") from exc
        points = probe()
        _refuse_on_drift(points)
        applied = self.apply([(p.hook, p.cls, p.attr) for p in points if p.state == "found"], policy)
        self.standing_down, self.mode = False, mode
        if fix:
            log.warning("mm-handoff: TensorRT-LLM %s carries the encoder layout itself (DisaggregatedParams.%s): "
                        "mode=validate; a request carrying it is validated, never rewritten (the prefill hook "
                        "answers only upstream's fallback for requests without it); the slice and ingress "
                        "checks stay", self.engine_version, ", ".join(fix))
        placed = slice_check(points)
        if not placed["placed"]:
            log.error("mm-handoff: the context-phase mRoPE slice check could NOT be placed on TensorRT-LLM %s: %s. "
                      "A mismatch that gets past admission and worker ingress would be cut silently at the slice",
                      self.engine_version, placed["reason"])
        log.info("mm-handoff: installed on TensorRT-LLM %s (mode=%s, policy=%s): %s", self.engine_version, mode,
                 policy.value, ", ".join(applied))
        return True

    def _uninstrument(self) -> None:
        self.standing_down, self.mode = False, None

    def _status(self, report: dict, probe_engine: bool) -> None:
        report.update({"upstream_fix_detected": bool(self.upstream_fix_fields),
                       "upstream_fix_fields": list(self.upstream_fix_fields), "standing_down": self.standing_down,
                       "mode": self.mode, "upstream_carriers": {}, "engine_error": None,
                       "slice_check": {"placed": None, "where": [], "reason": "engine not probed"}})
        if not probe_engine:
            return
        try:
            report[ENGINE] = engine_version(importlib.import_module(ENGINE), self.distributions)
            fix = upstream_fix_fields()
            report["upstream_fix_detected"], report["upstream_fix_fields"] = bool(fix), fix
            report["upstream_carriers"] = upstream_carriers()
            import_model_modules()
            points = probe()
        except Exception as exc:
            report["engine_error"] = f"{type(exc).__name__}: {exc}"
            report["hooks"] = []
            report["slice_check"] = {"placed": False, "where": [], "reason": report["engine_error"]}
            return
        mode = self.mode or (MODE_VALIDATE if fix else MODE_CARRY)
        report["mode"] = mode
        report["hooks"] = [self._hook_row(point, mode) for point in points]
        report["slice_check"] = slice_check(points, states={row["target"]: row["state"] for row in report["hooks"]})

    def _hook_state(self, point) -> str:
        record = next((r for r in self.ledger.records() if r.key == point.key), None)
        if record is not None:
            return "patched" if self.ledger.is_current(record) else "wrapped over by another patch"
        if point.key in self.ledger.left_in_place():
            return "left in place (wrapped over)"
        return point.state

    def _hook_row(self, point, mode: str = "carry") -> dict:
        state, reason = self._hook_state(point), point.reason
        if state == "missing" and not point.hook.required:  # an optional hook that moved or vanished
            what = "slice check" if point.hook.role == "slice" else "check"
            state, reason = "unavailable", f"{what} unavailable on this version: {reason}"
        elif mode == MODE_VALIDATE and point.hook.role == "prefill":
            reason = ("mode=validate: upstream calls it only for a request without multimodal_layout (its fallback "
                      "that rebuilds the prompt from text); a request carrying the layout is validated, not rewritten")
        return {"wrapper": wrapper_name(point.wrapper), "target": point.key, "check_point": point.hook.check_point,
                "process": point.hook.process,
                "required": point.hook.required, "state": state, "reason": reason, "upstream": point.hook.upstream}


_TRTLLM = TensorRTLLMInstrumentor()


def install(*, policy: str | Policy | None = None) -> dict:
    """Patch TensorRT-LLM's hook points (see the patch table); returns :func:`status`.

    Idempotent: a second call logs "already installed" and changes nothing. Refuses with
    :class:`~mm_handoff.errors.EngineNotSupportedError` (one line naming the hook or the version)
    before touching anything. When upstream carries the encoder layout itself (``multimodal_layout``), installs
    in ``mode="validate"`` (see the module doc); ``status()["mode"]`` says which.
    """
    return _TRTLLM.install(policy=policy)


def uninstall() -> dict:
    """Switch every wrapper off, then restore the originals; harmless when nothing is installed."""
    return _TRTLLM.uninstall()


def is_installed() -> bool:
    return _TRTLLM.is_installed()


def get_original(target) -> object:
    """The engine's own function for ``"module:Qualname.attr"`` or ``(cls, "attr")``, whether or not
    mm-handoff is installed now (the first original ever recorded wins)."""
    return _TRTLLM.get_original(target)


def status(*, probe_engine: bool = True) -> dict:
    """Where things stand: installed, policy, engine version and range, each hook point, upstream fix."""
    return _TRTLLM.status(probe_engine=probe_engine)
