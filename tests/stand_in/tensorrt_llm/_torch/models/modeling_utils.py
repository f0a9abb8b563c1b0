"""Stand-in for ``tensorrt_llm/_torch/models/modeling_utils.py`` (registration decorators only)."""

from typing import Dict

MODEL_CLASS_MAPPING: Dict[str, type] = {}


def register_auto_model(name: str):
    def decorator(model_cls):
        MODEL_CLASS_MAPPING[name] = model_cls
        return model_cls

    return decorator


def register_vision_encoder(encoder_cls, vlm_base_model=None):
    def decorator(model_cls):
        return model_cls

    return decorator
