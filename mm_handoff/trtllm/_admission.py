"""The PD side admits a request: ``BaseLLM._preprocess`` and the prefill method it calls.

``BaseLLM._preprocess`` (``tensorrt_llm/llmapi/llm.py``) calls the input processor's
``build_disagg_prefill_multimodal_inputs`` (older releases: ``get_prompt_token_ids``) for a request
that carries embedding handles. Stock TensorRT-LLM re-tokenizes the text prompt there and expands
each placeholder into one pad run (no timestamps, no per-group markers).

:func:`prefill_wrapper` answers from the encoder's layout when the handles carry it, accepted through
:func:`mm_handoff.checks.accept_layout` (decode, skew, grids, handles vs layout, this request's own
prompt), in place of the engine's method (which would rebuild the very prompt the layout replaces).
Otherwise the policy decides (:func:`mm_handoff.glue.policy.decide`): ``rebuild`` rebuilds the exact ids from
the prompt + the carried grids and video metadata (:attr:`~mm_handoff.glue.policy.Decision.REBUILD`);
``raise`` raises a typed error naming the field; ``fallback`` keeps the stock result with a warning
(:attr:`~mm_handoff.glue.policy.Decision.PASS_THROUGH`). A request without video keeps the stock result when
nothing is carried: for images the stock ids equal the aggregated ones. A carried layout that is accepted
but is not this request's (its own prompt does not expand to it: :func:`mm_handoff.checks.check_own_request`)
is refused under every policy: it is another request's, not a mismatch to rebuild over or pass on.

:func:`admission_wrapper` then checks what ``_preprocess`` produced, through the same accept step: the layout
used (else the carried one) accepted against the handles and the mRoPE ids (the policy decides a failure),
then held to the prompt used (upstream's carrier: the request's own text) under every policy; without a
layout, the mRoPE length and the pads vs the handles' rows. The two share one :class:`_Admission` per request through a
:class:`~mm_handoff.glue.scope.RequestScope` of this module: the prefill method cannot see the request. Each runs
its check point (``admission``, ``prefill``: :mod:`mm_handoff.glue.checkpoint`), which applies the policy and
tells the observers.
"""

from __future__ import annotations

import attrs
import numpy as np

from ..adapters.base import typed_adapter
from ..checks import accept_layout, check_mrope_slice, check_own_request, check_prompt_pads
from ..errors import AdapterNotFoundError, HandoffError
from ..glue.checkpoint import CheckPoint, Visit
from ..glue.policy import Decision, Policy
from ..glue.scope import RequestScope
from ..reading import embedding_rows_of
from ._carrier import (
    GRIDS_KEY,
    LAYOUT_KEY,
    VIDEO_METADATA_KEY,
    adapter_for,
    carried,
    disagg_prefill_inputs,
    embedding_handles,
    find_multimodal_params,
    mrope_ids_of,
    own_prompt,
    request_label,
)
from ._upstream_layout import UPSTREAM_LAYOUT_FIELD, check_upstream_layout


@attrs.define
class _Admission:
    """What the prefill point tells admission about one request."""

    #: the layout the prefill point answered with, and the adapter that accepted (or rebuilt) it
    layout: object = None
    adapter: object = None
    #: a prefill call is running (an override calling ``super()``: the outer call decides)
    in_prefill: bool = False
    #: the request, as admission names it (the prefill method cannot see it)
    request_id: object = None


_CURRENT: RequestScope[_Admission] = RequestScope("mm_handoff_admission")


# ------------------------------------------------------------------------------------ admission
def admission_wrapper(wrapped, llm, args, kwargs, *, point: CheckPoint):
    """``BaseLLM._preprocess``: run it, then check what it produced against what travelled."""
    dp = args[2] if len(args) > 2 else kwargs.get("disaggregated_params")
    label = request_label(dp)
    state = _Admission(request_id=label)
    with point.visit(label) as visit:
        with _CURRENT.opened(state):
            try:
                result = visit.call(wrapped, *args, **kwargs)
            except HandoffError as exc:  # raised at the prefill point, which cannot see the request
                raise exc.with_request(label)  # noqa: B904
        visit.uses(state.adapter)
        inputs = args[0] if args else kwargs.get("inputs")
        try:
            own = check_admission(getattr(llm, "input_processor", None), result, dp, state, request_id=label,
                                  inputs=inputs, visit=visit)
        except HandoffError as exc:
            visit.decide(exc.with_request(label))
            return result  # policy=fallback: passed through
        if own is None:
            return result
        visit.uses(own.adapter)
        try:
            check_own_request(own.layout, own.adapter, prompt_token_ids=own.prompt_token_ids, request_id=label)
        except HandoffError as exc:  # another request's layout is refused under every policy (glue.policy)
            visit.decide(exc, own=True)
        return result


