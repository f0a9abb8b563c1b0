"""The hook points of the check inside SGLang's EPD prefill side, and what runs at each.

Two hook points (SGLang 0.5.23):

1. ``QwenVLImageProcessor.get_validated_mm_data`` (``srt/multimodal/processors/qwen_vl.py``; the method
   is ``SGLangBaseProcessor``'s, in ``base_processor.py``): both of SGLang's receive paths turn the
   request's prompt and the encoder's embeddings, grids and ``video_timestamps`` into the expanded ids,
   the items' offsets and the mRoPE ids here (the scheduler path in ``_finish_assemble``, the tokenizer
   path in ``MMReceiverBase._recv_mm_data``, ``srt/disaggregation/encoder/receiver.py``). The wrapper
   takes the carried layout out of the keyword arguments (or the request being received, below), calls
   SGLang's own method, then checks its result: with a layout, what :func:`~mm_handoff.sglang.check_mm_output`
   checks (the accept step, :func:`~mm_handoff.sglang.check_own_inputs`, then SGLang's output); without
   one, :func:`~mm_handoff.sglang.check_stamped` (the silent one-run fallback refused where the
   family prints one before every group) and, for a family mm-handoff knows, :func:`~mm_handoff.sglang.check_derived`.
2. ``MMReceiverBase.recv_mm_data`` (the tokenizer path, ``--encoder-transfer-backend zmq_to_tokenizer``):
   the request (``GenerateReqInput``) is at hand there; its ``mm_processor_kwargs["mm_handoff_layout"]``
   is what (1) checks against, and a typed error raised in (1), which SGLang's receive task would log and
   turn into "no embedding", is raised to the request instead.

A carried layout is first accepted (the shared accept step), then held to this request's own inputs
(:func:`~mm_handoff.sglang.check_own_inputs`: its prompt, grids and timestamps give it). A layout that is
not this request's is refused under every policy: it is another request's, not a mismatch to repair.
Any other failure goes to the policy (:func:`mm_handoff.glue.policy.decide`): ``raise`` rejects the request;
``rebuild`` answers with SGLang's own output type built from the carried layout
(:func:`~mm_handoff.sglang.output_from_layout`) when one is carried, accepted and found to be this
request's own (its prompt was read and expands to it), and raises otherwise; ``fallback`` warns and keeps
SGLang's result.

The hook table (:data:`HOOKS`) holds the two rows, in the format every engine glue uses
(:class:`mm_handoff.glue.hooks.Hook`): (1) runs the ``admission`` check point, (2) the ``ingress`` one
(:mod:`mm_handoff.glue.checkpoint`), which records its time and whether the request was received; a refusal
is counted once, at admission, where it was decided. The lifecycle that places the wrappers is
:mod:`._lifecycle`.
"""

from __future__ import annotations

import importlib
from typing import Any

import attrs
import numpy as np

from ..adapters.registry import get_adapter
from ..checks import accept_layout
from ..errors import AdapterNotFoundError, EngineNotSupportedError, HandoffError
from ..glue.checkpoint import CheckPoint, Visit
from ..glue.engine_adapters import cached_adapter
from ..glue.hooks import Hook
from ..glue.policy import Decision, Policy
from ..glue.scope import RequestScope
from ..glue.unexpanded import LAYOUT_KWARG
from ..layout import HandoffLayout
from ._carrier import SGLANG_CONVENTION, carried_layout
from ._checks import (
    check_derived,
    check_embedding_rows_per_modality,
    check_own_inputs,
    check_stamped,
    compare_output,
    engine_inputs,
    modality_name,
)


@attrs.define
class _Receiving:
    """The request the tokenizer-path receiver is working on: its carried layout and the first typed error."""

    layout: Any
    request_id: Any
    error: HandoffError | None = None


_RECEIVING: RequestScope[_Receiving] = RequestScope("mm_handoff_sglang_receiving")


def hook_points() -> list:
    """``(row, class, attribute)`` of each row of :data:`HOOKS`, refusing a missing one before anything is touched."""
    found = []
    for row in HOOKS:
        module, cls_name, attr = row.module, row.qualname, row.attribute
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except Exception as exc:
            raise EngineNotSupportedError(f"{module}.{cls_name}", "importable", f"{type(exc).__name__}: {exc}",
                                          hint="install SGLang with its EPD receiver (docs/sglang.md)") from exc
        if not callable(getattr(cls, attr, None)):
            raise EngineNotSupportedError(f"{cls_name}.{attr}", "present", "missing",
                                          hint="SGLang's EPD path changed; mm-handoff refuses to wrap it")
        found.append((row, cls, attr))
    return found


