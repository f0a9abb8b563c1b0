"""The package's shape: no import cycles, no upward imports, short functions, engines imported lazily, and
seams that show where they are crossed (no private name imported from another module, no re-export outside
a package's ``__init__``, ``__all__`` only on a package's face)."""

import ast
import subprocess
import sys
from pathlib import Path

import mm_handoff

PKG = Path(mm_handoff.__file__).parent
MAX_FUNCTION_LINES = 60


def _modules() -> dict:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: set) -> set:
    """Every package module ``name`` imports, at module level or inside functions."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def test_no_import_cycles():
    """Following imports (lazy ones too) never leads back to the module they started from."""
    mods = _modules()
    graph = {name: _imports(name, path, set(mods)) for name, path in mods.items()}
    # a package's __init__ re-exporting its children is not a cycle through the child
    for name in graph:
        graph[name] = {t for t in graph[name] if not (t in mods and mods[t].name == "__init__.py"
                                                       and name.startswith(t + "."))}
    cycles = []
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert cycles == []


def test_long_functions_say_why():
    """A function over 60 lines carries '(long: <reason>)' in its docstring."""
    offenders = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                doc = ast.get_docstring(node) or ""
                if length > MAX_FUNCTION_LINES and "(long:" not in doc:
                    offenders.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name} ({length} lines)")
    assert offenders == []


def test_import_needs_no_engine():
    """``import mm_handoff`` loads neither an engine nor transformers/torch."""
    code = ("import sys, mm_handoff, mm_handoff.adapters; mm_handoff.get_adapter('qwen3_vl'); mm_handoff.stats(); "
            "print(sorted(m for m in ('torch', 'transformers', 'tensorrt_llm', 'vllm', 'prometheus_client') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_public_names_do_not_shadow_modules():
    """``mm_handoff.validate`` is the function; the checks module has its own name and stays reachable."""
    import importlib.util

    import mm_handoff.checks as checks

    assert callable(mm_handoff.validate) and mm_handoff.validate is checks.validate
    assert callable(checks.check_grid)
    for name in mm_handoff.__all__:
        value = getattr(mm_handoff, name)
        spec = importlib.util.find_spec(f"mm_handoff.{name}") if name.islower() else None
        assert spec is None, f"mm_handoff.{name} is both a public name and a submodule"
        assert value is not None
    assert len(mm_handoff.__all__) <= 26 and "AdapterError" in mm_handoff.__all__


def test_every_environment_variable_is_named_in_env():
    """The package reads ``MM_HANDOFF_*`` variables only through the names in ``mm_handoff._env``."""
    import re

    from mm_handoff import _env

    named = {v for k, v in vars(_env).items() if k.isupper() and isinstance(v, str) and v.startswith("MM_HANDOFF_")}
    elsewhere = {f"{p.relative_to(PKG)}: {m}" for p in PKG.rglob("*.py") if p.name != "_env.py"
                 for m in re.findall(r"""["'](MM_HANDOFF_[A-Z0-9_]+)["']""", p.read_text())}
    assert elsewhere == set()
    assert "MM_HANDOFF_CACHE" in named
    # one name per variable: no second name (an alias) for any of them
    names = [k for k, v in vars(_env).items() if k.isupper() and isinstance(v, str) and v.startswith("MM_HANDOFF_")]
    assert len(names) == len(named), sorted(names)


def test_no_private_name_is_imported_from_another_module():
    """A module's private names stay its own: another module imports only public names (or a private
    module of the package as a whole, such as ``_env``), so a seam is visible where it is crossed."""
    offenders = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = path.parent
            for _ in range(max(node.level - 1, 0)):
                base = base.parent
            target = base.joinpath(*(node.module or "").split(".")) if node.level else None
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                is_module = target is not None and ((target / f"{name}.py").exists() or (target / name).is_dir())
                if not is_module:
                    offenders.append(f"{path.relative_to(PKG)}:{node.lineno} imports {name}")
    assert offenders == []


def test_all_only_on_faces():
    """``__all__`` is a package's face: only an ``__init__.py`` declares one."""
    declared = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if p.name != "__init__.py"
                and any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in n.targets)
                        for n in ast.parse(p.read_text()).body)]
    assert declared == []


def test_no_reexport_outside_a_package_init():
    """A module uses every package name it imports at module level: a name is imported from where it
    lives, or from a package's face, never passed on through a module in between."""
    offenders = []
    for path in PKG.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("mm_handoff")):
                offenders += [f"{path.relative_to(PKG)}: {a.asname or a.name}" for a in node.names
                              if (a.asname or a.name) not in used]
    assert offenders == []


def test_package_root_holds_the_face_and_few_modules():
    """The root is the face (``__init__``) and the modules every part uses; the rest lives in packages."""
    root = sorted(p.stem for p in PKG.glob("*.py"))
    assert root == ["__init__", "__main__", "_cache", "_env", "_version", "checks", "cli", "errors", "reading"]


def test_engine_glues_do_not_import_each_other():
    """What two engines share lives in ``mm_handoff.glue``: an engine's package imports no other engine's."""
    def engine(module: str):
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in ("trtllm", "vllm", "sglang") else None

    mods = _modules()
    crossings = [f"{name} -> {target}" for name, path in mods.items() if engine(name)
                 for target in _imports(name, path, set(mods)) if engine(target) not in (None, engine(name))]
    assert crossings == []


#: public functions (where they live) that name a request but read no request data ``limits`` bounds, and why
_NO_LIMITS = {
    "mm_handoff.checks.check_mrope_slice": "reads a shape and an int, nothing it would convert",
    "mm_handoff.checks.check_skew": "compares a layout's names with this side's",
    "mm_handoff.errors.HandoffError.with_request": "names a request on an error",
    "mm_handoff.adapters.base.Adapter.check_prompt": "an accepted layout; the prompt is bounded by its length",
    "mm_handoff.adapters.base.Adapter.expansion_span": "an accepted layout and an item index",
    "mm_handoff.sglang._hooks.output_from_layout": "an accepted layout; embedding shapes only",
}


def _public_functions() -> dict:
    """Every function and method the package's faces export, by where it lives."""
    import importlib
    import inspect
    import pkgutil

    found = {}
    names = ["mm_handoff"] + [m.name for m in pkgutil.walk_packages(mm_handoff.__path__, "mm_handoff.") if m.ispkg]
    for module_name in names:
        for name in getattr(importlib.import_module(module_name), "__all__", ()):
            value = getattr(importlib.import_module(module_name), name)
            if inspect.isfunction(value):
                members = [value]
            elif inspect.isclass(value):
                members = [v for c in value.__mro__ if c.__module__.startswith("mm_handoff")
                           for k, v in vars(c).items() if inspect.isfunction(v) and not k.startswith("_")]
            else:
                members = []
            found.update({f"{fn.__module__}.{fn.__qualname__}": fn for fn in members})
    return found


def test_every_entry_that_reads_a_request_takes_limits():
    """Sizes are checked before work against the caller's bounds: every public function or method that
    names a request (``request_id``) takes ``limits`` too, or says here why it reads nothing to bound."""
    import inspect

    public = _public_functions()
    params = {name: inspect.signature(fn).parameters for name, fn in public.items()}
    missing = [name for name, p in params.items() if "request_id" in p and "limits" not in p and name not in _NO_LIMITS]
    assert not missing, f"public entries without limits=: {missing}"
    assert set(_NO_LIMITS) <= set(public), f"exemptions naming no public function: {set(_NO_LIMITS) - set(public)}"
