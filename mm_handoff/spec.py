"""The small, family-specific facts a layout is derived from: token ids and patch sizes.

A :class:`TokenSpec` is all the core needs to find pads, markers and timestamps in an expanded
prompt. Adapters build one from the HF config / tokenizer (or the released checkpoints' defaults).
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Optional

import attrs
import numpy as np

from .errors import GridMismatchError, LayoutError

__all__ = ["TokenSpec", "TimestampVocab", "PAD_ONLY", "REPLACE_WRAPPER", "CONVENTIONS", "normalize_grids",
           "item_lengths", "strict_int"]

#: transformers >= 5.10.1 replaces only ``<|video_pad|>``; the template's outer markers stay.
PAD_ONLY = "pad_only"
#: transformers <= 5.9 and Cosmos3-Edge replace the whole vs/pad/ve trio (vLLM follows its transformers).
REPLACE_WRAPPER = "replace_wrapper"
CONVENTIONS = (PAD_ONLY, REPLACE_WRAPPER)


def _token_id(instance, attribute, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LayoutError(f"spec.{attribute.name}", "a non-negative int", value)


def _positive(instance, attribute, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LayoutError(f"spec.{attribute.name}", "a positive int", value)


@attrs.frozen
class TimestampVocab:
    """Token ids of ``<{t:.1f} seconds>``: digits are single tokens in the Qwen vocabularies."""

    #: id of ``<``
    open: int = attrs.field(validator=_token_id)
    #: id of ``>``
    close: int = attrs.field(validator=_token_id)
    #: id of ``.``
    dot: int = attrs.field(validator=_token_id)
    #: id of `` seconds``
    seconds: int = attrs.field(validator=_token_id)
    #: ids of ``0`` .. ``9``
    digits: tuple = attrs.field(converter=tuple)

    @digits.validator
    def _check_digits(self, attribute, value) -> None:
        if len(value) != 10 or any(isinstance(d, bool) or not isinstance(d, int) for d in value):
            raise LayoutError("spec.timestamps.digits", "10 int token ids", value)

    def as_dict(self) -> dict:
        return {"open": self.open, "close": self.close, "dot": self.dot,
                "seconds": self.seconds, "digits": list(self.digits)}


@attrs.frozen
class TokenSpec:
    """Ids and sizes that define a family's multimodal prompt layout."""

    #: ``<|image_pad|>``
    image_pad: int = attrs.field(validator=_token_id)
    #: ``<|video_pad|>``
    video_pad: int = attrs.field(validator=_token_id)
    #: ``<|vision_start|>``
    vision_start: int = attrs.field(validator=_token_id)
    #: ``<|vision_end|>``
    vision_end: int = attrs.field(validator=_token_id)
    #: spatial merge size (pads per group = h * w / merge**2)
    merge_size: int = attrs.field(default=2, validator=_positive)
    #: frames per temporal patch (2 for Qwen3-VL, 1 for Cosmos3-Edge)
    temporal_patch_size: int = attrs.field(default=2, validator=_positive)
    #: timestamp text ids, when the tokenizer is known
    timestamps: Optional[TimestampVocab] = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        ids = (self.image_pad, self.video_pad, self.vision_start, self.vision_end)
        if len(set(ids)) != 4:
            raise LayoutError("spec", "four distinct ids (image_pad, video_pad, vision_start, vision_end)", ids)

    def as_dict(self) -> dict:
        return {
            "image_pad": self.image_pad,
            "video_pad": self.video_pad,
            "vision_start": self.vision_start,
            "vision_end": self.vision_end,
            "merge_size": self.merge_size,
            "temporal_patch_size": self.temporal_patch_size,
            "timestamps": None if self.timestamps is None else self.timestamps.as_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "TokenSpec":
        ts = data.get("timestamps")
        return cls(
            image_pad=data["image_pad"],
            video_pad=data["video_pad"],
            vision_start=data["vision_start"],
            vision_end=data["vision_end"],
            merge_size=data["merge_size"],
            temporal_patch_size=data["temporal_patch_size"],
            timestamps=None if ts is None else TimestampVocab(**ts),
        )

    def digest(self) -> str:
        """A short digest of every id this spec uses: the tokenizer identity on the wire."""
        return _digest(self)


@functools.lru_cache(maxsize=64)
def _digest(spec: TokenSpec) -> str:
    text = repr(sorted(spec.as_dict().items())).encode()
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def strict_int(value) -> int:
    """``value`` as an int when it is one: ints, numpy ints and 0-d integer tensors; never truncates.

    ``4.9``, ``"4"``, ``True`` and ``None`` raise ``TypeError``/``ValueError`` (callers turn that into
    their typed error naming the field). An integral float such as ``4.0`` is accepted as 4 (JSON
    and torch hand those over).
    """
    if isinstance(value, bool) or isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"not an int: {value!r}")
    if isinstance(value, int):
        return value
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
        if isinstance(value, bool):
            raise TypeError(f"not an int: {value!r}")
        if isinstance(value, int):
            return value
    if isinstance(value, float) or isinstance(value, np.floating):
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"not an integral value: {value!r}")
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    raise TypeError(f"not an int: {value!r}")


def normalize_grids(grids, field: str) -> list:
    """Grids as a list of (t, h, w) int tuples; accepts lists, arrays and tensors."""
    if grids is None:
        return []
    if hasattr(grids, "tolist"):
        grids = grids.tolist()
    out = []
    for k, g in enumerate(grids):
        try:
            t, h, w = (strict_int(v) for v in g)
        except (TypeError, ValueError) as exc:
            raise GridMismatchError(f"{field}[{k}]", "(t, h, w) integers", g) from exc
        if min(t, h, w) < 1:
            raise GridMismatchError(f"{field}[{k}]", "positive (t, h, w)", (t, h, w))
        out.append((t, h, w))
    return out


def item_lengths(grids: Sequence[tuple], merge_size: int) -> list:
    m2 = merge_size * merge_size
    return [t * h * w // m2 for t, h, w in grids]
