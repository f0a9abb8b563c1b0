"""``mm-handoff doctor``'s vLLM report: the version and its range, the hook point found in vLLM's files, the
``vllm.general_plugins`` entry point and whether ``MM_HANDOFF_VLLM_CHECK`` turns it on.

It reads :func:`mm_handoff.vllm.status` and the hook table and imports vLLM's module that holds the hook point;
nothing is patched. Ready (exit 0) when vLLM is in range, every hook point is there, the entry point is
registered (vLLM then loads it in each of its processes) and the switch reads as on or off; a switch that is
off is reported, not a failure (the check is opt-in: ``MM_HANDOFF_VLLM_CHECK=1 vllm serve ...``).
"""

from __future__ import annotations

import sys

from .._env import VLLM_CHECK, env_flag
from ..errors import HandoffError
from ..glue.hooks import hook_ok, hook_rows, print_hook_rows
from ..glue.instrumentor import supports
from . import _hooks
from ._lifecycle import SUPPORTED_VERSIONS, status
from .plugin import register

#: vLLM's entry-point group, which it loads in every process it starts
PLUGIN_GROUP = "vllm.general_plugins"
#: this package's entry in it
PLUGIN_VALUE = f"{register.__module__}:{register.__name__}"


def switch_state() -> str:
    """``on``, ``off``, or ``invalid (...)``: what ``MM_HANDOFF_VLLM_CHECK`` says."""
    try:
        return "on" if env_flag(VLLM_CHECK) else "off"
    except HandoffError as exc:
        return f"invalid ({exc})"


def plugin_registered() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == PLUGIN_VALUE for ep in entry_points(group=PLUGIN_GROUP))


def doctor_report() -> dict:
    report = status()
    report["version_ok"] = supports(report.get("vllm"), SUPPORTED_VERSIONS)
    report["hook_points"] = hook_rows(_hooks.HOOKS, report)
    report["plugin_registered"] = plugin_registered()
    report["switch"] = switch_state()
    report["ready"] = bool(report["version_ok"] and report["plugin_registered"]
                           and not report["switch"].startswith("invalid")
                           and all(map(hook_ok, report["hook_points"])))
    return report


def run_doctor(args=None, *, out=None) -> int:
    """Print the report; 0 when ready, 1 otherwise."""
    out = out or sys.stdout
    report = doctor_report()

    def line(text=""):
        print(text, file=out)

    version = report.get("vllm") or "not importable"
    line(f"vllm          {version}  (supported: {'; '.join(SUPPORTED_VERSIONS)}"
         f"{'' if report['version_ok'] else '  -> OUT OF RANGE'})")
    line(f"installed     {report['installed']}  (policy={report['policy']})")
    line(f"plugin        {PLUGIN_GROUP} {PLUGIN_VALUE}: "
         f"{'registered' if report['plugin_registered'] else 'NOT REGISTERED (reinstall mm-handoff next to vLLM)'}")
    switch = report["switch"]
    hint = {"on": "vLLM's processes install the check", "off": f"set {VLLM_CHECK}=1 in vLLM's processes to turn it on"}
    line(f"switch        {VLLM_CHECK}: {switch}" + (f"  ({hint[switch]})" if switch in hint else ""))
    print_hook_rows(report["hook_points"], line)
    line("ok" if report["ready"] else "not ready: see above")
    return 0 if report["ready"] else 1
