"""The executor worker: ``BaseWorker._enqueue_request`` (ingress) and ``_prepare_tp_inputs`` (the slice).

Both run in the worker process (spawned or MPI-started), reached only through the start-up hook
(``mm-handoff run``, the ``.pth`` line) or ``TLLM_WORKER_USE_SINGLE_PROCESS=1``. Both are shape-only
checks that the request's mRoPE ids cover its prompt exactly, through the core's
:func:`~mm_handoff.checks.check_mrope_slice`, at the ``ingress`` and ``slice`` check points
(:mod:`mm_handoff.glue.checkpoint`); then the original runs, untouched. Each check point's visit ends before
the original is called: its outcome (accepted, refused, fallback) is the check's, recorded whatever the engine
then does (a CUDA error in the runner does not un-count a request the check accepted). A call with nothing to
check (no mRoPE ids, no context request) records its time only.
"""

from __future__ import annotations

from ..checks import check_mrope_slice
from ..errors import HandoffError
from ..glue.checkpoint import CheckPoint
from ._carrier import mrope_ids_of


def enqueue_request_wrapper(wrapped, worker, args, kwargs, *, point: CheckPoint):
    """``BaseWorker._enqueue_request``: the restored request's mRoPE ids vs its prompt, before enqueue."""
    request = args[0] if args else kwargs.get("request")
    with point.visit(getattr(request, "id", None)) as visit:
        try:
            if not check_ingress(request):
                visit.skip()
        except HandoffError as exc:
            visit.decide(exc)  # fallback: go on
    return wrapped(*args, **kwargs)  # the outcome is recorded: what the engine then does is not the check's


def prepare_tp_inputs_wrapper(wrapped, runner, args, kwargs, *, point: CheckPoint):
    """``DecoderRunner`` / ``PyTorchModelEngine._prepare_tp_inputs``: a shape-only pre-check of every
    scheduled context request, then the original, untouched."""
    scheduled = args[0] if args else kwargs.get("scheduled_requests")
    with point.visit() as visit:
        try:
            if not check_context_slices(scheduled):
                visit.skip()
        except HandoffError as exc:
            visit.decide(exc)  # fallback: the original runs untouched
    return wrapped(*args, **kwargs)


def check_ingress(request) -> bool:
    """The request's mRoPE ids cover its prompt exactly; whether it has any to check."""
    mm_params = getattr(request, "multimodal_params", None)
    mrope = mrope_ids_of(getattr(mm_params, "multimodal_data", None))
    prompt = getattr(request, "prompt_token_ids", None)
    if mrope is None or prompt is None:
        return False
    request_id = getattr(request, "id", None)
    check_mrope_slice(mrope, len(prompt), request_id=request_id)
    return True


def check_context_slices(scheduled_requests) -> int:
    """Each scheduled context request's mRoPE ids cover its prompt, so the engine's
    ``mrope_pos_ids[:, :, begin:begin + len(chunk)]`` cannot silently cut a longer tensor; how many had any."""
    checked = 0
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
        checked += 1
    return checked
