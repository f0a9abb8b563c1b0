"""``mm-handoff doctor``: versions, each hook point found or missing, patch status, upstream fix.

Exit code 0 when TensorRT-LLM is importable, in range and every required hook point is found (or
upstream already has the fix); 1 otherwise. Nothing is patched by running it.
"""

from __future__ import annotations

import sys

from .._version import __version__
from ._compat import SUPPORTED_VERSIONS, distribution_version, version_in_range
from ._lifecycle import status

__all__ = ["run_doctor", "doctor_report"]


def doctor_report() -> dict:
    report = status()
    report["mm_handoff"] = __version__
    report["transformers"] = distribution_version("transformers")
    version = report.get("tensorrt_llm")
    report["version_ok"] = bool(version) and all(version_in_range(version, r) for r in SUPPORTED_VERSIONS)
    return report


def _ok(report: dict) -> bool:
    if report["engine_error"] or not report["version_ok"]:
        return False
    if report["upstream_fix_detected"]:
        return True
    return all(h["state"] not in ("missing", "drifted") or not h["required"] for h in report["hooks"]) \
        and not any(h["state"] == "drifted" for h in report["hooks"])


def run_doctor(args=None, *, out=None) -> int:
    out = out or sys.stdout
    report = doctor_report()
    line = lambda text="": print(text, file=out)  # noqa: E731
    line(f"mm_handoff    {report['mm_handoff']}")
    line(f"tensorrt_llm  {report['tensorrt_llm'] or 'not importable'}"
         f"  (supported: {'; '.join(SUPPORTED_VERSIONS)}{'' if report['version_ok'] or not report['tensorrt_llm'] else '  -> OUT OF RANGE'})")
    line(f"transformers  {report['transformers'] or 'not installed'}")
    line(f"installed     {report['installed']}  (policy={report['policy']})")
    if report["engine_error"]:
        line(f"engine        {report['engine_error']}")
    fix = report["upstream_fix_detected"]
    line(f"upstream fix  {'yes: DisaggregatedParams.' + ', '.join(report['upstream_fix_fields']) + ' (mm-handoff stands down)' if fix else 'no'}")
    if report["hooks"]:
        line()
        line("hook points")
    for hook in report["hooks"]:
        need = "required" if hook["required"] else "optional"
        line(f"  [{hook['state']:>8}] {hook['target']}  ({hook['kind']}, {hook['process']} process, {need})")
        if hook["reason"]:
            line(f"             {hook['reason']}")
    for key in report["left_in_place"]:
        line(f"  [left in place] {key}: wrapped over by another patch; mm-handoff's layer is switched off")
    ok = _ok(report)
    line()
    line("ok" if ok else "not ready: see above")
    return 0 if ok else 1
