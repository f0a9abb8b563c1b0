"""The hook points of the check inside SGLang's EPD prefill side, and what runs at each.

Two hook points (SGLang 0.5.23):

1. ``QwenVLImageProcessor.get_validated_mm_data`` (``srt/multimodal/processors/qwen_vl.py``; the method
   is ``SGLangBaseProcessor``'s, in ``base_processor.py``): both of SGLang's receive paths turn the
   request's prompt and the encoder's embeddings, grids and ``video_timestamps`` into the expanded ids,
   the items' offsets and the mRoPE ids here (the scheduler path in ``_finish_assemble``, the tokenizer
   path in ``MMReceiverBase._recv_mm_data``, ``srt/disaggregation/encoder/receiver.py``). The wrapper
   takes the carried layout out of the keyword arguments (or the request being received, below), calls
   SGLang's own method, then checks its result: with a layout, :func:`~mm_handoff.sglang.check_mm_output`;
   without one, :func:`~mm_handoff.sglang.check_stamped` (the silent one-run fallback refused where the
   family prints one before every group) and, for a family mm-handoff knows, :func:`~mm_handoff.sglang.check_derived`.
2. ``MMReceiverBase.recv_mm_data`` (the tokenizer path, ``--encoder-transfer-backend zmq_to_tokenizer``):
   the request (``GenerateReqInput``) is at hand there; its ``mm_processor_kwargs["mm_handoff_layout"]``
   is what (1) checks against, and a typed error raised in (1), which SGLang's receive task would log and
   turn into "no embedding", is raised to the request instead.

A failure goes to the policy (:func:`mm_handoff.glue.policy.decide`): ``raise`` rejects the request;
``rebuild`` answers with SGLang's own output type built from the carried layout
(:func:`~mm_handoff.sglang.output_from_layout`) when one is carried and accepted, and raises otherwise;
``fallback`` warns and keeps SGLang's result. The lifecycle that places the wrappers is :mod:`._lifecycle`.
"""

from __future__ import annotations

import contextvars
import importlib
import logging
from typing import Any

import attrs
import numpy as np

from ..adapters.registry import get_adapter
from ..errors import AdapterNotFoundError, EngineNotSupportedError, HandoffError
from ..glue.engine_adapters import cached_adapter
from ..glue.policy import Decision, Policy, decide
from ..glue.unexpanded import LAYOUT_KWARG
from ..layout import HandoffLayout
from ._carrier import SGLANG_CONVENTION, carried_layout
from ._checks import (
    check_derived,
    check_embedding_rows_per_modality,
    check_mm_output,
    check_stamped,
    engine_inputs,
    modality_name,
)

log = logging.getLogger("mm_handoff.sglang")

#: ``(module, class, attribute)`` of each hook point
HOOKS = (("sglang.srt.multimodal.processors.qwen_vl", "QwenVLImageProcessor", "get_validated_mm_data"),
         ("sglang.srt.disaggregation.encoder.receiver", "MMReceiverBase", "recv_mm_data"))



@attrs.define
class _Receiving:
    """The request the tokenizer-path receiver is working on: its carried layout and the first typed error."""

    layout: Any
    request_id: Any
    error: HandoffError | None = None


_RECEIVING: contextvars.ContextVar[_Receiving | None] = contextvars.ContextVar("mm_handoff_sglang_receiving",
                                                                                default=None)


def hook_points() -> list:
    found = []
    for module, cls_name, attr in HOOKS:
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except Exception as exc:
            raise EngineNotSupportedError(f"{module}.{cls_name}", "importable", f"{type(exc).__name__}: {exc}",
                                          hint="install SGLang with its EPD receiver (docs/sglang.md)") from exc
        if not callable(getattr(cls, attr, None)):
            raise EngineNotSupportedError(f"{cls_name}.{attr}", "present", "missing",
                                          hint="SGLang's EPD path changed; mm-handoff refuses to wrap it")
        found.append((cls, attr))
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
        mrope_position_delta=torch.tensor([[inputs.mrope_position_delta]], dtype=torch.int64))