def engine_adapter(processor):
    """This engine's adapter: the processor's HF config and tokenizer, SGLang's convention (``pad_only``),
    built once per processor in the registry's thread-safe cache."""
    return cached_adapter(processor, "sglang", lambda: get_adapter(
        processor.hf_config, tokenizer=processor._tokenizer, convention=SGLANG_CONVENTION))


def _known_adapter(processor):
    """The adapter, or None for a model type mm-handoff has no family for (Qwen2-VL, Qwen3-Omni, ...)."""
    try:
        return engine_adapter(processor)
    except AdapterNotFoundError:
        return None


def output_from_layout(processor, layout: HandoffLayout, embeddings, adapter, *, request_id=None):
    """SGLang's ``MultimodalProcessorOutput`` for an accepted layout: its ids, one item per pad run with the
    embedding rows of that run, the adapter's mRoPE ids and delta (what ``get_mm_data`` builds)."""
    import torch
    from sglang.srt.managers.schedule_batch import Modality, MultimodalDataItem, MultimodalProcessorOutput

    check_embedding_rows_per_modality(layout, embeddings, request_id)
    inputs = engine_inputs(layout, adapter, request_id=request_id)
    by_name = {modality_name(m): t for m, t in embeddings.items()}
    consumed: dict[str, int] = {}
    items = []
    for modality, (start, end) in inputs.runs:
        n, at = end - start + 1, consumed.get(modality, 0)
        consumed[modality] = at + n
        items.append(MultimodalDataItem(modality=Modality.IMAGE if modality == "image" else Modality.VIDEO,
                                        offsets=[(start, end)], precomputed_embeddings=by_name[modality][at:at + n]))
    return MultimodalProcessorOutput(
        input_ids=inputs.input_ids, mm_items=items, im_start_id=processor.IM_START_TOKEN_ID,
        im_end_id=processor.IM_END_TOKEN_ID, im_token_id=processor.mm_tokens.image_token_id,
        video_token_id=processor.mm_tokens.video_token_id, audio_token_id=processor.mm_tokens.audio_token_id,
        mrope_positions=torch.from_numpy(inputs.mrope_positions.astype(np.int64)),
        mrope_position_delta=torch.full((1, 1), inputs.mrope_position_delta, dtype=torch.int64))


def _check_without_layout(processor, output, kwargs, request_id, visit: Visit) -> None:
    grids = {"img_grid_thw": kwargs.get("img_grid_thw"), "video_grid_thw": kwargs.get("video_grid_thw")}
    check_stamped(processor.model_type, grids["video_grid_thw"], kwargs.get("video_timestamps"),
                  merge_size=processor.spatial_merge_size, request_id=request_id)
    adapter = _known_adapter(processor)
    if adapter is not None:
        visit.uses(adapter)
        check_derived(output, adapter, request_id=request_id, **grids)


def _own_prompt(processor, prompt):
    """This request's prompt as ids (SGLang's receiver prefers its tokenized input; a text prompt is tokenized
    with the processor's tokenizer), or None when it cannot be read here: then nothing is answered from a
    carried layout (its owner is not known), though SGLang's result is still checked against it."""
    if not isinstance(prompt, str):
        return prompt
    try:
        return processor._tokenizer.encode(prompt)
    except Exception:  # no tokenizer to read it with
        return None


def _rebuilt(processor, layout, adapter, embeddings, request_id):
    """SGLang's output built from an accepted layout of this request, or None when it cannot be built."""
    try:
        return output_from_layout(processor, layout, embeddings, adapter, request_id=request_id)
    except HandoffError:
        return None


def _decided(visit: Visit, error: HandoffError, output, rebuilt, receiving, *, own: bool = False):
    """What the policy makes of a failed check: SGLang's result, the rebuilt one, or the error raised (and
    handed to the request being received)."""
    try:
        decision = visit.decide(error, remedy=Decision.REBUILD if rebuilt is not None else None, own=own)
    except HandoffError:
        _refused(receiving, error)
        raise
    return rebuilt if decision is Decision.REBUILD else output


