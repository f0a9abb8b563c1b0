"""The prefill point: ``build_disagg_prefill_multimodal_inputs`` (older releases: ``get_prompt_token_ids``).

Stock TensorRT-LLM re-tokenizes the text prompt and expands each placeholder into one pad run
(no timestamps, no per-group markers). Wrapped, it uses the encoder's layout when the handles carry
it: decode, check skew against this side's adapter, check handles vs layout (one per item, rows,
width), and return the aggregated path's values. Otherwise the policy decides:

* ``rebuild``: rebuild the exact ids from the prompt + the carried grids and video metadata;
* ``raise``: a typed error naming the field;
* ``fallback``: the stock rebuild, with a warning.

A request without video keeps the stock result when nothing is carried: for images the stock ids
equal the aggregated ones.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

from ..errors import EmbeddingCountError, HandoffError
from ..policy import Policy
from ..checks import check_skew, check_token_ids, validate
from ._carrier import (
    GRIDS_KEY,
    LAYOUT_KEY,
    VIDEO_METADATA_KEY,
    adapter_for,
    carried,
    decode_layout,
    handle_rows,
)
from ._checks import FALLBACK, enforce
from ._state import STATE

__all__ = ["prefill_hook", "layout_from_carried", "check_handles", "disagg_prefill_inputs", "NEW_NAME", "OLD_NAME",
           "reset_used_layout", "used_layout"]

NEW_NAME = "build_disagg_prefill_multimodal_inputs"
OLD_NAME = "get_prompt_token_ids"

_REENTRY = threading.local()
#: the layout the prefill point answered with in this thread (admission checks the prompt against it)
_USED = threading.local()


def reset_used_layout() -> None:
    _USED.layout = None


def used_layout():
    return getattr(_USED, "layout", None)


def check_handles(layout, mm_handles, adapter, *, request_id=None) -> None:
    """One handle per item, rows per item == pads per item, row width == hidden * (1 + deepstack)."""
    if not isinstance(mm_handles, list):
        raise HandoffError("multimodal_embedding_handles", "a list of handle dicts", type(mm_handles).__name__,
                           request_id=request_id)
    if len(mm_handles) != len(layout.items):
        raise EmbeddingCountError("multimodal_embedding_handles", f"{len(layout.items)} (one per image/video)",
                                  len(mm_handles), request_id=request_id)
    validate(layout, embedding_rows=handle_rows(mm_handles, request_id=request_id), request_id=request_id)
    width = adapter.handle_row_width
    if width is not None:
        for i, handle in enumerate(mm_handles):
            size = handle.get("tensor_size")
            if len(size) > 1 and int(size[1]) != width:
                raise EmbeddingCountError(f"multimodal_embedding_handles[{i}].tensor_size[1]",
                                          f"{width} (hidden size x (1 + deepstack levels))", int(size[1]),
                                          request_id=request_id)


def layout_from_carried(processor, wire, mm_handles, *, inputs=None, request_id=None):
    """Decode the encoder's layout and check it against this side (skew, handles, this request's prompt)."""
    layout = decode_layout(wire, request_id=request_id)
    adapter = adapter_for(processor)
    check_skew(layout, family=adapter.family, convention=adapter.convention,
               tokenizer_digest=adapter.tokenizer_digest, request_id=request_id)
    check_handles(layout, mm_handles, adapter, request_id=request_id)
    check_own_prompt(processor, adapter, layout, inputs, request_id=request_id)
    return layout


def check_own_prompt(processor, adapter, layout, inputs, *, request_id=None) -> None:
    """The PD request's own prompt must be the one the encoder expanded (handles mixed up between
    requests would otherwise run another request's prompt). Expanded ids are compared as they are;
    a text prompt is tokenized as upstream does and its text checked where the expansion puts it."""
    if not isinstance(inputs, dict) or not (inputs.get("prompt_token_ids") is not None or inputs.get("prompt")):
        return
    ids = _prompt_ids(processor, inputs, request_id)
    if len(ids) == layout.prompt_len:  # already expanded (the P -> D hop passes the encoder's ids)
        check_token_ids(layout.token_ids, ids, request_id=request_id, field="prompt_token_ids")
    else:
        adapter.check_prompt(layout, ids, request_id=request_id)


def _prompt_ids(processor, inputs, request_id):
    ids = inputs.get("prompt_token_ids") if isinstance(inputs, dict) else None
    if ids is not None:
        return np.asarray(ids)
    text = inputs.get("prompt") if isinstance(inputs, dict) else None
    if not text:
        raise HandoffError("inputs['prompt']", "the text prompt (to rebuild the layout from)", None,
                           request_id=request_id)
    out = processor.tokenizer(text, return_tensors="pt").input_ids[0]  # as upstream tokenizes it
    return np.asarray(out.tolist() if hasattr(out, "tolist") else out)


def rebuild_from_carried(processor, inputs, mm_handles, found, *, request_id=None):
    """The exact aggregated layout from the prompt, the carried grids and the video metadata."""
    grids = found.get(GRIDS_KEY)
    if not isinstance(grids, dict):
        raise HandoffError(f"multimodal_embedding_handles[0][{GRIDS_KEY!r}]",
                           "the encoder's grids (and video metadata) to rebuild from", grids,
                           request_id=request_id, hint="policy=rebuild needs them; the encoder stamps them")
    adapter = adapter_for(processor, convention=grids.get("convention"))
    layout = adapter.rebuild_layout(_prompt_ids(processor, inputs, request_id),
                                    image_grid_thw=grids.get("image_grid_thw"),
                                    video_grid_thw=grids.get("video_grid_thw"),
                                    video_metadata=found.get(VIDEO_METADATA_KEY), mrope=False,
                                    request_id=request_id)
    check_handles(layout, mm_handles, adapter, request_id=request_id)
    return layout


def disagg_prefill_inputs(layout, result_class):
    """The original method's return value built from a layout (same values as the aggregated path)."""
    kwargs = layout.to_disagg_prefill_inputs()
    if dataclasses.is_dataclass(result_class):
        names = {f.name for f in dataclasses.fields(result_class)}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return result_class(**kwargs)


