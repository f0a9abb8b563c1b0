"""Import TensorRT-LLM's own Python files on a machine without its compiled parts.

A meta-path finder serves every ``tensorrt_llm.*`` module from the source tree named by
``MM_HANDOFF_TRTLLM_SRC`` (a TensorRT-LLM checkout, or any directory holding its ``tensorrt_llm/`` Python
files). What that tree lacks, or cannot load here, becomes an automatic stub: the top-level package (its
``__init__`` loads the compiled bindings), ``tensorrt_llm.bindings``, every module with no file in the tree,
and third-party modules an upstream file imports that are not installed (``tensorrt``, ``triton``,
``blake3``, ...). A name that a real module imports from another real module that lacks it (trees
assembled file by file mix commits) is filled with a stub too, and recorded as a gap.

:meth:`UpstreamTree.report` says, per module, whether upstream code or a stub ran; a test calls
:meth:`UpstreamTree.require` for the modules it exercises and fails when one of them was stubbed.
"""

from __future__ import annotations

import fnmatch
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import types
from pathlib import Path

ENV = "MM_HANDOFF_TRTLLM_SRC"
VERSION_ENV = "MM_HANDOFF_TRTLLM_VERSION"
EXTRA_ENV = "MM_HANDOFF_TRTLLM_REAL_EXTRA"
#: the modules that run upstream's code when the tree has them (the hook points and their light
#: dependencies); any other module of a full checkout is a stub, so its compiled imports never run.
#: ``MM_HANDOFF_TRTLLM_REAL_EXTRA`` (comma-separated fnmatch patterns) adds to it.
REAL_MODULES = (
    "tensorrt_llm.inputs", "tensorrt_llm.inputs.registry", "tensorrt_llm.inputs.multimodal",
    "tensorrt_llm.inputs.data", "tensorrt_llm.inputs.content_format", "tensorrt_llm.inputs.multimodal_data",
    "tensorrt_llm._torch.models.modeling_qwen2vl", "tensorrt_llm._torch.models.modeling_qwen3vl",
    "tensorrt_llm._torch.models.modeling_qwen3vl_moe", "tensorrt_llm._torch.models.modeling_qwen3_5",
    "tensorrt_llm._torch.models.modeling_cosmos3", "tensorrt_llm._torch.models.modeling_cosmos3_omni",
    "tensorrt_llm.llmapi.llm", "tensorrt_llm.llmapi.mm_encoder",
    "tensorrt_llm.disaggregated_params", "tensorrt_llm.executor.params.disaggregation",
    "tensorrt_llm._torch.shared_tensor", "tensorrt_llm._torch.shared_tensor.shared_tensor",
    "tensorrt_llm.executor.base_worker", "tensorrt_llm._torch.pyexecutor.model_engine",
    # the context-phase slice, wherever the tree has it, and the request it reads
    "tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner",
    "tensorrt_llm._torch.pyexecutor.engine.runners.decoder.prepare",
    "tensorrt_llm._torch.pyexecutor.llm_request", "tensorrt_llm.sampling_params",
)
#: the release of upstream issue #20138, whose hook-point code the newest stored files match
DEFAULT_VERSION = "1.3.0rc25"
PKG = "tensorrt_llm"
_ALWAYS_STUB = ("tensorrt_llm.bindings",)
_FALSY = re.compile(r"(IS|HAS)_[A-Z0-9_]+")
_MISSING_NAME = re.compile(r"cannot import name '([^']+)' from '([^']+)'")


# ------------------------------------------------------------------------------------- stubs
class _StubMeta(type):
    """Stub classes: any attribute is another stub, ``Stub[X]`` is Stub, a decorator passes through."""

    def __getattr__(cls, name):
        if name.startswith("__") or not cls.__dict__.get("_mm_stub_pure"):
            raise AttributeError(name)
        value = _stub_class(f"{cls.__qualname__}.{name}")
        setattr(cls, name, value)
        return value

    def __getitem__(cls, item):
        return cls

    def __call__(cls, *args, **kwargs):
        if cls.__dict__.get("_mm_stub_pure") and len(args) == 1 and not kwargs and _decoratable(args[0]):
            if getattr(args[0], "__name__", "") == "<lambda>":  # a decorator factory fed a lambda
                return lambda decorated: decorated
            return args[0]
        return super().__call__(*args, **kwargs)

    def __add__(cls, other):
        return other

    __radd__ = __add__


