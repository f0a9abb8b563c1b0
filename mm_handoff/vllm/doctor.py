"""``mm-handoff doctor``'s vLLM report: the version and its range, the hook point found in vLLM's files, the
``vllm.general_plugins`` entry point and whether ``MM_HANDOFF_VLLM_CHECK`` turns it on.

It reads :func:`mm_handoff.vllm.status` and the hook table and imports vLLM's module that holds the hook point;
nothing is patched. Ready (exit 0) when vLLM is in range, every hook point is there, the entry point is
registered (vLLM then loads it in each of its processes) and the switch reads as on or off; a switch that is
off is reported, not a failure (the check is opt-in: ``MM_HANDOFF_VLLM_CHECK=1 vllm serve ...``).
"""

from __future__ import annotations

import importlib
import sys

from .._env import VLLM_CHECK, env_flag
from ..errors import HandoffError
from ..glue.instrumentor import supports
from . import _hooks
from ._lifecycle import SUPPORTED_VERSIONS, status
from .plugin import register

#: vLLM's entry-point group, which it loads in every process it starts
PLUGIN_GROUP = "vllm.general_plugins"
#: this package's entry in it
PLUGIN_VALUE = f"{register.__module__}:{register.__name__}"


def hook_table() -> list:
    """``(module, class, attribute)`` of each hook point (the shared row format, or the one-row table before it)."""
    rows = getattr(_hooks, "HOOKS", None)
    if rows is None:
        return [(_hooks.HOOK_MODULE, _hooks.HOOK_CLASS, "apply")]
    return [(getattr(r, "module", None) or r[0], getattr(r, "qualname", None) or r[1],
             getattr(r, "attribute", None) or r[2]) for r in rows]


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
    """Each hook point with its state: the status row where status has one (patched, wrapped over, or the state
    it found), else probed (found / missing)."""
    rows = {row["target"]: row for row in report.get("hooks", ())}
    out = []
    for module, qualname, attribute in hook_table():
        target = f"{module}:{qualname}.{attribute}"
        row = rows.get(target)
        state, reason = (row["state"], row.get("reason") or "") if row else probe(module, qualname, attribute)
        out.append({"target": target, "state": state, "reason": reason})
    return out


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
    report["hook_points"] = hook_rows(report)
    report["plugin_registered"] = plugin_registered()
    report["switch"] = switch_state()
    report["ready"] = bool(report["version_ok"] and report["plugin_registered"]
                           and not report["switch"].startswith("invalid")
                           and all(h["state"] in ("found", "patched", "wrapped over") for h in report["hook_points"]))
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
    for hook in report["hook_points"]:
        line(f"  [{hook['state']:>8}] {hook['target']}")
        if hook["reason"]:
            line(f"             {hook['reason']}")
    line("ok" if report["ready"] else "not ready: see above")
    return 0 if report["ready"] else 1
