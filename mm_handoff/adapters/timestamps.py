"""HF's video timestamps, reproduced to the bit without pixels or torchvision.

``Qwen3VLProcessor._calculate_timestamps``: pad ``frames_indices`` to a multiple of the temporal
patch by repeating the last index, divide each index by the *source* fps, average the first and last
frame of each patch as ``(a + b) / 2``, print ``f"<{t:.1f} seconds>"`` (half-to-even on the binary
value). An algebraically equal expression prints differently in some cases, so the expression and its
order are kept exactly, and so are the metadata's own number types: HF computes ``idx / fps`` in
whatever the metadata holds (``np.float32(30.0)`` with frames ``[4, 5, 6, 7]`` prints ``<0.2 seconds>``
in float32 where float64 prints ``<0.1 seconds>``), so the values are read as they are (plain and NumPy
numbers, a one-value torch tensor for fps; nothing else) and the same expression runs on them. The
caller's metadata is never mutated (HF's is).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import HandoffError
from ..reading import MAX_ID, plain_sequence, sequence_len

#: the latest group a prompt can print: ``<9999999.9 seconds>`` (7 integer digits, what the reader reads)
MAX_SECONDS = 9_999_999.9


def calculate_timestamps(indices, video_fps, merge_size: int) -> list:
    """Seconds per temporal patch, exactly as HF computes them, in the types of ``indices`` and ``video_fps``
    (indices are copied, not extended); each returned as the float it holds (which prints as HF's value does:
    a NumPy or torch scalar formats through its Python float)."""
    indices = list(indices.tolist() if hasattr(indices, "tolist") else indices)
    if len(indices) % merge_size != 0:
        indices.extend(indices[-1] for _ in range(merge_size - len(indices) % merge_size))
    seconds = [idx / video_fps for idx in indices]
    return [float((seconds[i] + seconds[i + merge_size - 1]) / 2) for i in range(0, len(seconds), merge_size)]


def format_timestamp(seconds: float) -> str:
    return f"<{seconds:.1f} seconds>"


def sample_frame_indices(total_num_frames: int, video_fps: float | None, *, fps: float | None = 2,
                         num_frames: int | None = None, min_frames: int = 4, max_frames: int = 768) -> list:
    """``Qwen3VLVideoProcessor.sample_frames``'s indices (``do_sample_frames=True``)."""
    if fps is not None and num_frames is not None:
        raise HandoffError("sampling", "either fps or num_frames", {"fps": fps, "num_frames": num_frames})
    if num_frames is None and fps is not None:
        source_fps = 24 if video_fps is None else video_fps
        num_frames = int(total_num_frames / source_fps * fps)
        num_frames = min(max(num_frames, min_frames), max_frames, total_num_frames)
    if num_frames is None:
        num_frames = min(max(total_num_frames, min_frames), max_frames)
    return np.linspace(0, total_num_frames - 1, num_frames).round().astype(int).tolist()


def metadata_fields(metadata: Any, index: int, *, max_frames: int, request_id=None) -> dict:
    """Read fps / frames_indices / total_num_frames from a mapping or an HF ``VideoMetadata``; at most
    ``max_frames`` frame indices (``Limits.max_frames``), counted before they are read."""
    field = f"video_metadata[{index}]"
    if metadata is None:
        raise HandoffError(field, "video metadata (fps, frames_indices)", None, request_id=request_id,
                           hint="timestamps cannot be rebuilt without it")
    try:
        get = metadata.get if isinstance(metadata, Mapping) else (lambda k, d=None: getattr(metadata, k, d))
        fps, indices, total = get("fps", None), get("frames_indices", None), get("total_num_frames", None)
        if isinstance(indices, (list, tuple)):  # what a list stores, counted before it is read
            indices = plain_sequence(indices) if 0 < sequence_len(indices) <= max_frames else sequence_len(indices)
        elif indices is not None and hasattr(indices, "tolist"):  # an array or tensor: its shape, counted first
            shape = getattr(indices, "shape", None)
            size = math.prod(int(d) for d in shape) if isinstance(shape, tuple) and len(shape) == 1 else None
            indices = indices.tolist() if size is not None and 0 < size <= max_frames else \
                size if size is not None else f"{type(indices).__name__} of shape {shape}"
    except Exception as exc:  # a mapping or object that fails when read
        raise HandoffError(field, "readable video metadata (fps, frames_indices)", type(exc).__name__,
                           request_id=request_id) from exc
    if fps is not None:
        if not _number(fps) or not _finite_positive(fps):
            raise HandoffError(f"{field}.fps", "a positive, finite number (a plain, NumPy or one-value torch "
                               "number) or None", fps if type(fps) in _PLAIN else type(fps).__name__,
                               request_id=request_id)
    if indices is not None:
        if not isinstance(indices, (list, tuple)) or not 0 < len(indices) <= max_frames:
            raise HandoffError(f"{field}.frames_indices", f"a list or 1-D array of 1 to {max_frames} frame "
                               "indices (limits.max_frames)",
                               len(indices) if isinstance(indices, (list, tuple)) else
                               f"{indices} indices" if type(indices) is int else
                               indices if type(indices) is str else type(indices).__name__,
                               request_id=request_id)
        if any(type(i) is not int and type(i) not in _NP_INTS for i in indices) \
                or not all(0 <= i <= MAX_ID for i in indices):
            raise HandoffError(f"{field}.frames_indices", f"ints in [0, {MAX_ID}]", indices,
                               request_id=request_id)
        indices = list(indices)  # each as the type it is: HF divides it by fps as it is
    return {"fps": fps, "frames_indices": indices, "total_num_frames": total}


def _number(value) -> bool:
    """A number HF's expression may run on as it is: a plain int or float, a NumPy scalar of a real type,
    or a torch tensor of one real value (exact types only: a subclass's arithmetic is never run)."""
    if type(value) in _PLAIN or type(value) in _NP_NUMBERS:
        return True
    torch = sys.modules.get("torch")  # a torch value can only come from a process that imported torch
    if torch is None or type(value) is not torch.Tensor:
        return False
    try:
        return value.dim() == 0 and not value.dtype.is_complex and value.dtype is not torch.bool
    except Exception:  # a tensor that cannot say its shape or type
        return False


def _finite_positive(value) -> bool:
    try:
        return math.isfinite(float(value)) and float(value) > 0
    except Exception:  # 10**400, or a subclass whose __float__ raises anything
        return False


_PLAIN = (int, float)
_NP_INTS = tuple(np.sctypeDict[name] for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                                  "uint64"))
_NP_NUMBERS = _NP_INTS + tuple(np.sctypeDict[name] for name in ("float16", "float32", "float64", "longdouble"))
