"""What travels from the encoder to the prefill side, and where it rides.

``DisaggregatedParams`` is a slotted dataclass and ``trtllm-serve`` converts it field by field, so a
new field would be dropped. The embedding-handle dicts travel whole (``List[Dict[str, Any]]``) and
``SharedTensorContainer.from_dict`` ignores keys it does not know, so the encoder stamps three
namespaced, JSON-safe keys into ``multimodal_embedding_handles[0]``:

* ``"mm_handoff.layout"``: the encoder's expanded prompt and layout (:func:`mm_handoff.to_wire`);
* ``"mm_handoff.grids"``: ``{"family", "convention", "image_grid_thw", "video_grid_thw"}``;
* ``"mm_handoff.video_metadata"``: per video ``{"fps", "frames_indices", "total_num_frames", ...}``.

The last two let the prefill side rebuild the exact ids (policy ``rebuild``) when the layout itself is
missing. A caller may also put the same two keys in the request's ``inputs`` dict.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Optional

import numpy as np

from ..errors import HandoffError
from ..registry import REGISTRY
from ..checks import shape_of as core_shape_of

__all__ = [
    "LAYOUT_KEY",
    "GRIDS_KEY",
    "VIDEO_METADATA_KEY",
    "embedding_handles",
    "carried",
    "handle_rows",
    "shape_of",
    "request_label",
    "adapter_for",
    "grids_from_multimodal_data",
    "json_safe_metadata",
    "decode_layout",
]

LAYOUT_KEY = "mm_handoff.layout"
GRIDS_KEY = "mm_handoff.grids"
VIDEO_METADATA_KEY = "mm_handoff.video_metadata"
CARRIED_KEYS = (LAYOUT_KEY, GRIDS_KEY, VIDEO_METADATA_KEY)


def embedding_handles(disaggregated_params) -> Optional[list]:
    handles = getattr(disaggregated_params, "multimodal_embedding_handles", None)
    return handles if isinstance(handles, list) and handles else None


def carried(mm_handles, inputs=None) -> dict:
    """The mm-handoff keys found in ``mm_handles[0]`` (first) or in ``inputs`` (second)."""
    found = {}
    first = mm_handles[0] if isinstance(mm_handles, list) and mm_handles and isinstance(mm_handles[0], dict) else {}
    for key in CARRIED_KEYS:
        if first.get(key) is not None:
            found[key] = first[key]
        elif isinstance(inputs, dict) and inputs.get(key) is not None:
            found[key] = inputs[key]
    return found


def shape_of(value, *, field: str = "tensor_size", request_id=None) -> Optional[tuple]:
    """Shape of a tensor/array or ``tensor_size`` of a SharedTensorContainer handle dict; None for None.

    Handle dicts arrive from the network (trtllm-serve), so a malformed size is a typed error naming
    ``field`` (the core's strict reader), never a TypeError.
    """
    if value is None:
        return None
    return core_shape_of(value, field=field, request_id=request_id)


def handle_rows(mm_handles, *, request_id=None) -> list:
    """Rows per embedding handle (``tensor_size[0]``), in item order."""
    rows = []
    for i, handle in enumerate(mm_handles or ()):
        field = f"multimodal_embedding_handles[{i}].tensor_size"
        shape = shape_of(handle, field=field, request_id=request_id)
        if not shape:
            raise HandoffError(field, "[rows, width]", shape,
                               request_id=request_id)
        rows.append(shape[0])
    return rows


def request_label(disaggregated_params=None, fallback=None):
    """A name for a request in error messages, from what the check point can see.

    The E/PD request has no engine id yet at admission: use the disaggregated request id, else the
    context request id, else the first multimodal hash (``mm:xxxxxxxx``), else ``fallback``.
    """
    for name in ("disagg_request_id", "ctx_request_id"):
        value = getattr(disaggregated_params, name, None)
        if value is not None:
            return value
    hashes = getattr(disaggregated_params, "multimodal_hashes", None)
    if hashes and isinstance(hashes[0], (list, tuple)) and hashes[0]:
        return "mm:" + "".join(f"{int(v) & 0xFFFFFFFF:08x}" for v in hashes[0][:2])
    return fallback


# ---------------------------------------------------------------------------- adapters
_ADAPTERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_ADAPTERS_LOCK = threading.Lock()


def adapter_for(processor, *, convention: Optional[str] = None):
    """The family adapter of a TensorRT-LLM input processor, resolved through the registry by class
    (along the MRO) with the processor's tokenizer and config; cached per processor instance."""
    cache_key = (convention,)
    try:
        with _ADAPTERS_LOCK:
            cached = _ADAPTERS.get(processor, {}).get(cache_key)
        if cached is not None:
            return cached
    except TypeError:  # not weak-referenceable
        cached = None
    factory = REGISTRY.resolve(type(processor))
    tokenizer = getattr(processor, "tokenizer", None)
    config = getattr(processor, "config", None)
    adapter = factory(tokenizer=tokenizer, config=config, convention=convention)
    try:
        with _ADAPTERS_LOCK:
            _ADAPTERS.setdefault(processor, {})[cache_key] = adapter
    except TypeError:
        pass
    return adapter


# --------------------------------------------------------------------------- decoding
_DECODED = threading.local()


def decode_layout(wire, *, request_id=None):
    """``HandoffLayout.from_wire`` with a one-slot per-thread cache (prefill and admission decode the
    same payload of one request back to back)."""
    from ..layout import HandoffLayout

    slot = getattr(_DECODED, "slot", None)
    if slot is not None and slot[0] is wire and isinstance(wire, dict) and slot[1] == wire.get("checksum"):
        return slot[2]
    layout = HandoffLayout.from_wire(wire, request_id=request_id)
    _DECODED.slot = (wire, wire.get("checksum") if isinstance(wire, dict) else None, layout)
    return layout


# ------------------------------------------------------------------------ encoder side
def _to_list(value):
    """Tensor / array / SharedTensorContainer handle dict / list -> nested Python list."""
    if value is None:
        return None
    if isinstance(value, dict) and "tensor_size" in value:
        from tensorrt_llm._torch.shared_tensor import SharedTensorContainer

        value = SharedTensorContainer.from_dict(value).get_local_view()
    if hasattr(value, "detach"):
        value = value.detach().cpu()
    if hasattr(value, "tolist"):
        return value.tolist()
    return [list(v) if isinstance(v, (list, tuple)) else v for v in value]


def grids_from_multimodal_data(multimodal_data) -> dict:
    """``{"image_grid_thw": [...], "video_grid_thw": [...]}`` from a request's ``multimodal_data``."""
    data = multimodal_data or {}
    out = {}
    for modality, key in (("image", "image_grid_thw"), ("video", "video_grid_thw")):
        sub = data.get(modality)
        grid = sub.get(key) if isinstance(sub, dict) else None
        grid = _to_list(grid)
        if grid:
            out[key] = [[int(x) for x in g] for g in grid]
    return out


def _json_value(value):
    if hasattr(value, "detach"):
        value = value.detach().cpu()
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, (list, tuple)):
        items = [_json_value(v) for v in value]
        return items
    return None


def json_safe_metadata(videos) -> list:
    """Per video, the JSON-safe scalar/list fields of its IO-loader metadata."""
    out = []
    for video in videos or ():
        meta = getattr(video, "metadata", None) if not isinstance(video, dict) else video.get("metadata", video)
        entry = {}
        for key, value in dict(meta or {}).items():
            safe = _json_value(value)
            if safe is not None or value is None:
                entry[str(key)] = safe
        frames = getattr(video, "frames", None)
        if frames is not None:  # as TensorRT-LLM passes it to HF: the decoded frame count
            entry["total_num_frames"] = len(frames)
        out.append(entry)
    return out
