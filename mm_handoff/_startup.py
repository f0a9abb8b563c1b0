"""Start-up hook: install the TensorRT-LLM glue in every Python process of a deployment.

``process_startup()`` does nothing unless ``MM_HANDOFF_AUTOINSTALL`` is on (one of
:data:`mm_handoff._env.TRUTHY`, e.g. ``1``). Then it installs at once
when ``tensorrt_llm`` is already imported, or registers a post-import hook that installs right after
``tensorrt_llm`` finishes importing (so a worker that never imports it pays nothing). It is lenient:
a missing, broken or unsupported TensorRT-LLM is logged, never raised (an explicit
``mm_handoff.trtllm.install()`` is strict instead).

It is reached through ``sitecustomize`` (``mm-handoff run -- CMD``, written by
:mod:`mm_handoff._launcher`) or a ``.pth`` file in site-packages holding :data:`PTH_LINE`
(``docs/trtllm.md``), which imports nothing unless the variable is set: it reads the switch inline
with :data:`mm_handoff._env.TRUTHY`, so the many interpreters that never need mm-handoff pay nothing.
Spawned and MPI-started interpreters inherit the environment, so they run it too.
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
import threading

from . import _env

__all__ = ["process_startup", "AUTOINSTALL_ENV", "ENGINE_MODULE", "PTH_LINE"]

AUTOINSTALL_ENV = _env.AUTOINSTALL
#: the line of a ``.pth`` file that runs the start-up hook (imports nothing unless the variable is set)
PTH_LINE = (f"import os, importlib; os.environ.get({AUTOINSTALL_ENV!r}, '').strip().lower() in {_env.TRUTHY!r} "
            "and importlib.import_module('mm_handoff._startup').process_startup()")
ENGINE_MODULE = "tensorrt_llm"

log = logging.getLogger("mm_handoff.startup")
_LOCK = threading.Lock()


def _install_leniently() -> None:
    try:
        from mm_handoff.trtllm import install

        install()
    except Exception as exc:  # start-up must never break the interpreter
        log.warning("mm-handoff: automatic install skipped: %s", exc)


class _InstallAfterImport(importlib.abc.Loader):
    """Delegates to the real loader, then installs once ``tensorrt_llm`` has fully executed."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _install_leniently()

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
        except Exception as exc:
            log.warning("mm-handoff: cannot locate %s: %s", fullname, exc)
            return None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _InstallAfterImport(spec.loader)
        return spec


def _remove_finder() -> None:
    with _LOCK:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PostImportFinder)]


def process_startup() -> bool:
    """Install now or on import when ``MM_HANDOFF_AUTOINSTALL=1``; returns whether it acted."""
    if not _env.env_flag(AUTOINSTALL_ENV):
        return False
    try:
        if ENGINE_MODULE in sys.modules:
            _install_leniently()
            return True
        with _LOCK:
            if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
                sys.meta_path.insert(0, _PostImportFinder())
        return True
    except Exception as exc:  # pragma: no cover - defensive
        log.warning("mm-handoff: start-up hook failed: %s", exc)
        return False
