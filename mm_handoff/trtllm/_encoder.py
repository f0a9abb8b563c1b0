"""The encoder side: ``MultimodalEncoder.generate_async`` and the ``_preprocess`` it runs.

``MultimodalEncoder.generate_async`` runs ``BaseLLM._preprocess`` (aggregated branch) synchronously in
the caller's thread (``tensorrt_llm/llmapi/llm.py``). Two wrappers, one file: :func:`preprocess_wrapper`
(on ``MultimodalEncoder._preprocess``) keeps the expanded ids and grids of the call in the slot that
:func:`generate_async_wrapper` opened for it; ``generate_async_wrapper`` then derives the layout with
the family adapter and stamps it (plus grids and video metadata) into
``disaggregated_params.multimodal_embedding_handles[0]``, at once when the output is already complete,
else when its response arrives (``_handle_response`` on that one output object).

The slot is a :class:`contextvars.ContextVar`: concurrent ``generate_async`` calls in other threads
or tasks each see their own.
"""

from __future__ import annotations

import contextvars
import logging
import math
from typing import Optional

import numpy as np

from ..accept import call_adapter
from ..errors import AdapterNotFoundError, HandoffError
from ..policy import Policy
from ._carrier import (
    GRIDS_KEY,
    LAYOUT_KEY,
    VIDEO_METADATA_KEY,
    adapter_for,
    adapter_value,
    embedding_handles,
    enforce,
    find_multimodal_params,
)

__all__ = ["generate_async_wrapper", "preprocess_wrapper", "build_stamp", "stamp_handles", "attach_stamp",
           "grids_from_multimodal_data", "json_safe_metadata"]

log = logging.getLogger("mm_handoff.trtllm")

#: the capture slot of the ``generate_async`` call in progress in this context (None outside one)
_SLOT: contextvars.ContextVar[Optional[dict]] = contextvars.ContextVar("mm_handoff_encoder_slot", default=None)


def preprocess_wrapper(wrapped, encoder, args, kwargs, *, policy: Policy):
    """``MultimodalEncoder._preprocess``: run it; keep the expanded ids and grids for the open slot."""
    result = wrapped(*args, **kwargs)
    slot = _SLOT.get()
    if slot is not None and "prompt_token_ids" not in slot and isinstance(result, tuple) and result:
        slot["prompt_token_ids"] = result[0]
        mm_params = find_multimodal_params(result)
        slot["grids"] = grids_from_multimodal_data(getattr(mm_params, "multimodal_data", None))
    return result


def generate_async_wrapper(wrapped, encoder, args, kwargs, *, policy: Policy):
    """``MultimodalEncoder.generate_async``: run it with a capture slot open, then stamp the output."""
    inputs = args[0] if args else kwargs.get("inputs")
    slot: dict = {}
    token = _SLOT.set(slot)
    try:
        output = wrapped(*args, **kwargs)
    finally:
        _SLOT.reset(token)
    ids, grids = slot.get("prompt_token_ids"), slot.get("grids")
    if ids is None or not grids:
        return output  # text only, or _preprocess was bypassed (PreprocessedInputs)
    request_id = getattr(output, "request_id", None)
    try:
        adapter = adapter_for(getattr(encoder, "input_processor", None), request_id=request_id)
        stamp = build_stamp(adapter, ids, grids, inputs, policy=policy, request_id=request_id)
    except AdapterNotFoundError:  # not a family mm-handoff knows: its handoff is not ours to stamp
        return output
    except HandoffError as exc:  # no adapter for this processor, or one that fails: nothing is shipped
        enforce(policy, exc, where="encoder (building the stamp)")
        return output
    attach_stamp(output, stamp)
    return output


def build_stamp(adapter, ids, grids: dict, inputs, *, policy: Policy, request_id=None) -> dict:
    """The keys to stamp: grids + video metadata always, the layout when it derives cleanly."""
    videos = (inputs.get("multi_modal_data") or {}).get("video") if isinstance(inputs, dict) else None
    stamp = {
        GRIDS_KEY: {"family": adapter_value(adapter, "family", request_id=request_id),
                    "convention": adapter_value(adapter, "convention", request_id=request_id),
                    "image_grid_thw": grids.get("image_grid_thw"), "video_grid_thw": grids.get("video_grid_thw")},
        VIDEO_METADATA_KEY: json_safe_metadata(videos),
    }
    try:
        layout = call_adapter(adapter, "derive_layout", ids, image_grid_thw=grids.get("image_grid_thw"),
                              video_grid_thw=grids.get("video_grid_thw"), mrope=False, request_id=request_id)
    except HandoffError as exc:
        # the prefill side can still rebuild from the grids; under policy=raise this request fails here
        enforce(policy, exc, where="encoder (deriving the layout to ship)", rebuild=lambda: None)
        return stamp
    stamp[LAYOUT_KEY] = layout.to_wire()
    return stamp


def stamp_handles(handles, stamp: dict) -> None:
    first = handles[0]
    for key, value in stamp.items():
        first.setdefault(key, value)


def attach_stamp(output, stamp: dict) -> None:
    """Stamp ``output``'s handles now, or when that output's own response arrives."""
    handles = embedding_handles(getattr(output, "disaggregated_params", None))
    if handles is not None:
        stamp_handles(handles, stamp)
        return
    original = getattr(output, "_handle_response", None)
    if original is None:
        log.warning("mm-handoff: encoder output %r has no handles yet and no _handle_response; "
                    "its layout is not shipped", getattr(output, "request_id", None))
        return

    def handle_response_and_stamp(*args, **kwargs):
        value = original(*args, **kwargs)
        ready = embedding_handles(getattr(output, "disaggregated_params", None))
        if ready is not None:
            stamp_handles(ready, stamp)
        return value

    try:
        output._handle_response = handle_response_and_stamp
    except (AttributeError, TypeError):
        log.warning("mm-handoff: cannot defer stamping on %s; its layout is not shipped", type(output).__name__)


# ------------------------------------------------------------------------------ what is stamped
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
        grid = _to_list(sub.get(key) if isinstance(sub, dict) else None)
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
        return [_json_value(v) for v in value]
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