def _result_class(wrapped):
    func = getattr(wrapped, "__func__", wrapped)
    cls = getattr(func, "__globals__", {}).get("DisaggPrefillMultimodalInputs")
    if cls is None:
        from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs as cls
    return cls


def _as_result(layout, wrapped, name):
    _USED.layout = layout
    if name == OLD_NAME:  # the get_prompt_token_ids era returned (ids, positions, lengths)
        return layout.token_id_list(), layout.multimodal_positions, layout.multimodal_lengths
    return disagg_prefill_inputs(layout, _result_class(wrapped))


def _has_video(result, processor) -> bool:
    types = getattr(result, "item_types", None)
    if types is not None:
        return 1 in types
    ids = getattr(result, "prompt_token_ids", None)
    if ids is None and isinstance(result, tuple) and result:
        ids = result[0]
    try:
        video_pad = adapter_for(processor).spec.video_pad
    except HandoffError:
        return True
    return ids is not None and video_pad in np.asarray(ids)


def prefill_hook(wrapped, processor, args, kwargs, *, name=NEW_NAME):
    """Wrapper body for the prefill method (see module doc)."""
    if getattr(_REENTRY, "active", False):  # an override calling super(): the outer call decides
        return wrapped(*args, **kwargs)
    inputs = args[0] if args else kwargs.get("inputs")
    mm_handles = args[1] if len(args) > 1 else kwargs.get("mm_handles")
    _REENTRY.active = True
    try:
        return _prefill(wrapped, processor, args, kwargs, inputs, mm_handles, name)
    finally:
        _REENTRY.active = False


def _prefill(wrapped, processor, args, kwargs, inputs, mm_handles, name):
    policy = STATE.policy
    found = carried(mm_handles, inputs)

    def rebuild():
        return _as_result(rebuild_from_carried(processor, inputs, mm_handles, found), wrapped, name)

    can_rebuild = GRIDS_KEY in found
    if LAYOUT_KEY in found:
        try:
            layout = layout_from_carried(processor, found[LAYOUT_KEY], mm_handles, inputs=inputs)
        except HandoffError as exc:
            out = enforce(policy, exc, where="prefill (carried layout)", rebuild=rebuild if can_rebuild else None)
            return wrapped(*args, **kwargs) if out is FALLBACK else out
        return _as_result(layout, wrapped, name)
    if can_rebuild and policy is Policy.REBUILD:
        return rebuild()
    stock = wrapped(*args, **kwargs)
    if not _has_video(stock, processor):
        return stock
    error = HandoffError(f"multimodal_embedding_handles[0][{LAYOUT_KEY!r}]",
                         "the encoder's layout (install mm_handoff.trtllm on the encoder side)", "absent",
                         hint="a video prompt rebuilt from text has no timestamps and one pad run per video")
    out = enforce(policy, error, where="prefill (no carried layout)", rebuild=rebuild if can_rebuild else None)
    return stock if out is FALLBACK else out
