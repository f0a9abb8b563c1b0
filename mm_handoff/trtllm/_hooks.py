"""The four-argument wrapper bodies ``(wrapped, instance, args, kwargs)``, one per hook point.

Each ends by calling ``wrapped(*args, **kwargs)`` (the prefill point may answer from the carried
layout instead). The ledger's wrapper reads the per-wrapper switch before calling these, so an
uninstalled wrapper never gets here.
"""

from __future__ import annotations

import functools

from ..errors import HandoffError
from ._carrier import request_label
from ._checks import check_admission, check_context_slices, check_ingress, enforce
from ._encoder import encoder_hook, note_preprocessed
from ._prefill import prefill_hook, reset_used_layout, used_layout
from ._state import STATE

__all__ = ["admission_hook", "ingress_hook", "slice_hook", "encoder_hook", "prefill_hook", "make_hook"]


def admission_hook(wrapped, llm, args, kwargs):
    """``BaseLLM._preprocess``: run it, then check what it produced against what travelled."""
    dp = args[2] if len(args) > 2 else kwargs.get("disaggregated_params")
    label = request_label(dp)
    reset_used_layout()
    try:
        result = wrapped(*args, **kwargs)
    except HandoffError as exc:  # raised at the prefill point, which cannot see the request
        raise exc.with_request(label)
    note_preprocessed(result)
    try:
        check_admission(getattr(llm, "input_processor", None), result, dp, request_id=label,
                        prefill_layout=used_layout())
    except HandoffError as exc:
        enforce(STATE.policy, exc.with_request(label), where="admission (BaseLLM._preprocess)")
    return result


def ingress_hook(wrapped, worker, args, kwargs):
    """``BaseWorker._enqueue_request``: the restored request's mRoPE ids vs its prompt, before enqueue."""
    request = args[0] if args else kwargs.get("request")
    try:
        check_ingress(request)
    except HandoffError as exc:
        enforce(STATE.policy, exc, where="worker ingress (BaseWorker._enqueue_request)")
    return wrapped(*args, **kwargs)


def slice_hook(wrapped, runner, args, kwargs):
    """``_prepare_tp_inputs``: a shape-only pre-check of every scheduled context request, then the
    original, untouched."""
    scheduled = args[0] if args else kwargs.get("scheduled_requests")
    try:
        check_context_slices(scheduled)
    except HandoffError as exc:
        enforce(STATE.policy, exc, where=f"context-phase mRoPE slice ({type(runner).__name__}._prepare_tp_inputs)")
    return wrapped(*args, **kwargs)


_HOOKS = {
    "admission": admission_hook,
    "encoder": encoder_hook,
    "ingress": ingress_hook,
    "slice": slice_hook,
}


def make_hook(kind: str, attr: str):
    """The hook for a patch-table row; the prefill hook learns which method name it wraps."""
    if kind == "prefill":
        return functools.partial(prefill_hook, name=attr)
    return _HOOKS[kind]
