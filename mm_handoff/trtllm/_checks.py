"""The check points outside the prefill rebuild: admission, worker ingress, context-phase slice.

Each one calls the core validator (:mod:`mm_handoff.validate`); none re-implements a rule. A failed
check goes through :func:`enforce`, which applies the policy the same way everywhere:

* ``raise``: the typed error (a ``ValueError``) propagates, naming the request;
* ``fallback``: a warning, and the engine goes on with what it has;
* ``rebuild``: where a rebuild is possible (the prefill point) the caller passes ``rebuild=``;
  everywhere else it behaves as ``raise``.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

import numpy as np

from ..errors import AdapterNotFoundError, EmbeddingCountError, HandoffError
from ..policy import Policy
from ..checks import check_mrope_slice, validate
from ._carrier import LAYOUT_KEY, adapter_for, carried, decode_layout, embedding_handles, handle_rows, shape_of

__all__ = [
    "enforce",
    "find_multimodal_params",
    "check_admission",
    "check_ingress",
    "check_context_slices",
    "mrope_ids_of",
]

log = logging.getLogger("mm_handoff.trtllm")

FALLBACK = object()


def enforce(policy: Policy, error: HandoffError, *, where: str, rebuild: Optional[Callable] = None):
    """Apply the policy to one failed check; returns ``rebuild()``'s value or :data:`FALLBACK`."""
    if policy is Policy.FALLBACK:
        log.warning("mm-handoff: %s: %s (policy=fallback: continuing with the engine's own behaviour)",
                    where, error)
        return FALLBACK
    if policy is Policy.REBUILD and rebuild is not None:
        log.info("mm-handoff: %s: %s (policy=rebuild: rebuilding the aggregated layout)", where, error)
        return rebuild()
    raise error


def find_multimodal_params(result):
    """The ``MultimodalParams`` in a ``_preprocess`` result of any arity (by type name, then by shape)."""
    if not isinstance(result, tuple):
        return None
    for value in result:
        if any(k.__name__ == "MultimodalParams" for k in type(value).__mro__):
            return value
    for value in result:
        if hasattr(value, "multimodal_data") and hasattr(value, "multimodal_input"):
            return value
    return None


def mrope_ids_of(multimodal_data) -> object:
    cfg = (multimodal_data or {}).get("mrope_config") if isinstance(multimodal_data, dict) else None
    return cfg.get("mrope_position_ids") if isinstance(cfg, dict) else None


def _pad_ids(processor) -> Optional[np.ndarray]:
    try:
        spec = adapter_for(processor).spec
    except AdapterNotFoundError:  # not a family mm-handoff knows: only generic checks apply
        return None
    return np.asarray([spec.image_pad, spec.video_pad], dtype=np.int64)


def check_admission(processor, result, disaggregated_params, *, request_id=None, prefill_layout=None) -> None:
    """After ``BaseLLM._preprocess``: mRoPE length vs prompt, pads vs embedding rows, the layout the
    prefill point used (else the carried one) vs the prompt actually used. Shapes come from handle
    dicts (``tensor_size``): nothing is rebuilt."""
    if not isinstance(result, tuple) or not result or result[0] is None:
        return
    prompt_ids = result[0]
    mm_params = find_multimodal_params(result)
    mrope = mrope_ids_of(getattr(mm_params, "multimodal_data", None))
    if mrope is None:
        mrope = getattr(disaggregated_params, "mrope_position_ids_handle", None)
    handles = embedding_handles(disaggregated_params)
    if mrope is None and handles is None:
        return
    if handles is None and len(prompt_ids) <= 1:
        return  # encoder-decoder placeholder prompt ([0]); nothing to compare
    layout = prefill_layout
    if layout is None and handles is not None and carried(handles).get(LAYOUT_KEY) is not None:
        layout = decode_layout(carried(handles)[LAYOUT_KEY], request_id=request_id)
    if layout is not None:
        validate(layout, prompt_token_ids=prompt_ids, mrope_position_ids=shape_of(mrope),
                 embedding_rows=handle_rows(handles, request_id=request_id), request_id=request_id)
        return
    if mrope is not None:
        check_mrope_slice(shape_of(mrope), len(prompt_ids), request_id=request_id)
    if handles is not None:
        pads = _pad_ids(processor)
        if pads is not None:
            found = int(np.count_nonzero(np.isin(np.asarray(prompt_ids), pads)))
            rows = sum(handle_rows(handles, request_id=request_id))
            if found != rows:
                raise EmbeddingCountError("prompt_token_ids (image/video pads)",
                                          f"{rows} (rows of the encoder's embedding handles)", found,
                                          request_id=request_id)


def check_ingress(request) -> None:
    """Before ``BaseWorker._enqueue_request``: the request's mRoPE ids cover its prompt exactly."""
    mm_params = getattr(request, "multimodal_params", None)
    mrope = mrope_ids_of(getattr(mm_params, "multimodal_data", None))
    if mrope is None:
        return
    prompt = getattr(request, "prompt_token_ids", None)
    if prompt is None:
        return
    check_mrope_slice(shape_of(mrope), len(prompt), request_id=getattr(request, "id", None))


def check_context_slices(scheduled_requests) -> None:
    """Before ``_prepare_tp_inputs``: each scheduled context request's mRoPE ids cover its prompt, so
    ``mrope_pos_ids[:, :, begin:begin + len(chunk)]`` cannot silently cut a longer tensor. Shapes only."""
    for request in getattr(scheduled_requests, "context_requests", None) or ():
        mrope = mrope_ids_of(getattr(request, "py_multimodal_data", None))
        if mrope is None:
            continue
        prompt_len = getattr(request, "py_prompt_len", None)
        if prompt_len is None:
            prompt_len = request.get_num_tokens(0)
        begin = int(getattr(request, "context_current_position", 0) or 0)
        chunk = getattr(request, "context_chunk_size", None)
        end = prompt_len if chunk is None else min(begin + int(chunk), prompt_len)
        check_mrope_slice(shape_of(mrope), prompt_len, begin=begin, end=end,
                          request_id=getattr(request, "py_request_id", None))