def _decoratable(value) -> bool:
    return inspect.isfunction(value) or inspect.isclass(value) or isinstance(value, (property, staticmethod,
                                                                                     classmethod))


class _StubBase(metaclass=_StubMeta):
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _StubBase()

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and _decoratable(args[0]):
            return args[0]
        return _StubBase()

    def __iter__(self):
        return iter(())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


#: a stubbed name that is an exception class by upstream's naming (``RequestError``, ``...Exception``):
#: upstream raises and catches it, so the stub must be a real exception class
_EXCEPTION_NAME = re.compile(r"[A-Z]\w*(Error|Exception)")


def _stub_class(name: str) -> type:
    short = name.rpartition(".")[2] or name
    if _EXCEPTION_NAME.fullmatch(short):
        return type(short, (Exception,), {"__qualname__": short, "__module__": name.rpartition(".")[0] or name,
                                          "_mm_stub_exception": True})
    return _StubMeta(short, (_StubBase,), {"_mm_stub_pure": True, "__qualname__": name})


class StubModule(types.ModuleType):
    """A module whose every public attribute is a stub (``IS_*``/``HAS_*`` flags are False)."""

    __mm_stub__ = True

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = False if _FALSY.fullmatch(name) else _stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


# -------------------------------------------------------------------------------- the finder
class _StubLoader(importlib.abc.Loader):
    def __init__(self, tree: UpstreamTree, reason: str, path: list[str] | None):
        self.tree, self.reason, self.path = tree, reason, path

    def create_module(self, spec):
        module = StubModule(spec.name)
        module.__path__ = list(self.path or [])
        if spec.name == PKG:
            module.__version__ = self.tree.version
        return module

    def exec_module(self, module):
        self.tree.record(module.__name__, "stub", self.reason)


class _UpstreamLoader(importlib.machinery.SourceFileLoader):
    """Runs an upstream file; a name missing from a sibling module is filled with a stub (a gap)."""

    tree: UpstreamTree

    def exec_module(self, module):
        code = self.get_code(module.__name__)
        keep = {k: v for k, v in module.__dict__.items() if k.startswith("__")}
        self.tree.depth += 1
        try:
            for _ in range(64):
                try:
                    exec(code, module.__dict__)
                    break
                except ImportError as exc:
                    if not self.tree.fill_gap(exc, importer=module.__name__):
                        raise
                    module.__dict__.clear()
                    module.__dict__.update(keep)
        finally:
            self.tree.depth -= 1
        self.tree.record(module.__name__, "upstream", os.path.relpath(self.path, self.tree.root))


class _TreeFinder(importlib.abc.MetaPathFinder):
    def __init__(self, tree: UpstreamTree):
        self.tree = tree

    def find_spec(self, fullname, path=None, target=None):
        if fullname != PKG and not fullname.startswith(PKG + "."):
            return None
        return self.tree.spec_for(fullname)


#: third-party modules upstream files import unconditionally that a CPU machine does not have; anything
#: else missing stays an ImportError (optional imports upstream guards with try/except must see one)
THIRD_PARTY_STUBS = ("tensorrt", "triton", "blake3")


