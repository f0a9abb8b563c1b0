"""The encoder side: stamp the encoder's expanded prompt into the handoff it returns.

``MultimodalEncoder.generate_async`` runs ``BaseLLM._preprocess`` (aggregated branch) synchronously in
the caller's thread. The admission wrapper drops the expanded ids and the grids into a thread-local
capture slot opened by the encoder wrapper; the encoder wrapper then derives the layout with the
family adapter and stamps it (plus grids and video metadata) into
``disaggregated_params.multimodal_embedding_handles[0]``, at once when the output is already complete,
else when its response arrives (``_handle_response`` on that one output object).
"""

from __future__ import annotations

import contextlib
import logging
import threading

from ..errors import HandoffError
from ._carrier import (
    GRIDS_KEY,
    LAYOUT_KEY,
    VIDEO_METADATA_KEY,
    adapter_for,
    embedding_handles,
    grids_from_multimodal_data,
    json_safe_metadata,
)
from ._checks import enforce, find_multimodal_params
from ._state import STATE

__all__ = ["encoder_hook", "note_preprocessed", "build_stamp", "stamp_handles"]

log = logging.getLogger("mm_handoff.trtllm")

_CAPTURE = threading.local()


@contextlib.contextmanager
def _capture():
    previous = getattr(_CAPTURE, "slot", None)
    slot: dict = {}
    _CAPTURE.slot = slot
    try:
        yield slot
    finally:
        _CAPTURE.slot = previous


def note_preprocessed(result) -> None:
    """Called by the admission wrapper: keep the expanded ids and grids for an open capture slot."""
    slot = getattr(_CAPTURE, "slot", None)
    if slot is None or "prompt_token_ids" in slot or not isinstance(result, tuple) or not result:
        return
    slot["prompt_token_ids"] = result[0]
    mm_params = find_multimodal_params(result)
    slot["grids"] = grids_from_multimodal_data(getattr(mm_params, "multimodal_data", None))


def build_stamp(processor, ids, grids: dict, inputs, *, request_id=None) -> dict:
    """The keys to stamp: grids + video metadata always, the layout when it derives cleanly."""
    adapter = adapter_for(processor)
    videos = (inputs.get("multi_modal_data") or {}).get("video") if isinstance(inputs, dict) else None
    stamp = {
        GRIDS_KEY: {"family": adapter.family, "convention": adapter.convention,
                    "image_grid_thw": grids.get("image_grid_thw"), "video_grid_thw": grids.get("video_grid_thw")},
        VIDEO_METADATA_KEY: json_safe_metadata(videos),
    }
    try:
        layout = adapter.derive_layout(ids, image_grid_thw=grids.get("image_grid_thw"),
                                       video_grid_thw=grids.get("video_grid_thw"), mrope=False,
                                       request_id=request_id)
    except HandoffError as exc:
        # the prefill side can still rebuild from the grids; under policy=raise this request fails here
        enforce(STATE.policy, exc, where="encoder (deriving the layout to ship)", rebuild=lambda: None)
        return stamp
    stamp[LAYOUT_KEY] = layout.to_wire()
    return stamp


def stamp_handles(handles, stamp: dict) -> None:
    first = handles[0]
    for key, value in stamp.items():
        first.setdefault(key, value)


def _attach(output, stamp: dict) -> None:
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


def encoder_hook(wrapped, encoder, args, kwargs):
    """Wrapper body for ``MultimodalEncoder.generate_async``."""
    inputs = args[0] if args else kwargs.get("inputs")
    with _capture() as slot:
        output = wrapped(*args, **kwargs)
    ids, grids = slot.get("prompt_token_ids"), slot.get("grids")
    if ids is None or not grids:
        return output  # text only, or _preprocess was bypassed (PreprocessedInputs)
    processor = getattr(encoder, "input_processor", None)
    stamp = build_stamp(processor, ids, grids, inputs, request_id=getattr(output, "request_id", None))
    _attach(output, stamp)
    return output