def _check(processor, output, embeddings, kwargs, carried, request_id) -> None:
    grids = {"img_grid_thw": kwargs.get("img_grid_thw"), "video_grid_thw": kwargs.get("video_grid_thw")}
    if carried is not None:
        check_mm_output(output, carried, engine_adapter(processor), embeddings=embeddings, request_id=request_id,
                        **grids)
        return
    check_stamped(processor.model_type, grids["video_grid_thw"], kwargs.get("video_timestamps"),
                  merge_size=processor.spatial_merge_size, request_id=request_id)
    adapter = _known_adapter(processor)
    if adapter is not None:
        check_derived(output, adapter, request_id=request_id, **grids)


def _rebuilt(processor, carried, embeddings, kwargs, request_id):
    """SGLang's output built from the carried layout, or None when there is none or it is not acceptable."""
    if carried is None:
        return None
    from ..checks import accept_layout

    adapter = engine_adapter(processor)
    try:
        layout = accept_layout(carried, adapter, image_grid_thw=_grid_list(kwargs.get("img_grid_thw")),
                               video_grid_thw=_grid_list(kwargs.get("video_grid_thw")), request_id=request_id)
        return output_from_layout(processor, layout, embeddings, adapter, request_id=request_id)
    except HandoffError:
        return None


def _grid_list(value):
    return None if value is None else (value.tolist() if hasattr(value, "tolist") else value)


def validated_mm_data_wrapper(wrapped, processor, args, kwargs, *, policy: Policy):
    """``get_validated_mm_data(prompt, embeddings, **meta)`` (see the module doc)."""
    receiving = _RECEIVING.get()
    kwargs = dict(kwargs)
    carried = kwargs.pop(LAYOUT_KWARG, None)
    if carried is None and receiving is not None:
        carried = receiving.layout
    request_id = receiving.request_id if receiving is not None else None
    output = wrapped(*args, **kwargs)
    embeddings = args[1] if len(args) > 1 else kwargs.get("embeddings")
    try:
        _check(processor, output, embeddings, kwargs, carried, request_id)
    except HandoffError as exc:
        rebuilt = _rebuilt(processor, carried, embeddings, kwargs, request_id) if policy is Policy.REBUILD else None
        try:
            decision = decide(policy, exc, where="SGLang EPD (QwenVLImageProcessor.get_validated_mm_data)",
                              remedy=Decision.REBUILD if rebuilt is not None else None, log=log)
        except HandoffError:
            if receiving is not None and receiving.error is None:
                receiving.error = exc
            raise
        if decision is Decision.REBUILD:
            return rebuilt
    return output


async def recv_mm_data_wrapper(wrapped, receiver, args, kwargs, *, policy: Policy):
    """``MMReceiverBase.recv_mm_data(request_obj, mm_processor, prompt, ...)``: the request's carried layout
    for the check in ``get_validated_mm_data``, and its typed error raised to the request."""
    request = kwargs["request_obj"] if "request_obj" in kwargs else (args[0] if args else None)
    receiving = _Receiving(carried_layout(request), getattr(request, "rid", None))
    token = _RECEIVING.set(receiving)
    try:
        result = await wrapped(*args, **kwargs)
    finally:
        _RECEIVING.reset(token)
    if receiving.error is not None:
        raise receiving.error
    if result is None and receiving.layout is not None and request is not None:
        # SGLang falls back to processing the media itself: the layout is not for its HF processor
        request.mm_processor_kwargs = {k: v for k, v in request.mm_processor_kwargs.items() if k != LAYOUT_KWARG}
    return result


WRAPPERS = {"get_validated_mm_data": validated_mm_data_wrapper, "recv_mm_data": recv_mm_data_wrapper}
