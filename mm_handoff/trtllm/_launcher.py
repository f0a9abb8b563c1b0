"""``mm-handoff run -- CMD ...``: run a command with mm-handoff installed in every Python process it starts.

It writes a ``sitecustomize.py`` into a fresh private temporary directory, puts that directory first on
``PYTHONPATH``, sets ``MM_HANDOFF_AUTOINSTALL=1`` and ``exec``s the command. Every interpreter that
inherits the environment (the server, spawned and MPI-started executor workers, their children) runs the
start-up hook (:mod:`mm_handoff.trtllm._startup`, next to this file). A ``sitecustomize`` that was already on
the path still runs: the generated one chains to the next one it finds.
"""

from __future__ import annotations

import os
import re
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


#: the options that make an interpreter skip ``PYTHONPATH`` (``-E``, ``-I``) or ``site`` (``-S``, ``-I``)
_SKIPS_THE_HOOK = frozenset("EIS")
#: CPython's short options that take an argument (``SHORT_OPTS`` of ``Python/getopt.c``:
#: ``bBc:dEhiIJm:OPqRsStuvVW:xX:?``), attached (``-Xdev``) or as the next argument (``-X dev``)
_TAKES_AN_ARGUMENT = frozenset("cmWX")
#: of those, the ones after which the program starts (``-c CMD``, ``-m MOD``: no option follows)
_STARTS_THE_PROGRAM = frozenset("cm")
#: CPython's long options that take an argument: always the next one (it reads no ``--name=value``)
_LONG_WITH_AN_ARGUMENT = frozenset({"--check-hash-based-pycs"})


def _ignores_the_hook(command: Sequence[str]) -> str | None:
    """The argument of a Python command line holding an option that makes its interpreter skip ``PYTHONPATH`` or
    ``site`` (``-E``, ``-I``, ``-S``), where the start-up hook never runs; None when there is none.

    The options are read as CPython's ``_PyOS_GetOpt`` reads them, up to where the program starts (a script, ``-``,
    ``--``, or ``-c``/``-m`` with their argument): short flags alone or combined (``-BIs``), the options that take
    an argument with it attached or as the next argument (``-X dev``, ``-Xdev``, ``-W ignore``, ``-BW ignore``,
    ``--check-hash-based-pycs always``), in any order; an argument of an option or of the program is not an option
    (``-W I``, ``-c code -I``). An option CPython does not know ends that interpreter with a usage error, so it is
    read as a flag and the scan goes on (what follows it is never skipped unread)."""
    if not command or not _INTERPRETER.fullmatch(os.path.basename(str(command[0]))):
        return None
    args, k = [str(a) for a in command], 1
    while k < len(args):
        arg = args[k]
        k += 1
        if arg == "--" or arg == "-" or not arg.startswith("-"):
            return None  # the program starts here (its own arguments are not the interpreter's)
        if arg.startswith("--"):
            k += arg in _LONG_WITH_AN_ARGUMENT  # its argument is the next one, whatever it looks like
            continue  # --help, --version, --help-env, ...: no argument (an unknown one stops CPython)
        for at, option in enumerate(arg[1:], start=2):
            if option in _SKIPS_THE_HOOK:
                return arg
            if option in _TAKES_AN_ARGUMENT:
                k += at == len(arg)  # nothing attached: the next argument is its value
                if option in _STARTS_THE_PROGRAM:
                    return None
                break  # the rest of this argument is the option's value
    return None


#: an interpreter's name: python, python3, python3.13t, pypy3 (a script named python_tool.py is not one)
_INTERPRETER = re.compile(r"(?:python|pypy)[0-9.]*t?(?:\.exe)?")
#: what ``env`` drops that the hook needs: the whole environment, or PYTHONPATH / the switch by name
_ENV_CLEARS = frozenset({"-i", "--ignore-environment", "-"})
_ENV_UNSETS = frozenset({"-u", "--unset"})


def _skips_the_hook(command: Sequence[str]) -> str | None:
    """Why the start-up hook would not run in the Python that ``command`` starts, directly or through a wrapper
    (``env``, ``mpirun -np 4``, ``nohup``, ...); None when it would. The first argument that names an interpreter
    is the Python read (its options, :func:`_ignores_the_hook`); an ``env`` before it that clears the environment
    or unsets ``PYTHONPATH`` or the switch drops what the hook needs."""
    args = [str(a) for a in command]
    at = next((k for k, a in enumerate(args) if _INTERPRETER.fullmatch(os.path.basename(a))), None)
    if at is None:
        return None
    for k, arg in enumerate(args[:at]):
        if os.path.basename(arg) != "env":
            continue
        for j, option in enumerate(args[k + 1:at], start=k + 1):
            unset = option.split("=", 1)[1] if option.startswith("--unset=") else \
                option[2:] if option.startswith("-u") and len(option) > 2 else \
                args[j + 1] if option in _ENV_UNSETS and j + 1 < at else None
            if option in _ENV_CLEARS or (unset is not None and unset in ("PYTHONPATH", _env.AUTOINSTALL)):
                return f"env {option}{'' if unset is None or option != '-u' else ' ' + unset} (it drops the " \
                       "environment the hook is started from)"
    ignoring = _ignores_the_hook(args[at:])
    return None if ignoring is None else f"{args[at]} {ignoring} (it skips PYTHONPATH or site)"


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
    skipping = _skips_the_hook(command)
    if skipping is not None:
        print(f"mm-handoff: error: {skipping}: mm-handoff's start-up hook would not run in it: drop the option, or "
              "call mm_handoff.trtllm.install() in the program", file=sys.stderr)
        return 2
    env = prepare_environment()
    problems = setting_problems(env)
    allowed = _env.ALLOW_UNPROTECTED not in {getattr(p, "field", None) for p in problems} \
        and _env.env_flag(_env.ALLOW_UNPROTECTED, env)
    if problems and not allowed:  # every process it starts would stop
        print(f"mm-handoff: error: {problems[0]}", file=sys.stderr)
        return 2
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"mm-handoff: error: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - exec does not return