@attrs.frozen
class OwnRequest:
    """What admission accepted that must be this request's: the layout, the adapter that accepted it and the
    request's own prompt (:func:`mm_handoff.checks.check_own_request`, run apart from the policy)."""

    layout: object
    adapter: object
    prompt_token_ids: object


def check_admission(processor, result, disaggregated_params, state: _Admission, *, request_id=None,
                    inputs=None, limits=None, visit: Visit | None = None) -> OwnRequest | None:
    """mRoPE length vs prompt, pads vs embedding rows, and the layout the prefill point used (else the
    carried one) accepted; returns it with the prompt it must be this request's layout of (the prompt
    actually used; upstream's carrier: the request's own text), or None. Shapes come from handle dicts:
    nothing is rebuilt. ``limits``: this request's bounds (None: the process default). ``visit``: the admission
    check point's visit, told each adapter the checks use as soon as it is resolved (a refusal is counted under
    the family that refused it, as an accepted request is).

    When upstream carried the layout itself (``disaggregated_params.multimodal_layout``), that layout is
    read and accepted as mm-handoff's own would be (:func:`._upstream_layout.check_upstream_layout`)."""
    if not isinstance(result, tuple) or not result or result[0] is None:
        return None
    prompt_ids = result[0]
    mrope = mrope_ids_of(getattr(find_multimodal_params(result), "multimodal_data", None))
    if mrope is None:
        mrope = getattr(disaggregated_params, "mrope_position_ids_handle", None)
    upstream_layout = getattr(disaggregated_params, UPSTREAM_LAYOUT_FIELD, None)
    if upstream_layout is not None:
        adapter = _known_adapter(processor, request_id, visit)
        if adapter is None:  # a family mm-handoff does not know: the generic length check only
            if mrope is not None:
                check_mrope_slice(mrope, len(prompt_ids), request_id=request_id)
            return None
        layout = check_upstream_layout(upstream_layout, adapter, disaggregated_params=disaggregated_params,
                                       prompt_token_ids=prompt_ids, mrope_position_ids=mrope, limits=limits,
                                       request_id=request_id)
        return OwnRequest(layout, adapter, _own_prompt(processor, inputs))
    handles = embedding_handles(disaggregated_params)
    if mrope is None and handles is None:
        return None
    if handles is None and len(prompt_ids) <= 1:
        return None  # encoder-decoder placeholder prompt ([0]); nothing to compare
    layout, adapter = state.layout, state.adapter
    if layout is None and handles is not None and LAYOUT_KEY in carried(handles):
        layout, adapter = carried(handles)[LAYOUT_KEY], _known_adapter(processor, request_id, visit)
    if layout is not None and adapter is not None:
        layout = accept_layout(layout, adapter, embeddings=handles, mrope_position_ids=mrope, limits=limits,
                               request_id=request_id)
        return OwnRequest(layout, adapter, prompt_ids)
    if mrope is not None:  # no layout: what the engine is about to use, checked without one
        check_mrope_slice(mrope, len(prompt_ids), request_id=request_id)
    adapter = _known_adapter(processor, request_id, visit) if handles is not None else None
    if adapter is not None:
        rows = embedding_rows_of(handles, field="multimodal_embedding_handles", request_id=request_id)
        check_prompt_pads(prompt_ids, typed_adapter(adapter, request_id=request_id).spec, sum(rows),
                          request_id=request_id, limits=limits)
    return None


def _own_prompt(processor, inputs):
    """This request's own prompt ids (its text tokenized as upstream's prefill method does), or None."""
    try:
        return own_prompt(processor, inputs)
    except Exception:  # no tokenizer on this processor: the carried ids are checked without it
        return None


def _known_adapter(processor, request_id, visit: Visit | None = None):
    try:
        adapter = adapter_for(processor, request_id=request_id)
    except AdapterNotFoundError:  # not a family mm-handoff knows: only generic checks apply
        return None
    if visit is not None:
        visit.uses(adapter)
    return adapter


# -------------------------------------------------------------------------------- prefill point
def prefill_wrapper(wrapped, processor, args, kwargs, *, point: CheckPoint):
    """``Qwen3VLInputProcessorBase.build_disagg_prefill_multimodal_inputs`` (see the module doc).

    With an accepted layout it answers in place of the engine's method (which would rebuild the very
    prompt the layout replaces), with the result type the engine expects.
    """
    state = _CURRENT.get()
    if state is not None and state.in_prefill:  # an override calling super(): the outer call decides
        return wrapped(*args, **kwargs)
    if state is None:  # called outside BaseLLM._preprocess: nothing to tell admission
        with _CURRENT.opened(_Admission()) as state:
            return _prefill_point(state, wrapped, processor, args, kwargs, point)
    return _prefill_point(state, wrapped, processor, args, kwargs, point)


