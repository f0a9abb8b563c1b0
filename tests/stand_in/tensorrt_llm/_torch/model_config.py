"""Stand-in for ``tensorrt_llm/_torch/model_config.py`` (only ``ModelConfig.from_pretrained``).

Upstream loads the HF ``PretrainedConfig``. Here ``from_pretrained`` looks the
path up in an in-memory registry (``register_pretrained_config``, a stand-in
only helper).
"""

import os
from dataclasses import dataclass
from typing import Any, Dict

_PRETRAINED: Dict[str, Any] = {}


def register_pretrained_config(name: str, config: Any) -> None:
    """Stand-in only: make ``ModelConfig.from_pretrained(name)`` return ``config``."""
    _PRETRAINED[os.fspath(name)] = config


@dataclass
class ModelConfig:
    pretrained_config: Any = None

    @classmethod
    def from_pretrained(cls, checkpoint_dir, trust_remote_code: bool = False, **kwargs) -> "ModelConfig":
        key = os.fspath(checkpoint_dir)
        if key not in _PRETRAINED:
            raise ValueError(f"stand-in: no config registered for {key!r}")
        return cls(pretrained_config=_PRETRAINED[key])
