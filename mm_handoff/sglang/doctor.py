"""``mm-handoff doctor``'s SGLang report: the version and its range, and each hook point found in SGLang's files.

It reads :func:`mm_handoff.sglang.status` and the hook table and imports SGLang's modules that hold the hook
points; nothing is patched. Ready (exit 0) when SGLang is in range and every hook point is there. SGLang has no
switch of ours: the check runs in the processes the launcher starts (``examples/sglang_language_only.py``).
"""

from __future__ import annotations

import sys

from ..glue.hooks import hook_ok, hook_rows, print_hook_rows
from ..glue.instrumentor import supports
from . import _hooks
from ._lifecycle import SUPPORTED_VERSIONS, status


def doctor_report() -> dict:
    report = status()
    report["version_ok"] = supports(report.get("sglang"), SUPPORTED_VERSIONS)
    report["hook_points"] = hook_rows(_hooks.HOOKS, report)
    report["ready"] = bool(report["version_ok"] and all(map(hook_ok, report["hook_points"])))
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
    print_hook_rows(report["hook_points"], line)
    line("ok" if report["ready"] else "not ready: see above")
    return 0 if report["ready"] else 1
