"""``prefill_request``: build the PD request from an encoder output through TensorRT-LLM's public API.

``BaseLLM.generate_async`` accepts a ``PreprocessedInputs`` and then skips ``_preprocess`` entirely
(``tensorrt_llm/llmapi/llm.py``), so this path needs no patch on the PD side: the prompt is the
encoder's expanded ids and the layout is the aggregated path's. Because ``_preprocess`` is skipped,
the carried layout is accepted here, through the same step the prefill point uses
(:func:`mm_handoff.checks.accept_layout`).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from typing import Any, NamedTuple

import numpy as np

from ..adapters.base import typed_adapter
from ..checks import accept_layout
from ..errors import HandoffError
from ..reading import Limits, resolve_limits
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


class _Uncopyable(Exception):
    """Raised inside :func:`_detached`; the caller names the field."""

    def __init__(self, expected: str, actual) -> None:
        super().__init__(expected, actual)
        self.expected, self.actual = expected, actual


#: how deep the params' values nest (a handle dict holds lists and tuples; the carried layout, grids and
#: video metadata are dicts of lists of dicts): a deeper value is no handle
_MOST_DEPTH = 16
#: what a value may be without being copied: it cannot change (a subclass of one cannot either, as a value)
_IMMUTABLE = (int, float, complex, str, bytes, enum.Enum, type(None))
#: in the memo while a tuple's copy is being built
_IN_TUPLE = object()


def _most_values(limits: Limits) -> int:
    """The values one request's params may hold: per item a handle and its hash (a few dozen values), the
    carried layout (16 values per item, ``wire``'s own bound), the grids, and the video metadata's frame
    lists (``limits.max_frames``), with a wide margin."""
    return 128 * limits.max_items + 2 * limits.max_frames + 4096


def _detached(value, budget: list, memo: dict, depth: int = 0):
    """A copy of ``value`` sharing no container with it: dicts, lists, tuples, sets and arrays are copied
    as they are stored (a subclass's ``__iter__``/``items``/``__getitem__`` is not called; each becomes its
    plain type), values that cannot change are kept, a cycle is copied as a cycle. ``budget[0]``: how
    many more values may be read; anything else (an object of another kind, more values, deeper nesting)
    raises :class:`_Uncopyable`."""
    if isinstance(value, _IMMUTABLE):
        _charge(budget, 1)
        return value
    if id(value) in memo:
        if memo[id(value)] is _IN_TUPLE:  # its copy does not exist yet: nothing honest holds such a cycle
            raise _Uncopyable("no cycle through a tuple", "a tuple that holds itself")
        return memo[id(value)]
    if depth >= _MOST_DEPTH:
        raise _Uncopyable(f"values nested at most {_MOST_DEPTH} deep", "deeper")
    _charge(budget, 1)

    def inner(v):
        return _detached(v, budget, memo, depth + 1)

    out: Any
    if isinstance(value, dict):
        out = memo[id(value)] = {}
        for k, v in list(dict.items(value)):
            out[inner(k)] = inner(v)
    elif isinstance(value, list):
        out = memo[id(value)] = []
        out.extend(inner(v) for v in list.__getitem__(value, slice(None)))
    elif isinstance(value, tuple):
        memo[id(value)] = _IN_TUPLE  # a tuple reached again from inside itself (through a list or dict)
        out = tuple(inner(v) for v in tuple.__getitem__(value, slice(None)))
    elif isinstance(value, set):
        out = {inner(v) for v in set.__iter__(value)}
    elif isinstance(value, frozenset):
        out = frozenset(inner(v) for v in frozenset.__iter__(value))
    elif isinstance(value, bytearray):
        out = bytearray(bytes(memoryview(value)))
    elif type(value) is np.ndarray and value.dtype != object:
        _charge(budget, int(value.size))
        out = np.array(value, copy=True)
    elif (torch := sys.modules.get("torch")) is not None and isinstance(value, torch.Tensor):
        _charge(budget, int(value.numel()))
        out = value.detach().clone()
    else:
        raise _Uncopyable("plain values: dicts, lists, tuples, sets, ints, floats, strings, bytes, arrays",
                          type(value).__name__)
    memo[id(value)] = out
    return out


def _charge(budget: list, count: int) -> None:
    budget[0] -= count
    if budget[0] < 0:
        raise _Uncopyable("fewer values", "more")


def _params_fields(dp, limits: Limits, request_id) -> dict:
    """Every init field of the params dataclass ``dp``, read once and copied (:func:`_detached`): what is
    checked is the copy, and the copy is what the returned request holds, so nothing the caller does
    afterwards changes what was accepted."""
    if not _is_dataclass_instance(dp):
        raise HandoffError("encoder_output.disaggregated_params", "a DisaggregatedParams (a dataclass, copied "
                           "field by field)", type(dp).__name__, request_id=request_id)
    budget = [_most_values(limits)]
    memo: dict[int, Any] = {}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(dp):
        if not f.init:
            continue
        try:
            out[f.name] = _detached(getattr(dp, f.name), budget, memo)
        except _Uncopyable as exc:
            raise HandoffError(f"encoder_output.disaggregated_params.{f.name}", exc.expected, exc.actual,
                               request_id=request_id, hint=f"at most {_most_values(limits)} values in all "
                               "(limits.max_items, limits.max_frames)" if exc.actual == "more" else None) from None
        except Exception as exc:  # a field whose getter raises
            raise HandoffError(f"encoder_output.disaggregated_params.{f.name}", "a readable field",
                               f"{type(exc).__name__}: {exc}", request_id=request_id) from exc
    return out


def _accepted_layout(prompt_token_ids, handles, adapter, mrope_ids, limits, request_id):
    """The encoder's layout (carried, else derived from its ids and carried grids), accepted."""
    found = carried(handles)
    if LAYOUT_KEY in found:
        layout = found[LAYOUT_KEY]
    elif isinstance(found.get(GRIDS_KEY), dict) and adapter is not None:
        grids = found[GRIDS_KEY]
        layout = typed_adapter(adapter, request_id=request_id).derive_layout(prompt_token_ids,
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
    return accept_layout(layout, adapter, embeddings=handles, prompt_token_ids=prompt_token_ids,
                         mrope_position_ids=mrope_ids, limits=limits, request_id=request_id)


def prefill_request(encoder_output, *, adapter=None, processor=None,
                    request_type: str | None = "context_and_generation", limits=None) -> PrefillRequest:
    """A ``PreprocessedInputs`` + ``DisaggregatedParams`` pair for the PD ``LLM.generate_async``.

    ``encoder_output`` is a ``MultimodalEncoder`` result whose handles carry the layout (install
    mm-handoff on the encoder side) or, with ``adapter=``, at least the grids. The layout is accepted
    against ``adapter``, else the adapter of ``processor`` (e.g. ``llm.input_processor``); one of the
    two is needed. ``processor`` is also used for the embed-mask cumsum exactly as upstream computes
    it; without it the layout's pad ids are used (same values for the Qwen family). The encoder output
    is not modified, and nothing returned is the caller's: the params' fields are read once and copied
    (every dict, list, tuple, set and array; at most :func:`_most_values` values, else a typed error), the
    copy is what is checked, and the returned ``DisaggregatedParams`` and inputs hold the copy (with
    ``request_type`` set), so a change to the encoder output after the call changes nothing accepted.
    ``limits``: this request's bounds (:class:`~mm_handoff.reading.Limits`; None: the process default).
    """
    from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs, MultimodalParams
    from tensorrt_llm.inputs.registry import maybe_compute_mm_embed_cumsum
    from tensorrt_llm.llmapi.llm import PreprocessedInputs

    request_id = getattr(encoder_output, "request_id", None)
    dp = getattr(encoder_output, "disaggregated_params", None)
    if dp is None or embedding_handles(dp) is None:
        raise HandoffError("encoder_output.disaggregated_params.multimodal_embedding_handles",
                           "one handle per image/video", None, request_id=request_id)
    # read once and copied: the check reads the copy, and the returned request holds it (no container of
    # the caller's, which could change what was accepted after the call)
    fields = _params_fields(dp, resolve_limits(limits), request_id)
    handles = fields["multimodal_embedding_handles"]
    if not (isinstance(handles, list) and handles):  # (a getter that answered a list once, then something else)
        raise HandoffError("encoder_output.disaggregated_params.multimodal_embedding_handles",
                           "one handle per image/video", None, request_id=request_id)
    prompt_token_ids = getattr(encoder_output, "prompt_token_ids", None)
    if adapter is None and processor is not None:
        adapter = adapter_for(processor, request_id=request_id)
    mrope_ids, mrope_deltas = fields["mrope_position_ids_handle"], fields["mrope_position_deltas_handle"]
    layout = _accepted_layout(prompt_token_ids, handles, adapter, mrope_ids, limits, request_id)
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
    params = MultimodalParams(multimodal_input=disagg.to_multimodal_input(fields["multimodal_hashes"]),
                              multimodal_data=multimodal_data)
    try:
        new_dp = dataclasses.replace(dp, **dict(fields, request_type=request_type))
    except Exception as exc:  # its __post_init__ refused request_type (or the copied values)
        raise HandoffError("prefill_request(request_type=)", "a request type the params accept", request_type,
                           request_id=request_id, hint=f"{type(exc).__name__}: {exc}") from exc
    inputs = PreprocessedInputs(prompt_token_ids=disagg.prompt_token_ids, multimodal_params=params)
    return PrefillRequest(inputs, new_dp)


def _is_dataclass_instance(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)