def _refused(receiving, error: HandoffError) -> None:
    if receiving is not None and receiving.error is None:
        receiving.error = error


def validated_mm_data_wrapper(wrapped, processor, args, kwargs, *, point: CheckPoint):
    """``get_validated_mm_data(prompt, embeddings, **meta)`` (see the module doc)."""
    receiving = _RECEIVING.get()
    kwargs = dict(kwargs)
    carried = kwargs.pop(LAYOUT_KWARG, None)
    if carried is None and receiving is not None:
        carried = receiving.layout
    request_id = receiving.request_id if receiving is not None else None
    with point.visit(request_id) as visit:
        output = visit.call(wrapped, *args, **kwargs)
        prompt = args[0] if args else kwargs.get("prompt")
        embeddings = args[1] if len(args) > 1 else kwargs.get("embeddings")
        if carried is None:
            try:
                _check_without_layout(processor, output, kwargs, request_id, visit)
            except HandoffError as exc:  # nothing carried: nothing to rebuild from
                return _decided(visit, exc, output, None, receiving)
            return output
        return _check_carried(visit, processor, carried, output, prompt, embeddings, kwargs, receiving)


def _check_carried(visit: Visit, processor, carried, output, prompt, embeddings, kwargs, receiving):
    """A carried layout accepted, held to this request's own inputs, then SGLang's output held to it."""
    request_id = visit.request_id
    try:
        adapter = engine_adapter(processor)
        visit.uses(adapter)
        layout = accept_layout(carried, adapter, request_id=request_id)
    except HandoffError as exc:  # no acceptable layout: nothing to rebuild from
        return _decided(visit, exc, output, None, receiving)
    own = _own_prompt(processor, prompt)
    try:
        check_own_inputs(layout, adapter, prompt=own, img_grid_thw=kwargs.get("img_grid_thw"),
                         video_grid_thw=kwargs.get("video_grid_thw"), video_timestamps=kwargs.get("video_timestamps"),
                         request_id=request_id)
    except HandoffError as exc:  # another request's layout is refused under every policy (glue.policy); else
        return _decided(visit, exc, output, None, receiving, own=True)  # the adapter could not tell: not rebuilt
    try:
        compare_output(output, layout, adapter, embeddings=embeddings, request_id=request_id)
    except HandoffError as exc:
        rebuilt = None
        if visit.point.policy is Policy.REBUILD and own is not None:  # a rebuild starts from this request's prompt
            rebuilt = _rebuilt(processor, layout, adapter, embeddings, request_id)
        return _decided(visit, exc, output, rebuilt, receiving)
    return output


async def recv_mm_data_wrapper(wrapped, receiver, args, kwargs, *, point: CheckPoint):
    """``MMReceiverBase.recv_mm_data(request_obj, mm_processor, prompt, ...)``: the request's carried layout
    for the check in ``get_validated_mm_data``, and its typed error raised to the request."""
    request = kwargs["request_obj"] if "request_obj" in kwargs else (args[0] if args else None)
    receiving = _Receiving(carried_layout(request), getattr(request, "rid", None))
    with point.visit(receiving.request_id) as visit:
        with _RECEIVING.opened(receiving):
            result = await visit.call_async(wrapped, *args, **kwargs)
        if receiving.error is not None:
            visit.skip()  # counted at admission, where it was decided
            raise receiving.error
        if result is None and receiving.layout is not None and request is not None:
            # SGLang falls back to processing the media itself: the layout is not for its HF processor
            request.mm_processor_kwargs = {k: v for k, v in request.mm_processor_kwargs.items() if k != LAYOUT_KWARG}
        return result


#: the hook table (see the module doc)
HOOKS = (Hook("sglang.srt.multimodal.processors.qwen_vl", "QwenVLImageProcessor", "get_validated_mm_data",
              validated_mm_data_wrapper, "admission",
              upstream="python/sglang/srt/multimodal/processors/base_processor.py (sglang 0.5.23)"),
         Hook("sglang.srt.disaggregation.encoder.receiver", "MMReceiverBase", "recv_mm_data", recv_mm_data_wrapper,
              "ingress", upstream="python/sglang/srt/disaggregation/encoder/receiver.py (sglang 0.5.23)"))
