"""Which Qwen3-VL-layout families a tree registers, read from upstream's own registrations.

At collection time (nothing imported yet) the model files of the tree are read by AST: every
``@register_input_processor(<processor>, model_type="...")`` on a model class, with the class's
``@register_auto_model("<architecture>")``. A family counts when its processor is one of the
Qwen3-VL-layout processors mm-handoff knows (``mm_handoff.adapters.TRTLLM_PROCESSOR_CLASSES``) or a
class the tree derives from one of them. At run time ``registered_family`` checks the same facts
against upstream's live ``INPUT_PROCESSOR_REGISTRY`` (the AST reading must agree with the import).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

MODELS_DIR = ("tensorrt_llm", "_torch", "models")


class Registration(NamedTuple):
    model_type: str
    module: str          # tensorrt_llm._torch.models.modeling_x
    model_class: str     # the nn.Module class the registry keys on
    processor: str       # the processor class name passed to register_input_processor
    architecture: Optional[str]  # register_auto_model(...) on the same class
    file_line: str


def _known_processor_names() -> set:
    from mm_handoff.adapters import TRTLLM_PROCESSOR_CLASSES

    return {dotted.rpartition(":")[2] for dotted in TRTLLM_PROCESSOR_CLASSES}


def _decorator_calls(node: ast.ClassDef, name: str) -> List[ast.Call]:
    return [d for d in node.decorator_list
            if isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", None)) == name]


def registrations(tree_root: str) -> List[Registration]:
    """Every input-processor registration in the tree's model files, Qwen3-VL-layout or not."""
    out: List[Registration] = []
    models = Path(tree_root, *MODELS_DIR)
    if not models.is_dir():
        return out
    for path in sorted(models.glob("modeling_*.py")):
        module = ".".join(MODELS_DIR) + "." + path.stem
        try:
            parsed = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for node in parsed.body:
            if not isinstance(node, ast.ClassDef):
                continue
            arch = None
            for call in _decorator_calls(node, "register_auto_model"):
                if call.args and isinstance(call.args[0], ast.Constant):
                    arch = call.args[0].value
            for call in _decorator_calls(node, "register_input_processor"):
                proc = call.args[0] if call.args else None
                proc_name = getattr(proc, "id", getattr(proc, "attr", None))
                model_type = next((k.value.value for k in call.keywords
                                   if k.arg == "model_type" and isinstance(k.value, ast.Constant)), None)
                if model_type is None and len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
                    model_type = call.args[1].value
                if proc_name and model_type:
                    out.append(Registration(model_type, module, node.name, proc_name, arch,
                                            f"{path.relative_to(tree_root)}:{call.lineno}"))
    return out


def _derived_processors(tree_root: str, bases: set) -> set:
    """Class names in the tree's model files that derive (directly) from one of ``bases``."""
    found = set()
    for path in sorted(Path(tree_root, *MODELS_DIR).glob("modeling_*.py")):
        try:
            parsed = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for node in parsed.body:
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) in bases for b in node.bases):
                found.add(node.name)
    return found


def qwen_layout_families(tree_root: Optional[str]) -> Dict[str, Registration]:
    """``{model_type: Registration}`` for every Qwen3-VL-layout family the tree registers."""
    if not tree_root:
        return {}
    known = _known_processor_names()
    known |= _derived_processors(tree_root, known)
    return {r.model_type: r for r in registrations(tree_root) if r.processor in known}


def registered_family(upstream_registry, registration: Registration):
    """The live registry's processor class for ``registration``'s model class (after import)."""
    import importlib

    model_cls = getattr(importlib.import_module(registration.module), registration.model_class)
    table = upstream_registry.INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type
    if model_cls not in table:
        raise AssertionError(f"{registration.file_line}: {registration.model_class} is registered in the source "
                             "but not in the imported INPUT_PROCESSOR_REGISTRY")
    processor_cls = table[model_cls]
    if processor_cls.__name__ != registration.processor:
        raise AssertionError(f"{registration.file_line}: source registers {registration.processor}, "
                             f"the live registry holds {processor_cls.__name__}")
    return model_cls, processor_cls