class _ThirdPartyFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a listed module nothing else found, imported while upstream code runs."""

    def __init__(self, tree: UpstreamTree):
        self.tree = tree

    def find_spec(self, fullname, path=None, target=None):
        if self.tree.depth <= 0 or fullname.split(".")[0] not in THIRD_PARTY_STUBS:
            return None
        return importlib.util.spec_from_loader(
            fullname, _StubLoader(self.tree, "third-party module not installed here", []), is_package=True)


# ---------------------------------------------------------------------------------- the tree
class UpstreamTree:
    """A TensorRT-LLM source tree served to ``import tensorrt_llm...`` through the shim."""

    def __init__(self, root: os.PathLike, version: str | None = None):
        self.root = str(Path(root).resolve())
        self.version = version or os.environ.get(VERSION_ENV) or self._tree_version() or DEFAULT_VERSION
        self.version_source = ("argument" if version else VERSION_ENV if os.environ.get(VERSION_ENV)
                               else "version.py" if self._tree_version() else "shim default (#20138's release)")
        self.depth = 0
        self.modules: dict[str, tuple[str, str]] = {}
        self.gaps: list[tuple[str, str, str]] = []
        self._finders = (_TreeFinder(self), _ThirdPartyFinder(self))

    def _tree_version(self) -> str | None:
        """``tensorrt_llm/version.py``'s string, when the tree has that file."""
        path = Path(self.root, PKG, "version.py")
        match = re.search(r"__version__\s*=\s*[\"']([^\"']+)", path.read_text()) if path.is_file() else None
        return match.group(1) if match else None

    # ---- finder support
    def spec_for(self, fullname: str):
        parts = fullname.split(".")
        base = Path(self.root, *parts)
        if fullname == PKG or fullname in _ALWAYS_STUB or fullname.startswith(tuple(s + "." for s in _ALWAYS_STUB)):
            reason = "top-level package (its __init__ loads the compiled bindings)" if fullname == PKG \
                else "compiled bindings"
            return self._stub_spec(fullname, reason, [str(base)] if base.is_dir() else [])
        exercised = self.exercised(fullname)
        if base.with_suffix(".py").is_file():
            if exercised:
                return self._source_spec(fullname, base.with_suffix(".py"), None)
            return self._stub_spec(fullname, "in the tree, not exercised (compiled or heavy imports)", [])
        if (base / "__init__.py").is_file() and exercised:
            return self._source_spec(fullname, base / "__init__.py", [str(base)])
        if base.is_dir():
            return self._stub_spec(fullname, "package (its __init__ not exercised, or absent)", [str(base)])
        return self._stub_spec(fullname, "not in the tree", [])

    @staticmethod
    def exercised(fullname: str) -> bool:
        extra = [p.strip() for p in os.environ.get(EXTRA_ENV, "").split(",") if p.strip()]
        return fullname in REAL_MODULES or any(fnmatch.fnmatchcase(fullname, p) for p in extra)

    def _stub_spec(self, fullname, reason, path):
        return importlib.util.spec_from_loader(fullname, _StubLoader(self, reason, path), is_package=True)

    def _source_spec(self, fullname, file: Path, search):
        loader = _UpstreamLoader(fullname, str(file))
        loader.tree = self
        return importlib.util.spec_from_file_location(fullname, str(file), loader=loader,
                                                      submodule_search_locations=search)

    def fill_gap(self, exc: ImportError, *, importer: str) -> bool:
        match = _MISSING_NAME.search(str(exc))
        target = sys.modules.get(match.group(2)) if match else None
        if target is None:
            return False
        setattr(target, match.group(1), _stub_class(f"{match.group(2)}.{match.group(1)}"))
        self.gaps.append((match.group(2), match.group(1), importer))
        return True

    def record(self, name: str, kind: str, detail: str) -> None:
        self.modules[name] = (kind, detail)

    # ---- lifecycle
    def activate(self) -> UpstreamTree:
        self.deactivate()
        _purge()
        sys.meta_path.insert(0, self._finders[0])
        sys.meta_path.append(self._finders[1])
        return self

    def deactivate(self) -> None:
        for finder in self._finders:
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
        _purge()

    # ---- reporting
    def report(self) -> dict[str, tuple[str, str]]:
        """``{module: ("upstream", file) | ("stub", why)}`` for every module loaded so far."""
        return dict(sorted(self.modules.items()))

    def require(self, *names: str) -> None:
        """Fail (AssertionError naming each) unless every module ran upstream's own code."""
        bad = {n: self.modules.get(n, ("not loaded", "")) for n in names}
        bad = {n: v for n, v in bad.items() if v[0] != "upstream"}
        if bad:
            raise AssertionError("exercised modules did not run upstream code: "
                                 + "; ".join(f"{n}: {k} ({why})" for n, (k, why) in bad.items()))

    def summary(self) -> str:
        real = [n for n, (k, _) in self.report().items() if k == "upstream"]
        stubs = [n for n, (k, _) in self.report().items() if k == "stub"]
        gaps = [f"{m}.{n} (needed by {i})" for m, n, i in self.gaps]
        return (f"tensorrt_llm {self.version} (from {self.version_source}) at {self.root}\n"
                f"upstream code ({len(real)}): {', '.join(real)}\n"
                f"stubs ({len(stubs)}): {', '.join(stubs)}\n"
                f"gaps filled with stubs ({len(gaps)}): {', '.join(gaps) or 'none'}")


def _purge() -> None:
    for name in [m for m in sys.modules if m == PKG or m.startswith(PKG + ".")]:
        del sys.modules[name]
