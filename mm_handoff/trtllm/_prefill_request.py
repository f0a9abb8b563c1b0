"""``prefill_request``: build the PD request from an encoder output through TensorRT-LLM's public API.

``BaseLLM.generate_async`` accepts a ``PreprocessedInputs`` and then skips ``_preprocess`` entirely
(``tensorrt_llm/llmapi/llm.py``), so this path needs no patch on the PD side: the prompt is the
encoder's expanded ids and the layout is the aggregated path's. Because ``_preprocess`` is skipped,
the carried layout is accepted here, through the same step the prefill point uses
(:func:`mm_handoff.checks.accept_layout`).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, NamedTuple

import numpy as np

from ..adapters.base import typed_adapter
from ..checks import accept_layout
from ..errors import HandoffError
from ._carrier import GRIDS_KEY, LAYOUT_KEY, adapter_for, carried, disagg_prefill_inputs, embedding_handles


class PrefillRequest(NamedTuple):
    """What to pass to ``LLM.generate_async``: ``llm.generate_async(req.inputs, sampling_params=sp,
    disaggregated_params=req.disaggregated_params)`` (or ``**req.as_kwargs()``)."""

    inputs: Any
    disaggregated_params: Any

    def as_kwargs(self) -> dict:
        return {"inputs": self.inputs, "disaggregated_params": self.disaggregated_params}


class _LayoutTokens:
    """The processor methods ``maybe_compute_mm_embed_cumsum`` reads, answered from a layout's pad ids.

    Upstream compares the prompt with ``get_mm_token_ids()`` through ``torch.isin``, so the ids are a
    torch tensor when torch is loaded (TensorRT-LLM imports it on import); a numpy array otherwise
    (the torch-free stand-in the tests use).
    """

    mm_bidirectional_blocks = False

    def __init__(self, spec) -> None:
        pads = [spec.image_pad, spec.video_pad]
        torch = sys.modules.get("torch")
        self._mm_ids = np.asarray(pads, dtype=np.int32) if torch is None else torch.tensor(pads, dtype=torch.int32)

    def get_vocab_size(self):
        return None

    def get_mm_token_ids(self):
        return self._mm_ids

    def get_mm_special_token_ids(self):
        return None


def _accepted_layout(encoder_output, handles, adapter, mrope_ids, limits, request_id):
    """The encoder's layout (carried, else derived from its ids and carried grids), accepted."""
    found = carried(handles)
    if LAYOUT_KEY in found:
        layout = found[LAYOUT_KEY]
    elif isinstance(found.get(GRIDS_KEY), dict) and adapter is not None:
        grids = found[GRIDS_KEY]
        layout = typed_adapter(adapter, request_id=request_id).derive_layout(encoder_output.prompt_token_ids,
                              image_grid_thw=grids.get("image_grid_thw"), video_grid_thw=grids.get("video_grid_thw"),
                              mrope=False, limits=limits, request_id=request_id)
    else:
        raise HandoffError(f"multimodal_embedding_handles[0][{LAYOUT_KEY!r}]",
                           "the encoder's layout (install mm_handoff.trtllm on the encoder side)", "absent",
                           request_id=request_id, hint="or pass adapter= with the encoder's grids stamped")
    if adapter is None:
        raise HandoffError("prefill_request(adapter=, processor=)", "this side's adapter, or processor= "
                           "(llm.input_processor) to resolve it", None, request_id=request_id,
                           hint="the carried layout is checked against this side's family and tokenizer")
    return accept_layout(layout, adapter, embeddings=handles, prompt_token_ids=encoder_output.prompt_token_ids,
                         mrope_position_ids=mrope_ids, limits=limits, request_id=request_id)


def prefill_request(encoder_output, *, adapter=None, processor=None,
                    request_type: str | None = "context_and_generation", limits=None) -> PrefillRequest:
    """A ``PreprocessedInputs`` + ``DisaggregatedParams`` pair for the PD ``LLM.generate_async``.

    ``encoder_output`` is a ``MultimodalEncoder`` result whose handles carry the layout (install
    mm-handoff on the encoder side) or, with ``adapter=``, at least the grids. The layout is accepted
    against ``adapter``, else the adapter of ``processor`` (e.g. ``llm.input_processor``); one of the
    two is needed. ``processor`` is also used for the embed-mask cumsum exactly as upstream computes
    it; without it the layout's pad ids are used (same values for the Qwen family). The encoder output
    is not modified: the returned ``DisaggregatedParams`` is a copy with ``request_type`` set.
    ``limits``: this request's bounds (:class:`~mm_handoff.reading.Limits`; None: the process default).
    """
    from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs, MultimodalParams
    from tensorrt_llm.inputs.registry import maybe_compute_mm_embed_cumsum
    from tensorrt_llm.llmapi.llm import PreprocessedInputs

    request_id = getattr(encoder_output, "request_id", None)
    dp = getattr(encoder_output, "disaggregated_params", None)
    handles = embedding_handles(dp)
    if dp is None or handles is None:
        raise HandoffError("encoder_output.disaggregated_params.multimodal_embedding_handles",
                           "one handle per image/video", None, request_id=request_id)
    if adapter is None and processor is not None:
        adapter = adapter_for(processor, request_id=request_id)
    mrope_ids, mrope_deltas = dp.mrope_position_ids_handle, dp.mrope_position_deltas_handle
    layout = _accepted_layout(encoder_output, handles, adapter, mrope_ids, limits, request_id)
    if (mrope_ids is None) != (mrope_deltas is None):
        raise HandoffError("mrope_position_deltas_handle", "present together with mrope_position_ids_handle",
                           "only one of the two", request_id=request_id)

    disagg = disagg_prefill_inputs(layout, DisaggPrefillMultimodalInputs)
    multimodal_data = {"multimodal_embedding": handles,
                       "multimodal_embedding_lengths": disagg.multimodal_embedding_lengths}
    if getattr(disagg, "special_token_offsets", None) is not None:
        multimodal_data["special_token_offsets"] = disagg.special_token_offsets
    if getattr(disagg, "item_types", None) is not None:
        multimodal_data["layout_metadata"] = {"item_types": disagg.item_types}
    if mrope_ids is not None:
        multimodal_data["mrope_config"] = {"mrope_position_ids": mrope_ids, "mrope_position_deltas": mrope_deltas}
    tokens = processor if processor is not None else _LayoutTokens(adapter.spec)  # this side's ids (accepted: equal)
    maybe_compute_mm_embed_cumsum(disagg.prompt_token_ids, {"multimodal_data": multimodal_data}, tokens)
    params = MultimodalParams(multimodal_input=disagg.to_multimodal_input(dp.multimodal_hashes),
                              multimodal_data=multimodal_data)
    new_dp = dataclasses.replace(dp, request_type=request_type) if _is_dataclass_instance(dp) else dp
    inputs = PreprocessedInputs(prompt_token_ids=disagg.prompt_token_ids, multimodal_params=params)
    return PrefillRequest(inputs, new_dp)


def _is_dataclass_instance(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)
