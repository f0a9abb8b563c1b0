"""The 0.33 overlay itself (conftest.py says what and why); imported by conftest.py before any test module."""

from __future__ import annotations

import glob
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEEL_ENV = "MM_HANDOFF_VLLM_WHEEL"
VERSION = "0.33.0"

#: the modules the glue's hook points live in or go through (module name -> path inside the wheel)
OVERLAID = {
    "vllm.model_executor.models.qwen3_vl": "vllm/model_executor/models/qwen3_vl.py",
    "vllm.model_executor.models.qwen3_5": "vllm/model_executor/models/qwen3_5.py",
    "vllm.model_executor.models.qwen3_vl_moe": "vllm/model_executor/models/qwen3_vl_moe.py",
    "vllm.multimodal.processing.processor": "vllm/multimodal/processing/processor.py",
    "vllm.multimodal.processing.inputs": "vllm/multimodal/processing/inputs.py",
    "vllm.multimodal.parse": "vllm/multimodal/parse.py",
    "vllm.multimodal.inputs": "vllm/multimodal/inputs.py",
    "vllm.plugins": "vllm/plugins/__init__.py",
}


def real_vllm() -> bool:
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None


def wheel_path() -> Path:
    named = os.environ.get(WHEEL_ENV)
    if named:
        return Path(named)
    found = sorted(glob.glob(str(ROOT / ".whl" / f"vllm-{VERSION}-*.whl")))
    if not found:
        raise RuntimeError(f"no vllm {VERSION} wheel: run `make test-vllm` (it downloads it into .whl/) or set "
                           f"{WHEEL_ENV}")
    return Path(found[0])


def extract(wheel: Path, into: Path) -> dict:
    """The overlaid files and the wheel's METADATA, extracted; ``{module: path}`` plus ``"METADATA"``."""
    out = {}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = f"vllm-{VERSION}.dist-info/METADATA"
        for module, member in [*OVERLAID.items(), ("METADATA", metadata)]:
            if member not in names:
                raise RuntimeError(f"{wheel.name} has no {member}")
            target = into / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(member))
            out[module] = target
    return out


class Overlay(importlib.abc.MetaPathFinder):
    """Loads the overlaid modules from 0.33's files; packages keep 0.32's folder for their other modules."""

    def __init__(self, files: dict) -> None:
        self.files = files

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in OVERLAID:
            return None
        installed = importlib.machinery.PathFinder.find_spec(fullname, path)
        if installed is None:
            return None
        locations = installed.submodule_search_locations
        return importlib.util.spec_from_file_location(
            fullname, self.files[fullname],
            submodule_search_locations=list(locations) if locations is not None else None)


FILES: dict = {}
if real_vllm() and not any(isinstance(f, Overlay) for f in sys.meta_path):
    if any(name == "vllm" or name.startswith("vllm.") for name in sys.modules):
        raise RuntimeError("vLLM was imported before the 0.33 overlay: run tests/vllm_conformance on its own")
    _into = ROOT / ".whl" / f"vllm-{VERSION}-files"
    FILES.update(extract(wheel_path(), _into))
    sys.meta_path.insert(0, Overlay(FILES))
