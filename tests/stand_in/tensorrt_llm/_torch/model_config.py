"""Stand-in for ``tensorrt_llm/_torch/model_config.py`` (only ``ModelConfig.from_pretrained``).

Upstream loads the HF ``PretrainedConfig``. Here ``from_pretrained`` looks the
path up in an in-memory registry (``register_pretrained_config``, a stand-in
only helper) or reads ``<path>/config.json`` into nested ``SimpleNamespace``.
"""

import json
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Dict

_PRETRAINED: Dict[str, Any] = {}


def register_pretrained_config(name: str, config: Any) -> None:
    """Stand-in only: make ``ModelConfig.from_pretrained(name)`` return ``config``."""
    _PRETRAINED[os.fspath(name)] = config


def _to_namespace(obj: Any) -> Any:
    if isinstance(obj, dict):
        return SimpleNamespace(**{k: _to_namespace(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return [_to_namespace(v) for v in obj]
    return obj


@dataclass
class ModelConfig:
    pretrained_config: Any = None

    @classmethod
    def from_pretrained(cls, checkpoint_dir, trust_remote_code: bool = False, **kwargs) -> "ModelConfig":
        key = os.fspath(checkpoint_dir)
        if key in _PRETRAINED:
            return cls(pretrained_config=_PRETRAINED[key])
        path = os.path.join(key, "config.json")
        if not os.path.isfile(path):
            raise ValueError(f"stand-in: no config registered or found for {key!r}")
        with open(path, "r", encoding="utf-8") as f:
            return cls(pretrained_config=_to_namespace(json.load(f)))
