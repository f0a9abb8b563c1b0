"""The encoder side: ``MultimodalEncoder.generate_async`` and the ``_preprocess`` it runs.

``MultimodalEncoder.generate_async`` runs ``BaseLLM._preprocess`` (aggregated branch) synchronously in
the caller's thread (``tensorrt_llm/llmapi/llm.py``). Three wrappers, one file: :func:`to_handle_wrapper`
(on ``MultimodalParams.to_handle``) reads the grids while they are still tensors, before ``_preprocess``
turns them into ``SharedTensorContainer`` handles; :func:`preprocess_wrapper` (on
``MultimodalEncoder._preprocess``) keeps the expanded ids; both fill the slot that
:func:`generate_async_wrapper` opened for the call, which then derives the layout with the family adapter
and attaches it (plus grids and video metadata) into ``disaggregated_params.multimodal_embedding_handles[0]``,
at once when the output is already complete, else when its response arrives (``_handle_response`` on that
one output object).

The handles belong to the engine and serve exactly one consumer (upstream's ``SharedTensorContainer``
@ 26f204627ad82077ec8490879ef633c6968e7b1c: each ``dump_to_dict`` adds one reference to the shared-memory
file, each rebuild-and-free removes one, and same-process ``local`` handles are popped on first read). The
worker's ``to_tensor`` is that consumer, so nothing here ever rebuilds a handle: a grid that is already a
handle is not read.

The slot is a :class:`~mm_handoff.glue.scope.RequestScope`: concurrent ``generate_async`` calls in other
threads or tasks each see their own. ``generate_async`` runs the ``encoder`` check point
(:mod:`mm_handoff.glue.checkpoint`); the two others only fill its slot.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ..adapters.base import typed_adapter
from ..errors import AdapterNotFoundError, HandoffError
from ..glue.checkpoint import CheckPoint, Visit
from ..glue.policy import Decision, Policy
from ..glue.scope import RequestScope
from ._carrier import (
    GRIDS_KEY,
    LAYOUT_KEY,
    VIDEO_METADATA_KEY,
    adapter_for,
    embedding_handles,
    find_multimodal_params,
    own_prompt,
)

log = logging.getLogger("mm_handoff.trtllm")

#: the capture slot of the ``generate_async`` call in progress in this context (None outside one)
_SLOT: RequestScope[dict] = RequestScope("mm_handoff_encoder_slot")


def to_handle_wrapper(wrapped, params, args, kwargs, *, point: CheckPoint):
    """``MultimodalParams.to_handle``: inside an open slot, read the grids first (still tensors)."""
    slot = _SLOT.get()
    element = args[0] if args else kwargs.get("element")
    if slot is not None and "grids" not in slot and element == "multimodal_data":
        slot["grids"] = grids_from_multimodal_data(getattr(params, "multimodal_data", None))
    return wrapped(*args, **kwargs)


def preprocess_wrapper(wrapped, encoder, args, kwargs, *, point: CheckPoint):
    """``MultimodalEncoder._preprocess``: run it; keep the expanded ids (and grids still unread)."""
    result = wrapped(*args, **kwargs)
    slot = _SLOT.get()
    if slot is not None and "prompt_token_ids" not in slot and isinstance(result, tuple) and result:
        slot["prompt_token_ids"] = result[0]
        if "grids" not in slot:  # no to_handle ran: the grids are plain values, or handles left unread
            mm_params = find_multimodal_params(result)
            slot["grids"] = grids_from_multimodal_data(getattr(mm_params, "multimodal_data", None))
    return result


def _skips_preprocess(inputs) -> bool:
    """``PreprocessedInputs`` with multimodal data: ``_preprocess`` already ran, outside any slot."""
    params = getattr(inputs, "multimodal_params", None)
    return (not isinstance(inputs, (dict, str, list)) and hasattr(inputs, "prompt_token_ids")
            and params is not None and bool(getattr(params, "multimodal_data", None)))


def generate_async_wrapper(wrapped, encoder, args, kwargs, *, point: CheckPoint):
    """``MultimodalEncoder.generate_async``: run it with a capture slot open, then attach to the output."""
    inputs = args[0] if args else kwargs.get("inputs")
    with point.visit() as visit:
        if _skips_preprocess(inputs):
            visit.decide(HandoffError(
                "inputs", "the prompt dict (generate_async runs _preprocess, where mm-handoff reads what it attaches)",
                f"{type(inputs).__name__} from preprocess()",
                hint="this request's layout is not stamped; pass the raw inputs to generate_async"))
            return visit.call(wrapped, *args, **kwargs)  # policy=fallback: unstamped
        with _SLOT.opened({}) as slot:
            output = visit.call(wrapped, *args, **kwargs)
        ids, grids = slot.get("prompt_token_ids"), slot.get("grids")
        if ids is None or not grids:
            visit.skip()
            return output  # text only, or _preprocess was bypassed (PreprocessedInputs)
        request_id = getattr(output, "request_id", None)
        visit.named(request_id)
        try:
            adapter = adapter_for(getattr(encoder, "input_processor", None), request_id=request_id)
            visit.uses(adapter)
            carried = build_carried(adapter, ids, grids, inputs, visit=visit, request_id=request_id,
                                    prompt_ids=_prompt_ids(encoder, inputs))
        except AdapterNotFoundError:  # not a family mm-handoff knows: its handoff is not ours to carry
            visit.skip()
            return output
        except HandoffError as exc:  # no adapter for this processor, or one that fails: nothing is shipped
            visit.decide(exc)
            return output  # policy=fallback: unstamped
        attach_carried(output, carried)
        return output


def _prompt_ids(encoder, inputs):
    """This request's unexpanded prompt ids (as the prefill side tokenizes them), or None."""
    processor = getattr(encoder, "input_processor", None)
    try:
        return None if processor is None else own_prompt(processor, inputs)
    except Exception:  # no tokenizer, no text: the rebuild check then says "not reproducible"
        return None


