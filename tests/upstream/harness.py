"""The conformance harness: what it fakes, and how a missing piece is named instead of hidden.

Only what cannot run here is faked: the executor (``flows.FakeEngine``), the compiled request base
and device tensors (``worker.py``). Upstream's ``LLM`` / ``MultimodalEncoder`` objects are upstream's
classes built without ``__init__`` (which loads a checkpoint and starts an executor); every attribute
upstream then reads must come from somewhere explicit:

* :data:`SCENARIO_ARGS`: the values this E -> PD scenario chooses (each one is a choice of the
  scenario, e.g. the PyTorch backend, no generation-config defaults, no multimodal encoder cache);
* upstream's own defaults, read from ``tensorrt_llm/llmapi/llm_args.py`` in the tree when it is
  there (the ``Field(default=...)`` / ``= literal`` of the ``*LlmArgs`` classes, by AST; never
  imported);
* anything else raises :class:`HarnessGap` naming the attribute and the upstream ``file:line`` that
  read it. A harness gap is an ``AttributeError`` (so upstream's own ``getattr(x, name, default)``
  keeps working) but the suite reports it apart from a glue failure (``conftest.py``).
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["HarnessGap", "UpstreamArgs", "Declared", "SCENARIO_ARGS", "llm_args_defaults", "upstream_object",
           "harness_gap_in"]

#: what the E -> PD scenario sets on ``llm.args`` (choices, not claims about upstream defaults)
SCENARIO_ARGS: dict[str, Any] = {
    "backend": "pytorch",            # the PyTorch backend: the only one with the E/PD handoff
    "reasoning_parser": None,        # no reasoning parser: add_thinking_budget_logits_processor is a no-op
    "return_perf_metrics": False,
    "enable_chunked_prefill": True,  # chunked prefill on: _check_arguments skips the max_num_tokens check
    "max_num_tokens": None,
    "generation_config": None,       # not "auto": no generation_config.json defaults are applied
    "multimodal_config": None,       # no multimodal encoder cache (llm.py guards `is not None`)
    # the overlap scheduler off: the PD request is context_only, which BaseWorker._enqueue_request refuses
    # on the PyTorch backend with the overlap scheduler on (base_worker.py @ 7b437aaa, line 371)
    "disable_overlap_scheduler": True,
}


class HarnessGap(AttributeError):
    """Upstream code read something the harness does not provide (not a glue failure)."""

    def __init__(self, owner: str, name: str, where: str):
        self.owner, self.name, self.where = owner, name, where
        super().__init__(f"harness gap: {owner}.{name} read at {where}")


def _reader_location(depth: int = 2) -> str:
    """``file:line`` of the first frame outside this module (the upstream line that read the name)."""
    frame = sys._getframe(depth)
    here = os.path.abspath(__file__)
    while frame is not None and os.path.abspath(frame.f_code.co_filename) == here:
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    path = frame.f_code.co_filename
    marker = f"{os.sep}tensorrt_llm{os.sep}"
    if marker in path:
        path = "tensorrt_llm/" + path.split(marker, 1)[1].replace(os.sep, "/")
    return f"{path}:{frame.f_lineno}"


def llm_args_defaults(tree_root: str | None) -> dict[str, Any]:
    """Literal defaults of the fields of every ``*LlmArgs`` class in the tree's ``llm_args.py`` (by AST)."""
    if not tree_root:
        return {}
    path = Path(tree_root, "tensorrt_llm", "llmapi", "llm_args.py")
    if not path.is_file():
        return {}
    out: dict[str, Any] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.ClassDef) and node.name.endswith("LlmArgs")):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value):
                continue
            value = stmt.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "Field":
                kw = {k.arg: k.value for k in value.keywords}
                value = kw.get("default", value.args[0] if value.args else None)
            try:
                out.setdefault(stmt.target.id, ast.literal_eval(value))
            except (ValueError, TypeError, SyntaxError):
                continue
    return out


def _declared(obj, owner: str, name: str):
    """A declared value of ``obj``, or the named harness gap upstream's read of ``name`` hit."""
    values = object.__getattribute__(obj, "_values")
    if name in values:
        return values[name]
    if name.startswith("__"):
        raise AttributeError(name)
    raise HarnessGap(owner, name, _reader_location())


class UpstreamArgs:
    """``llm.args``: scenario values, then the tree's ``llm_args.py`` defaults, else a named gap."""

    def __init__(self, tree_root: str | None = None, **overrides: Any):
        values = dict(llm_args_defaults(tree_root))
        values.update(SCENARIO_ARGS)
        values.update(overrides)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str):
        return _declared(self, "args", name)

    def __setattr__(self, name, value):
        self._values[name] = value

    def without(self, *names: str) -> UpstreamArgs:
        copy = UpstreamArgs()
        object.__setattr__(copy, "_values", {k: v for k, v in self._values.items() if k not in names})
        return copy


class Declared:
    """A stand-in for an upstream object whose class is not in the tree (or is compiled): only the
    declared attributes exist; any other read is a named :class:`HarnessGap`."""

    def __init__(self, owner: str, **values: Any):
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str):
        return _declared(self, object.__getattribute__(self, "_owner"), name)

    def __setattr__(self, name, value):
        self._values[name] = value


def upstream_object(cls: type, **attrs: Any):
    """An instance of upstream's ``cls`` built without ``__init__``; an attribute it lacks is a named gap.

    A subclass adds only ``__getattr__`` (called after normal lookup failed), so every method, property
    and the MRO are upstream's; ``hasattr``/``getattr(..., default)`` still see an ``AttributeError``.
    """
    sub = _GAP_SUBCLASSES.get(cls)
    if sub is None:
        def __getattr__(self, name, _owner=cls.__name__):
            if name.startswith("__"):
                raise AttributeError(name)
            raise HarnessGap(_owner, name, _reader_location())

        sub = type(cls.__name__, (cls,), {"__getattr__": __getattr__, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__, "_mm_harness_of": cls})
        _GAP_SUBCLASSES[cls] = sub
    obj = object.__new__(sub)
    for key, value in attrs.items():
        object.__setattr__(obj, key, value)
    return obj


_GAP_SUBCLASSES: dict[type, type] = {}


def harness_gap_in(exc: BaseException) -> HarnessGap | None:
    """The :class:`HarnessGap` in ``exc``'s cause/context chain, if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, HarnessGap):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None
