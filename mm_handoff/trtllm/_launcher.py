"""``mm-handoff run -- CMD ...``: run a command with mm-handoff installed in every Python process it starts.

It writes a ``sitecustomize.py`` into a fresh private temporary directory, puts that directory first on
``PYTHONPATH``, sets ``MM_HANDOFF_AUTOINSTALL=1`` and ``exec``s the command. Every interpreter that
inherits the environment (the server, spawned and MPI-started executor workers, their children) runs the
start-up hook (:mod:`mm_handoff.trtllm._startup`, next to this file). A ``sitecustomize`` that was already on
the path still runs: the generated one chains to the next one it finds.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence

from .. import _env
from ._startup import GUARD, setting_problems

#: the generated ``sitecustomize.py``: the start-up guard (:data:`mm_handoff.trtllm._startup.GUARD`, which fails closed
#: also where mm-handoff itself does not import), then a chain to the next ``sitecustomize`` on the path
SITECUSTOMIZE = '''"""Written by `mm-handoff run`: install mm-handoff's TensorRT-LLM glue, then chain to the next
sitecustomize."""
''' + GUARD + '''

def _chain_next_sitecustomize():
    import importlib.machinery
    import importlib.util
    here = _os.path.dirname(_os.path.abspath(__file__))
    for entry in list(_sys.path):
        if _os.path.abspath(entry or _os.getcwd()) == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry or _os.getcwd()])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


_chain_next_sitecustomize()
'''


def _ignores_the_hook(command: Sequence[str]) -> str | None:
    """The option of a Python command line that makes its interpreter skip ``PYTHONPATH`` or ``site`` (``-E``,
    ``-I``, ``-S``, alone or in a cluster such as ``-IS``): there the start-up hook never runs."""
    if not os.path.basename(command[0]).startswith("python"):
        return None
    for arg in command[1:]:
        if arg in ("-c", "-m", "-") or not arg.startswith("-") or arg.startswith("--"):
            return None  # the program starts here (its own arguments are not the interpreter's)
        if arg[1:2] in ("W", "X", "Q") or any(ch in "EIS" for ch in arg[1:]):
            return arg if any(ch in "EIS" for ch in arg[1:]) else None
    return None


def _strip_separator(argv: Sequence[str]) -> list[str]:
    argv = list(argv or ())
    if argv and argv[0] == "--":
        argv = argv[1:]
    return argv


def prepare_environment(environ: dict | None = None) -> dict:
    """A copy of ``environ`` with the start-up hook on ``PYTHONPATH`` and autoinstall switched on."""
    env = dict(os.environ if environ is None else environ)
    boot = tempfile.mkdtemp(prefix="mm-handoff-startup-")
    with open(os.path.join(boot, "sitecustomize.py"), "w", encoding="utf-8") as f:
        f.write(SITECUSTOMIZE)
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = boot if not existing else boot + os.pathsep + existing
    env[_env.AUTOINSTALL] = "1"
    return env


def run_command(argv: Sequence[str]) -> int:
    """Exec ``argv`` (a leading ``--`` is dropped) with the start-up hook in place; returns only on error."""
    command = _strip_separator(argv)
    if not command:
        print("mm-handoff: error: run needs a command: mm-handoff run -- CMD [ARGS...]", file=sys.stderr)
        return 2
    ignoring = _ignores_the_hook(command)
    if ignoring is not None:
        print(f"mm-handoff: error: {command[0]} {ignoring} skips PYTHONPATH or site, so mm-handoff's start-up hook "
              "would not run in it: drop the option, or call mm_handoff.trtllm.install() in the program",
              file=sys.stderr)
        return 2
    env = prepare_environment()
    problems = setting_problems(env)
    allowed = _env.ALLOW_UNPROTECTED not in {p.field for p in problems} and _env.env_flag(_env.ALLOW_UNPROTECTED, env)
    if problems and not allowed:  # every process it starts would stop
        print(f"mm-handoff: error: {problems[0]}", file=sys.stderr)
        return 2
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"mm-handoff: error: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - exec does not return
