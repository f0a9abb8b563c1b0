"""Stand-in for ``tensorrt_llm/inputs/multimodal_data.py`` (``VideoData`` and hashing bytes)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np


class BaseModalityData:
    """Base of the modality payloads; subclasses define ``update_hash(hasher)``."""


@dataclass
class VideoData(BaseModalityData):
    """Decoded frames (HWC uint8 arrays) plus IO-loader metadata (fps, frames_indices, ...)."""

    frames: List[Any]
    metadata: Optional[Dict[str, Any]] = field(default=None)
    audio: Optional[Any] = None

    def update_hash(self, hasher) -> None:
        for frame in self.frames:
            hasher.update(serialize_item(frame))
        hasher.update(serialize_item(sorted((self.metadata or {}).items(), key=lambda kv: kv[0])))


def serialize_item(item: Any) -> bytes:
    if isinstance(item, np.ndarray):
        return str(item.shape).encode() + str(item.dtype).encode() + item.tobytes()
    if isinstance(item, (bytes, bytearray)):
        return bytes(item)
    return repr(item).encode()
