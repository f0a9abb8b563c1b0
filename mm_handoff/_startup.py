"""Start-up hook: install the TensorRT-LLM glue in every Python process of a deployment, or stop it.

``process_startup()`` does nothing unless ``MM_HANDOFF_AUTOINSTALL`` is on (one of
:data:`mm_handoff._env.TRUTHY`, e.g. ``1``). Then it checks every mm-handoff setting of the process
(:func:`setting_problems`) and installs at once when ``tensorrt_llm`` is already imported, or registers a
post-import hook that installs right after ``tensorrt_llm`` finishes importing (so a worker that never
imports it pays nothing).

It fails closed: a process that asked for the fix never serves without it. A setting that does not parse
(``MM_HANDOFF_POLICY=rebuidl``, ``MM_HANDOFF_LIMITS=max_runs=0``, ``MM_HANDOFF_AUTOINSTALL=ture``) or an
install that fails (an unsupported TensorRT-LLM, a hook point it lacks) writes one line
``mm-handoff: error: ...`` to stderr and ends the process with exit code :data:`EXIT_CODE`, at start or at
the import of ``tensorrt_llm``. ``MM_HANDOFF_ALLOW_UNPROTECTED=1`` is the explicit opt-out: the failure is
logged as a warning and the process goes on without the fix.

It is reached through ``sitecustomize`` (``mm-handoff run -- CMD``, written by
:mod:`mm_handoff._launcher`) or a ``.pth`` file in site-packages holding :data:`PTH_LINE`
(``docs/trtllm.md``), which imports nothing while the variable is unset or off: it reads the switch inline
with :data:`mm_handoff._env.FALSY`, so the many interpreters that never need mm-handoff pay nothing.
Spawned and MPI-started interpreters inherit the environment, so they run it too.
"""

from __future__ import annotations

import importlib.abc
import logging
import os
import sys
import threading

from . import _env

__all__ = ["process_startup", "setting_problems", "AUTOINSTALL_ENV", "ENGINE_MODULE", "PTH_LINE", "EXIT_CODE"]

AUTOINSTALL_ENV = _env.AUTOINSTALL
#: the line of a ``.pth`` file that runs the start-up hook (imports nothing while the variable is unset or off)
PTH_LINE = (f"import os, importlib; os.environ.get({AUTOINSTALL_ENV!r}, '').strip().lower() not in {_env.FALSY!r} "
            "and importlib.import_module('mm_handoff._startup').process_startup()")
ENGINE_MODULE = "tensorrt_llm"
#: the exit code of a process stopped because the fix could not be put in place (EX_CONFIG)
EXIT_CODE = 78

log = logging.getLogger("mm_handoff.startup")
_LOCK = threading.Lock()


def setting_problems(environ=None) -> list:
    """Every ``MM_HANDOFF_*`` setting a serving process reads, read as its user would: the typed errors
    (one per bad setting), empty when all of them parse."""
    from .limits import limits_from_env
    from .policy import resolve_policy

    env = os.environ if environ is None else environ
    checks = [(_env.AUTOINSTALL, lambda: _env.env_flag(_env.AUTOINSTALL, env)),
              (_env.ALLOW_UNPROTECTED, lambda: _env.env_flag(_env.ALLOW_UNPROTECTED, env)),
              (_env.VLLM_CHECK, lambda: _env.env_flag(_env.VLLM_CHECK, env)),
              (_env.POLICY, lambda: resolve_policy(environ=env)),
              (_env.LIMITS, lambda: limits_from_env(env))]
    problems = []
    for _, read in checks:
        try:
            read()
        except Exception as exc:  # each reader raises a HandoffError naming its variable
            problems.append(exc)
    return problems


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 1000 else text[:999] + "\u2026"


def _refuse(what: str, exc: BaseException) -> None:
    """The fix cannot be put in place: stop the process with one line, unless the opt-out is set."""
    reason = f"{what}: {_one_line(exc)}"
    try:
        unprotected = _env.env_flag(_env.ALLOW_UNPROTECTED)
    except Exception as bad:
        unprotected, reason = False, f"{reason}; and {_one_line(bad)}"
    if unprotected:
        log.warning("mm-handoff: %s; serving WITHOUT the fix (%s=1)", reason, _env.ALLOW_UNPROTECTED)
        return
    try:
        sys.stderr.write(f"mm-handoff: error: {reason}; stopping (set {_env.ALLOW_UNPROTECTED}=1 to serve "
                         "without the fix)\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_CODE)  # not SystemExit: an import in a thread, or a caller's except, would swallow it


def _install_or_refuse() -> None:
    try:
        from mm_handoff.trtllm import install

        install()
    except Exception as exc:
        _refuse("automatic install failed", exc)


class _InstallAfterImport(importlib.abc.Loader):
    """Delegates to the real loader, then installs once ``tensorrt_llm`` has fully executed."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        try:
            self._loader.exec_module(module)
        except BaseException:  # the import failed: the next attempt at it is hooked again
            _add_finder()
            raise
        _install_or_refuse()

    def __getattr__(self, name):  # get_resource_reader, is_package, ...
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """One-shot finder: on the first import of ``tensorrt_llm`` it removes itself and wraps the loader."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != ENGINE_MODULE:
            return None
        _remove_finder()
        from importlib.util import find_spec

        try:
            spec = find_spec(fullname)
        except Exception as exc:  # another finder failed: the import would go on without the hook
            _refuse(f"cannot hook the import of {fullname}", exc)
            raise
        if spec is None:  # not installed: the import fails as it would without mm-handoff
            _add_finder()
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            _refuse(f"cannot hook the import of {fullname}",
                    TypeError(f"its loader {type(spec.loader).__name__} has no exec_module"))
            return spec
        spec.loader = _InstallAfterImport(spec.loader)
        return spec


def _add_finder() -> None:
    with _LOCK:
        if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _PostImportFinder())


def _remove_finder() -> None:
    with _LOCK:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PostImportFinder)]


def process_startup() -> bool:
    """Install now or on import when ``MM_HANDOFF_AUTOINSTALL=1``; returns whether it acted.

    A bad setting or a failed install ends the process (see the module doc) unless
    ``MM_HANDOFF_ALLOW_UNPROTECTED=1``.
    """
    try:
        if not _env.env_flag(AUTOINSTALL_ENV):
            return False
    except Exception as exc:
        _refuse("bad setting", exc)
        return False
    problems = setting_problems()
    if problems:
        _refuse("bad setting", problems[0])
    if ENGINE_MODULE in sys.modules:
        _install_or_refuse()
        return True
    _add_finder()
    return True