def _prefill_point(state: _Admission, wrapped, processor, args, kwargs, point: CheckPoint):
    state.in_prefill = True
    try:
        with point.visit(state.request_id) as visit:
            layout, adapter, result = _prefill(visit, wrapped, processor, args, kwargs)
        state.layout, state.adapter = layout, adapter
        return result
    finally:
        state.in_prefill = False


def _prefill(visit: Visit, wrapped, processor, args, kwargs):
    """``(layout used or None, its adapter, the method's result)``."""
    inputs = args[0] if args else kwargs.get("inputs")
    mm_handles = args[1] if len(args) > 1 else kwargs.get("mm_handles")
    found = carried(mm_handles, inputs)
    try:
        adapter = adapter_for(processor)
    except HandoffError as exc:  # a family adapter that cannot be built: nothing to check with
        visit.decide(exc)
        return None, None, visit.call(wrapped, *args, **kwargs)
    visit.uses(adapter)
    remedy = Decision.REBUILD if GRIDS_KEY in found else None
    stock = None
    if LAYOUT_KEY in found:
        accepted = False
        try:
            layout = accept_layout(found[LAYOUT_KEY], adapter, embeddings=mm_handles)
            accepted = True
            check_own_request(layout, adapter, prompt_token_ids=own_prompt(processor, inputs))
            return layout, adapter, disagg_prefill_inputs(layout)
        except HandoffError as exc:  # an accepted layout that is not this request's: never rebuilt over
            decision = visit.decide(exc, remedy=remedy, own=accepted)
    elif remedy is not None and visit.point.policy is Policy.REBUILD:
        decision = visit.decide(_absent(), remedy=remedy)  # nothing carried but the grids: rebuild at once
    else:
        stock = visit.call(wrapped, *args, **kwargs)
        if not _has_video(stock, adapter):  # images only: the stock ids equal the aggregated ones
            return None, None, stock
        decision = visit.decide(_absent(), remedy=remedy)
    if decision is Decision.REBUILD:
        layout, used = _rebuild(processor, adapter, inputs, mm_handles, found)
        return layout, used, disagg_prefill_inputs(layout)
    return None, None, stock if stock is not None else visit.call(wrapped, *args, **kwargs)  # PASS_THROUGH


def _absent() -> HandoffError:
    return HandoffError(f"multimodal_embedding_handles[0][{LAYOUT_KEY!r}]",
                        "the encoder's layout (install mm_handoff.trtllm on the encoder side)", "absent",
                        hint="a video prompt rebuilt from text has no timestamps and one pad run per video")


def _rebuild(processor, adapter, inputs, mm_handles, found):
    """The exact aggregated layout from the prompt, the carried grids and the video metadata."""
    grids = found.get(GRIDS_KEY)
    if not isinstance(grids, dict):
        raise HandoffError(f"multimodal_embedding_handles[0][{GRIDS_KEY!r}]",
                           "the encoder's grids (and video metadata) to rebuild from", grids,
                           hint="policy=rebuild needs them; the encoder attaches them")
    if grids.get("rebuildable") is False:
        raise HandoffError(f"multimodal_embedding_handles[0][{VIDEO_METADATA_KEY!r}]",
                           "video metadata naming the frames HF sampled (checked at the encoder)",
                           "metadata that does not reproduce the encoder's ids",
                           hint="the encoder found the rebuild would differ; carry its layout instead")
    prompt = own_prompt(processor, inputs)
    if prompt is None:
        raise HandoffError("inputs['prompt']", "the text prompt (to rebuild the layout from)", None)
    convention = grids.get("convention")
    if convention is not None:  # the encoder's processor convention (cached per convention)
        adapter = adapter_for(processor, convention=convention)
    layout = typed_adapter(adapter).rebuild_layout(prompt, image_grid_thw=grids.get("image_grid_thw"),
                                                   video_grid_thw=grids.get("video_grid_thw"),
                                                   video_metadata=found.get(VIDEO_METADATA_KEY), mrope=False)
    return accept_layout(layout, adapter, embeddings=mm_handles), adapter


def _has_video(result, adapter) -> bool:
    types = getattr(result, "item_types", None)
    if types is not None:
        return 1 in types
    ids = getattr(result, "prompt_token_ids", None)
    if ids is None and isinstance(result, tuple) and result:
        ids = result[0]
    try:
        video_pad = typed_adapter(adapter).spec.video_pad
    except Exception:  # an adapter that cannot say: treat it as video, so the policy decides
        return True
    return ids is not None and video_pad in np.asarray(ids)
