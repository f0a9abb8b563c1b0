"""``mm-handoff run -- CMD ...``: run a command with mm-handoff installed in every Python process it starts.

It writes a ``sitecustomize.py`` into a fresh private temporary directory, puts that directory first on
``PYTHONPATH``, sets ``MM_HANDOFF_AUTOINSTALL=1`` and ``exec``s the command. Every interpreter that
inherits the environment (the server, spawned and MPI-started executor workers, their children) runs the
start-up hook (:mod:`mm_handoff._startup`, next to this file). A ``sitecustomize`` that was already on
the path still runs: the generated one chains to the next one it finds.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence

from . import _env
from ._startup import EXIT_CODE, setting_problems

__all__ = ["run_command", "prepare_environment", "SITECUSTOMIZE"]

#: the generated ``sitecustomize.py``; its switch reads the variable inline (an interpreter with the variable
#: unset or off imports nothing of mm-handoff); it fails closed as :mod:`mm_handoff._startup` does, also where
#: mm-handoff itself does not import (that interpreter may not import TensorRT-LLM)
SITECUSTOMIZE = '''\
"""Written by `mm-handoff run`: install mm-handoff's TensorRT-LLM glue, then chain to the next sitecustomize."""
import os as _os
import sys as _sys


def _mm_handoff_stop(reason):
    """The fix cannot be put in place: one line and exit __EXIT__, unless __ALLOW__ is on."""
    if _os.environ.get(__ALLOW__, "").strip().lower() in __TRUTHY__:
        _sys.stderr.write("mm-handoff: warning: %s; serving WITHOUT the fix (%s=1)\\n" % (reason, __ALLOW__))
        return
    _sys.stderr.write("mm-handoff: error: %s; stopping (set %s=1 to serve without the fix)\\n" % (reason, __ALLOW__))
    _sys.stderr.flush()
    _os._exit(__EXIT__)


class _MmHandoffMissing:
    """mm-handoff does not import in this interpreter: an import of TensorRT-LLM here would run unprotected."""

    def __init__(self, reason):
        self.reason = reason

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "tensorrt_llm":
            _mm_handoff_stop("mm_handoff does not import in this interpreter (%s), so TensorRT-LLM would run "
                             "without the fix" % (self.reason,))
        return None


def _mm_handoff_startup():
    if _os.environ.get(__ENV__, "").strip().lower() in __FALSY__:
        return
    try:
        import mm_handoff._startup
    except Exception as exc:
        _sys.meta_path.insert(0, _MmHandoffMissing(" ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:500]))
        return
    try:
        mm_handoff._startup.process_startup()
    except BaseException as exc:  # it stops the process itself; anything else is a failed start-up too
        _mm_handoff_stop("start-up hook failed: " + " ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:500])


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


_mm_handoff_startup()
_chain_next_sitecustomize()
'''.replace("__ENV__", repr(_env.AUTOINSTALL)).replace("__FALSY__", repr(_env.FALSY)).replace(
    "__TRUTHY__", repr(_env.TRUTHY)).replace("__ALLOW__", repr(_env.ALLOW_UNPROTECTED)).replace(
    "__EXIT__", str(EXIT_CODE))


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
