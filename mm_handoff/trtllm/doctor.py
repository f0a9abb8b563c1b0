"""``mm-handoff doctor``: versions, the mode, each TensorRT-LLM hook point found or missing, patch status.

The mode follows what the installed files have: ``carry`` (mm-handoff carries the encoder's layout) or
``validate`` (``DisaggregatedParams.multimodal_layout`` exists: upstream carries it, mm-handoff validates
it). The ``slice check`` line says where the context-phase mRoPE slice check goes, or, in capitals, that it
could not be placed (the context-phase slice moved somewhere the patch table does not know).

It also reads the ``.pth`` files of this interpreter's site directories: one that runs mm-handoff's start-up
hook but is not this release's :data:`~mm_handoff.trtllm._startup.PTH_LINE` (written by an older release,
whose line imports a module that has moved) stops every interpreter that imports TensorRT-LLM with the switch
on; doctor names it and the command that rewrites it.

Exit code 0 when TensorRT-LLM is importable, in range, every required hook point is found, the slice
check can be placed and no start-up line is stale; 1 otherwise. Nothing is patched by running it.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

from .._version import __version__
from ..glue.instrumentor import distribution_version, supports
from . import SUPPORTED_VERSIONS, status
from ._lifecycle import MODES
from ._startup import PTH_LINE

#: how to write this release's start-up line (docs/trtllm.md)
PTH_COMMAND = ("python -c \"import site, mm_handoff.trtllm._startup as s; open(site.getsitepackages()[0] + "
               "'/mm_handoff_autoinstall.pth', 'w').write(s.PTH_LINE + '\\n')\"")


def stale_startup_lines(directories=None) -> list:
    """The ``.pth`` files in ``directories`` (this interpreter's site directories) holding a line that runs
    mm-handoff's start-up hook other than this release's :data:`PTH_LINE`."""
    if directories is None:
        directories = [*site.getsitepackages(), site.getusersitepackages()]
    stale = []
    for directory in directories:
        for path in sorted(Path(directory).glob("*.pth")) if Path(directory).is_dir() else ():
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            if any("mm_handoff" in line and "_startup" in line and line.strip() != PTH_LINE for line in lines):
                stale.append(str(path))
    return stale


def doctor_report() -> dict:
    """:func:`mm_handoff.trtllm.status` plus the versions around it and whether the engine's is in range."""
    report = status()
    report["mm_handoff"] = __version__
    report["transformers"] = distribution_version("transformers")
    report["version_ok"] = supports(report.get("tensorrt_llm"), SUPPORTED_VERSIONS)
    report["stale_startup_lines"] = stale_startup_lines()
    return report


def _ok(report: dict) -> bool:
    if report["engine_error"] or not report["version_ok"] or report.get("stale_startup_lines"):
        return False
    if report.get("slice_check", {}).get("placed") is False:
        return False
    return not any(h["state"] == "drifted" or (h["state"] == "missing" and h["required"]) for h in report["hooks"])


def _engine_line(report: dict) -> str:
    out_of_range = "" if report["version_ok"] or not report["tensorrt_llm"] else "  -> OUT OF RANGE"
    return (f"tensorrt_llm  {report['tensorrt_llm'] or 'not importable'}"
            f"  (supported: {'; '.join(SUPPORTED_VERSIONS)}{out_of_range})")


def run_doctor(args=None, *, out=None) -> int:
    out = out or sys.stdout
    report = doctor_report()

    def line(text=""):
        print(text, file=out)

    line(_engine_line(report))
    line(f"transformers  {report['transformers'] or 'not installed'}")
    line(f"installed     {report['installed']}  (policy={report['policy']})")
    if report["engine_error"]:
        line(f"engine        {report['engine_error']}")
    fields = ", ".join(report["upstream_fix_fields"])
    line(f"upstream fix  {f'yes: DisaggregatedParams.{fields} (upstream carries the layout)' if fields else 'no'}")
    if report.get("mode"):
        line(f"mode          {report['mode']}: {MODES.get(report['mode'], '')}")
    placed = report.get("slice_check") or {}
    if placed.get("placed"):
        line(f"slice check   placed: {', '.join(placed['where'])}")
    elif placed.get("placed") is False:
        line(f"slice check   NOT PLACED: {placed['reason']}")
    for field, decision in report.get("upstream_carriers", {}).items():
        line(f"carrier       DisaggregatedParams.{field}: {decision}")
    if report["hooks"]:
        line()
        line("hook points")
    for hook in report["hooks"]:
        need = "required" if hook["required"] else "optional"
        line(f"  [{hook['state']:>8}] {hook['target']}  ({hook['wrapper']}, {hook['process']} process, {need})")
        if hook["reason"]:
            line(f"             {hook['reason']}")
    for path in report.get("stale_startup_lines", ()):
        line(f"start-up line STALE: {path} runs an older release's hook (it stops every TensorRT-LLM import);")
        line(f"             rewrite it: {PTH_COMMAND}")
    for key in report["left_in_place"]:
        line(f"  [left in place] {key}: wrapped over by another patch; mm-handoff's layer is switched off")
    ok = _ok(report)
    line()
    line("ok" if ok else "not ready: see above")
    return 0 if ok else 1
