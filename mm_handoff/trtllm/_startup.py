"""Start-up hook: install the TensorRT-LLM glue in every Python process of a deployment, or stop it.

``process_startup()`` does nothing unless ``MM_HANDOFF_AUTOINSTALL`` is on (one of
:data:`mm_handoff._env.TRUTHY`, e.g. ``1``). Then it checks every mm-handoff setting of the process
(:func:`setting_problems`) and installs at once when ``tensorrt_llm`` is already imported, or registers a
post-import hook that installs right after ``tensorrt_llm`` finishes importing (so a worker that never
imports it pays nothing).

It fails closed: a process that asked for the fix never serves without it. A setting that does not parse
(``MM_HANDOFF_POLICY=rebuidl``, ``MM_HANDOFF_LIMITS=max_runs=0``, ``MM_HANDOFF_AUTOINSTALL=ture``,
``MM_HANDOFF_METRICS=maybe``) or an
install that fails (an unsupported TensorRT-LLM, a hook point it lacks) writes one line
``mm-handoff: error: ...`` to stderr and ends the process with exit code :data:`EXIT_CODE`, at start or at
the import of ``tensorrt_llm``. ``MM_HANDOFF_ALLOW_UNPROTECTED=1`` is the explicit opt-out: the failure is
logged as a warning and the process goes on without the fix.

It is reached through ``sitecustomize`` (``mm-handoff run -- CMD``, written by
:mod:`mm_handoff.trtllm._launcher`) or a ``.pth`` file in site-packages holding :data:`PTH_LINE`
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

from .. import _env

#: the exit code of a process stopped because the fix could not be put in place (EX_CONFIG)
EXIT_CODE = 78

#: the start-up guard the generated ``sitecustomize`` and the ``.pth`` line run: standalone code, so that it
#: fails closed also where ``mm_handoff`` itself does not import (there an import of TensorRT-LLM stops the
#: process; other Python tools run on), and whatever the hook raises stops the process too
GUARD = '''
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


def _mm_handoff_why(exc):
    try:
        return " ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:500]
    except Exception:
        return type(exc).__name__


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
        import mm_handoff.trtllm._startup
    except BaseException as exc:
        _sys.meta_path.insert(0, _MmHandoffMissing(_mm_handoff_why(exc)))
        return
    try:
        mm_handoff.trtllm._startup.process_startup()
    except BaseException as exc:  # it stops the process itself; anything else is a failed start-up too
        _mm_handoff_stop("start-up hook failed: " + _mm_handoff_why(exc))


_mm_handoff_startup()
'''.replace("__ENV__", repr(_env.AUTOINSTALL)).replace("__FALSY__", repr(_env.FALSY)).replace(
    "__TRUTHY__", repr(_env.TRUTHY)).replace("__ALLOW__", repr(_env.ALLOW_UNPROTECTED)).replace(
    "__EXIT__", str(EXIT_CODE))
#: the line of a ``.pth`` file that runs the start-up guard (nothing is imported while the variable is unset
#: or off: the switch is read inline)
PTH_LINE = (f"import os; os.environ.get({_env.AUTOINSTALL!r}, '').strip().lower() not in {_env.FALSY!r} "
            f"and exec({GUARD!r}, {{}})")
ENGINE_MODULE = "tensorrt_llm"

log = logging.getLogger("mm_handoff.startup")
_LOCK = threading.Lock()


def setting_problems(environ=None) -> list:
    """Every ``MM_HANDOFF_*`` setting a serving process reads, read as its user would: the typed errors
    (one per bad setting), empty when all of them parse."""
    from ..glue.policy import resolve_policy
    from ..glue.signals import metrics_setting
    from ..reading import limits_from_env

    env = os.environ if environ is None else environ
    readers = [lambda: _env.env_flag(_env.AUTOINSTALL, env), lambda: _env.env_flag(_env.ALLOW_UNPROTECTED, env),
               lambda: _env.env_flag(_env.VLLM_CHECK, env), lambda: resolve_policy(environ=env),
               lambda: limits_from_env(env), lambda: metrics_setting(env)]
    problems = []
    for read in readers:
        try:
            read()
        except Exception as exc:  # each reader raises a HandoffError naming its variable
            problems.append(exc)
    return problems


def _one_line(exc: BaseException) -> str:
    try:
        text = " ".join(str(exc).split()) or type(exc).__name__
    except Exception:  # an exception whose str() fails still stops the process with a line
        text = type(exc).__name__
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
        self._loader.exec_module(module)  # a failed import leaves the finder in place for the next attempt
        _remove_finder()
        _install_or_refuse()

    def __getattr__(self, name):  # get_resource_reader, is_package, ...
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of ``tensorrt_llm`` at every lookup until the import has run (a lookup without an
    import, such as ``importlib.util.find_spec`` in an availability check, changes nothing)."""

    _busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname != ENGINE_MODULE or getattr(self._busy, "on", False):
            return None
        from importlib.util import find_spec

        self._busy.on = True  # the lookup below asks the other finders, not this one again
        try:
            spec = find_spec(fullname)
        except Exception as exc:  # another finder failed: the import would go on without the hook
            _refuse(f"cannot hook the import of {fullname}", exc)
            raise
        finally:
            self._busy.on = False
        if spec is None:  # not installed: the import fails as it would without mm-handoff
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            _refuse(f"cannot hook the import of {fullname}",
                    TypeError(f"its loader {type(spec.loader).__name__} has no exec_module"))
            return spec
        if not isinstance(spec.loader, _InstallAfterImport):
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
        if not _env.env_flag(_env.AUTOINSTALL):
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
