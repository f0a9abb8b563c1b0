"""Let a CUDA-built torchvision import next to a CPU-only torch (installed into the vLLM test venv only).

vLLM's CPU wheel pins ``torch==2.13.0+cpu``; the only torchvision built for torch 2.13 on the public
registry is a CUDA build, whose compiled ops (``_C.so``) cannot load without CUDA torch. torchvision
is built to run without them (``torchvision.extension._has_ops()`` is then False and each compiled op
raises when called), except that ``torchvision/_meta_registrations.py`` registers fake kernels for
``torchvision::nms`` and ``torchvision::qnms`` unconditionally, and registering a fake kernel for an op
that was never defined raises ``RuntimeError: operator torchvision::nms does not exist``, so
``import torchvision`` fails, and with it transformers' video processors.

This module defines those two op schemas, and only when the compiled ops did not load, right before
``torchvision._meta_registrations`` runs. The ops stay unusable (calling one raises); nothing in the
Qwen3-VL path calls them. A torchvision whose extension loads is left untouched. The venv's
``.pth`` file imports this module at start-up (every process, vLLM's engine core included); it costs
one entry on ``sys.meta_path`` and imports nothing until torchvision is imported.
"""

import importlib.abc
import sys

_TARGET = "torchvision._meta_registrations"
_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_LIBS = []  # the torch.library.Library objects must stay alive for the definitions to persist


class _DefineMissingSchemas(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)
        import torch
        import torchvision.extension

        if not torchvision.extension._has_ops():
            lib = torch.library.Library("torchvision", "DEF")
            for schema in _SCHEMAS:
                lib.define(schema)
            _LIBS.append(lib)
        return None  # the normal finders import the module


if not any(isinstance(f, _DefineMissingSchemas) for f in sys.meta_path):
    sys.meta_path.insert(0, _DefineMissingSchemas())
