"""``mm-handoff doctor``'s SGLang report: the version and its range, and each hook point found in SGLang's files.

It reads :func:`mm_handoff.sglang.status` and the hook table and imports SGLang's modules that hold the hook
points; nothing is patched. Ready (exit 0) when SGLang is in range and every hook point is there. SGLang has no
switch of ours: the check runs in the processes the launcher starts (``examples/sglang_language_only.py``).
"""

from __future__ import annotations

import importlib
import sys

from ..glue.instrumentor import supports
from . import _hooks
from ._lifecycle import SUPPORTED_VERSIONS, status


def hook_table() -> list:
    """``(module, class, attribute)`` of each hook point (tuples, or rows of the shared hook-table format)."""
    return [(getattr(r, "module", None) or r[0], getattr(r, "qualname", None) or r[1],
             getattr(r, "attribute", None) or r[2]) for r in _hooks.HOOKS]


def probe(module: str, qualname: str, attribute: str) -> tuple[str, str]:
    """``("found", "")`` when ``module:qualname`` imports with a callable ``attribute``, else ``("missing", why)``."""
    try:
        owner = importlib.import_module(module)
        for part in qualname.split("."):
            owner = getattr(owner, part)
    except Exception as exc:  # a hook point that cannot be reached is reported, never raised
        return "missing", f"{module}:{qualname} not importable ({type(exc).__name__}: {exc})"
    if not callable(getattr(owner, attribute, None)):
        return "missing", f"{module}:{qualname} has no {attribute}"
    return "found", ""


def hook_rows(report: dict) -> list:
    """Each hook point with its state: the status row where status has one, else probed (found / missing)."""
    rows = {row["target"]: row for row in report.get("hooks", ())}
    out = []
    for module, qualname, attribute in hook_table():
        target = f"{module}:{qualname}.{attribute}"
        row = rows.get(target)
        state, reason = (row["state"], row.get("reason") or "") if row else probe(module, qualname, attribute)
        out.append({"target": target, "state": state, "reason": reason})
    return out


def doctor_report() -> dict:
    report = status()
    report["version_ok"] = supports(report.get("sglang"), SUPPORTED_VERSIONS)
    report["hook_points"] = hook_rows(report)
    report["ready"] = bool(report["version_ok"] and all(h["state"] in ("found", "patched", "wrapped over")
                                                        for h in report["hook_points"]))
    return report


def run_doctor(args=None, *, out=None) -> int:
    """Print the report; 0 when ready, 1 otherwise."""
    out = out or sys.stdout
    report = doctor_report()

    def line(text=""):
        print(text, file=out)

    version = report.get("sglang") or "not importable"
    line(f"sglang        {version}  (supported: {'; '.join(SUPPORTED_VERSIONS)}"
         f"{'' if report['version_ok'] else '  -> OUT OF RANGE'})")
    line(f"installed     {report['installed']}  (policy={report['policy']}; in the server's processes: "
         "examples/sglang_language_only.py)")
    for hook in report["hook_points"]:
        line(f"  [{hook['state']:>8}] {hook['target']}")
        if hook["reason"]:
            line(f"             {hook['reason']}")
    line("ok" if report["ready"] else "not ready: see above")
    return 0 if report["ready"] else 1
