"""The executor worker: ``BaseWorker._enqueue_request`` (ingress) and ``_prepare_tp_inputs`` (the slice).

Both run in the worker process (spawned or MPI-started), reached only through the start-up hook
(``mm-handoff run``, the ``.pth`` line) or ``TLLM_WORKER_USE_SINGLE_PROCESS=1``. Both are shape-only
checks that the request's mRoPE ids cover its prompt exactly, through the core's
:func:`~mm_handoff.checks.check_mrope_slice`; then the original runs, untouched.
"""

from __future__ import annotations

import logging

from ..checks import check_mrope_slice
from ..errors import HandoffError
from ..glue.policy import Policy, decide
from ._carrier import mrope_ids_of

log = logging.getLogger("mm_handoff.trtllm")


def enqueue_request_wrapper(wrapped, worker, args, kwargs, *, policy: Policy):
    """``BaseWorker._enqueue_request``: the restored request's mRoPE ids vs its prompt, before enqueue."""
    request = args[0] if args else kwargs.get("request")
    try:
        check_ingress(request)
    except HandoffError as exc:
        decide(policy, exc, where="worker ingress (BaseWorker._enqueue_request)", log=log)  # fallback: go on
    return wrapped(*args, **kwargs)


def prepare_tp_inputs_wrapper(wrapped, runner, args, kwargs, *, policy: Policy):
    """``DecoderRunner`` / ``PyTorchModelEngine._prepare_tp_inputs``: a shape-only pre-check of every
    scheduled context request, then the original, untouched."""
    scheduled = args[0] if args else kwargs.get("scheduled_requests")
    try:
        check_context_slices(scheduled)
    except HandoffError as exc:
        decide(policy, exc, where=f"context-phase mRoPE slice ({type(runner).__name__}._prepare_tp_inputs)",
               log=log)  # fallback: the original runs untouched
    return wrapped(*args, **kwargs)


def check_ingress(request) -> None:
    """The request's mRoPE ids cover its prompt exactly."""
    mm_params = getattr(request, "multimodal_params", None)
    mrope = mrope_ids_of(getattr(mm_params, "multimodal_data", None))
    prompt = getattr(request, "prompt_token_ids", None)
    if mrope is None or prompt is None:
        return
    request_id = getattr(request, "id", None)
    check_mrope_slice(mrope, len(prompt), request_id=request_id)


def check_context_slices(scheduled_requests) -> None:
    """Each scheduled context request's mRoPE ids cover its prompt, so the engine's
    ``mrope_pos_ids[:, :, begin:begin + len(chunk)]`` cannot silently cut a longer tensor."""
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
        request_id = getattr(request, "py_request_id", None)
        check_mrope_slice(mrope, prompt_len, begin=begin, end=end, request_id=request_id)