def build_carried(adapter, ids, grids: dict, inputs, *, visit: Visit | None = None, policy: Policy | None = None,
                  request_id=None, prompt_ids=None) -> dict:
    """The keys to attach: grids + video metadata always, the layout when it derives cleanly (else what
    ``visit``, the encoder's check point, decides: the error raised, or the grids shipped without it; called
    outside a hooked call, ``policy`` decides, and nothing is recorded).

    The metadata is the IO loader's; HF may have sampled other frames (Qwen3-VL samples by default), so a
    rebuild from it is offered only when it reproduces these ids (checked here, where both are known).
    """
    if visit is None:
        visit = CheckPoint("trtllm", "encoder", policy or Policy.RAISE).visit(request_id)
    adapter = typed_adapter(adapter, request_id=request_id)
    videos = (inputs.get("multi_modal_data") or {}).get("video") if isinstance(inputs, dict) else None
    carried: dict[str, Any] = {
        GRIDS_KEY: {"family": adapter.family, "convention": adapter.convention,
                    "image_grid_thw": grids.get("image_grid_thw"), "video_grid_thw": grids.get("video_grid_thw")},
        VIDEO_METADATA_KEY: json_safe_metadata(videos),
    }
    try:
        layout = adapter.derive_layout(ids, image_grid_thw=grids.get("image_grid_thw"),
                                       video_grid_thw=grids.get("video_grid_thw"), mrope=False, request_id=request_id)
    except HandoffError as exc:  # policy=raise: this request fails here; otherwise Decision.SHIP_GRIDS
        visit.decide(exc.with_request(request_id), remedy=Decision.SHIP_GRIDS)
        return carried  # the grids and metadata without a layout: the prefill side can rebuild from them
    carried[LAYOUT_KEY] = layout.to_wire()
    if videos and not _rebuild_reproduces(adapter, prompt_ids, grids, carried[VIDEO_METADATA_KEY], layout):
        carried[GRIDS_KEY]["rebuildable"] = False
        log.warning("mm-handoff: request %r: the video metadata does not reproduce the frames HF sampled; "
                    "no rebuild is offered for it", request_id)
    return carried


def _rebuild_reproduces(adapter, prompt_ids, grids: dict, metadata, layout) -> bool:
    """Whether rebuilding from the prompt, grids and carried metadata gives exactly ``layout``'s ids."""
    if prompt_ids is None:
        return False
    try:
        rebuilt = adapter.rebuild_token_ids(prompt_ids, image_grid_thw=grids.get("image_grid_thw"),
                                            video_grid_thw=grids.get("video_grid_thw"), video_metadata=metadata)
    except Exception:  # any failure means: not reproducible
        return False
    return np.array_equal(np.asarray(rebuilt), np.asarray(layout.token_ids))


def attach_to_handles(handles, carried: dict) -> None:
    first = handles[0]
    for key, value in carried.items():
        first.setdefault(key, value)


def attach_carried(output, carried: dict) -> None:
    """Stamp ``output``'s handles now, or when that output's own response arrives."""
    handles = embedding_handles(getattr(output, "disaggregated_params", None))
    if handles is not None:
        attach_to_handles(handles, carried)
        return
    original = getattr(output, "_handle_response", None)
    if original is None:
        log.warning("mm-handoff: encoder output %r has no handles yet and no _handle_response; "
                    "its layout is not shipped", getattr(output, "request_id", None))
        return

    def handle_response_and_attach(*args, **kwargs):
        value = original(*args, **kwargs)
        ready = embedding_handles(getattr(output, "disaggregated_params", None))
        if ready is not None:
            attach_to_handles(ready, carried)
        return value

    try:
        output._handle_response = handle_response_and_attach
    except (AttributeError, TypeError):
        log.warning("mm-handoff: cannot defer stamping on %s; its layout is not shipped", type(output).__name__)


# ------------------------------------------------------------------------------ what is stamped
def _to_list(value):
    """Tensor / array / list -> nested Python list; an engine handle (dict) is never rebuilt: None."""
    if value is None or isinstance(value, dict):
        return None
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
