"""Stand-in for ``tensorrt_llm/_torch/models/__init__.py``.

Like upstream, importing this package does NOT import the modeling modules;
they load lazily (``get_model_architecture`` imports the module that owns an
architecture). A plugin must import ``tensorrt_llm._torch.models.modeling_qwen3vl``
itself before patching.
"""

import importlib
from typing import Any, Tuple

from ._arch_index import ARCH_TO_MODULE, MULTIMODAL_MODEL_TYPE_TO_MODULE


def get_model_architecture(config: Any) -> Tuple[type, str]:
    from .modeling_utils import MODEL_CLASS_MAPPING

    archs = list(getattr(config, "architectures", None) or [])
    if not archs:
        raise RuntimeError("config has no 'architectures'")
    arch = archs[0]
    module = ARCH_TO_MODULE.get(arch) or MULTIMODAL_MODEL_TYPE_TO_MODULE.get(getattr(config, "model_type", ""))
    if module is not None and arch not in MODEL_CLASS_MAPPING:
        importlib.import_module(f"{__name__}.{module}")
    if arch not in MODEL_CLASS_MAPPING:
        raise RuntimeError(f"Unsupported model architecture: {arch}")
    return MODEL_CLASS_MAPPING[arch], arch
