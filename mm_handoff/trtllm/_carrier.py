"""What travels from the encoder to the prefill side, where it rides, and how a check point reads it.

``DisaggregatedParams`` is a slotted dataclass and ``trtllm-serve`` converts it field by field, so a
new field would be dropped. The embedding-handle dicts travel whole (``List[Dict[str, Any]]``) and
``SharedTensorContainer.from_dict`` ignores keys it does not know, so the encoder attaches three
namespaced, JSON-safe keys into ``multimodal_embedding_handles[0]``:

* ``"mm_handoff.layout"``: the encoder's expanded prompt and layout (``HandoffLayout.to_wire()``);
* ``"mm_handoff.grids"``: ``{"family", "convention", "image_grid_thw", "video_grid_thw"}``;
* ``"mm_handoff.video_metadata"``: per video ``{"fps", "frames_indices", "total_num_frames", ...}``.

The last two let the prefill side rebuild the exact ids (policy ``rebuild``) when the layout itself is
missing. A caller may also put the same two keys in the request's ``inputs`` dict.

This module is the neutral ground of the glue: what the encoder side (``_encoder``), the PD side
(``_admission``, ``_prefill_request``) and the worker (``_worker``) all read from a request (the
carried keys, the handles, the request's own prompt, the multimodal params, its mRoPE ids, the
family adapter of its processor) and the prefill method's result type built from a layout. It
decides nothing: the checks are the core's (:mod:`mm_handoff.checks`), the policy is
:func:`mm_handoff.glue.policy.decide`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..adapters.registry import REGISTRY, build_adapter
from ..glue.engine_adapters import cached_adapter

LAYOUT_KEY = "mm_handoff.layout"
GRIDS_KEY = "mm_handoff.grids"
VIDEO_METADATA_KEY = "mm_handoff.video_metadata"
CARRIED_KEYS = (LAYOUT_KEY, GRIDS_KEY, VIDEO_METADATA_KEY)

# ------------------------------------------------------------------------- reading the carrier
def embedding_handles(disaggregated_params) -> list | None:
    handles = getattr(disaggregated_params, "multimodal_embedding_handles", None)
    return handles if isinstance(handles, list) and handles else None


def carried(mm_handles, inputs=None) -> dict:
    """The mm-handoff keys found in ``mm_handles[0]`` (first) or in ``inputs`` (second)."""
    found = {}
    first = mm_handles[0] if isinstance(mm_handles, list) and mm_handles and isinstance(mm_handles[0], dict) else {}
    for key in CARRIED_KEYS:
        if first.get(key) is not None:
            found[key] = first[key]
        elif isinstance(inputs, dict) and inputs.get(key) is not None:
            found[key] = inputs[key]
    return found


def request_label(disaggregated_params=None, fallback=None):
    """A name for a request in error messages, from what the check point can see.

    The E/PD request has no engine id yet at admission: use the disaggregated request id, else the
    context request id, else the first multimodal hash (``mm:xxxxxxxx``), else ``fallback``.
    """
    for name in ("disagg_request_id", "ctx_request_id"):
        value = getattr(disaggregated_params, name, None)
        if value is not None:
            return value
    hashes = getattr(disaggregated_params, "multimodal_hashes", None)
    if hashes and isinstance(hashes[0], (list, tuple)) and hashes[0]:
        return "mm:" + "".join(f"{int(v) & 0xFFFFFFFF:08x}" for v in hashes[0][:2])
    return fallback


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
    """``multimodal_data["mrope_config"]["mrope_position_ids"]`` (a tensor or a handle dict), or None."""
    cfg = (multimodal_data or {}).get("mrope_config") if isinstance(multimodal_data, dict) else None
    return cfg.get("mrope_position_ids") if isinstance(cfg, dict) else None


def own_prompt(processor, inputs):
    """This request's prompt ids, expanded or not; None when the request carries neither ids nor text.

    A text prompt is tokenized as upstream's prefill method does it:
    ``self.tokenizer(prompt, return_tensors="pt").input_ids[0]`` (``modeling_qwen3vl.py``).
    """
    if not isinstance(inputs, dict):
        return None
    ids = inputs.get("prompt_token_ids")
    if ids is not None:
        return np.asarray(ids)
    text = inputs.get("prompt")
    if not text:
        return None
    out = processor.tokenizer(text, return_tensors="pt").input_ids[0]
    return np.asarray(out.tolist() if hasattr(out, "tolist") else out)


def disagg_prefill_inputs(layout, result_class=None):
    """The prefill method's return value built from a layout (same values as the aggregated path).

    ``result_class``: ``DisaggPrefillMultimodalInputs`` (imported from ``tensorrt_llm.inputs.multimodal``,
    where the prefill method and ``BaseLLM._preprocess`` take it from, when not given).
    """
    if result_class is None:
        from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs

        result_class = DisaggPrefillMultimodalInputs
    kwargs = layout.to_disagg_prefill_inputs()
    if dataclasses.is_dataclass(result_class):
        names = {f.name for f in dataclasses.fields(result_class)}
        kwargs.update({name: build(layout) for name, build in _NEWER_FIELDS.items()
                       if name in names and name not in kwargs})
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return result_class(**kwargs)


def embed_mask_cumsum(layout):
    """Upstream's ``multimodal_embed_mask_cumsum`` for a layout: the int64 CPU prefix sum of its pad mask
    (``embed_mask.cumsum(0, dtype=torch.int64)`` in ``inputs/registry.py``; the Qwen families register no
    multimodal special ids, so every pad is an embedding slot)."""
    import torch

    mask = np.zeros(layout.prompt_len, dtype=np.int64)
    for off, ln in zip(layout.run_positions, layout.run_lengths, strict=True):
        mask[off:off + ln] = 1
    return torch.from_numpy(np.cumsum(mask))


def encoder_token_lengths(layout) -> list:
    """Per item, the vision tower's input: its ``t * h * w`` patches (rows times ``merge^2``)."""
    return [int(np.prod(item.grid_thw)) for item in layout.items]


#: fields newer ``DisaggPrefillMultimodalInputs`` have (``inputs/multimodal.py`` @ ae56b100 of the
#: yechank-nvidia/TensorRT-LLM fork), filled only where the installed dataclass declares them
_NEWER_FIELDS = {"encoder_token_lengths": encoder_token_lengths,
                 "multimodal_embed_mask_cumsum": embed_mask_cumsum}


def adapter_for(processor, *, convention: str | None = None, request_id=None):
    """The family adapter of a TensorRT-LLM input processor, cached per processor instance.

    Resolved through the registry by class (along the MRO) and built by
    :func:`~mm_handoff.adapters.registry.build_adapter` with the processor's tokenizer and config, so a factory
    written to the documented signature (no ``convention``) works and any failure is an AdapterError.
    The cache is the one every engine glue shares (:func:`~mm_handoff.glue.engine_adapters.cached_adapter`).
    """
    def build():
        return build_adapter(REGISTRY.resolve(type(processor)), tokenizer=getattr(processor, "tokenizer", None),
                             config=getattr(processor, "config", None), convention=convention,
                             request_id=request_id)

    return cached_adapter(processor, ("trtllm", convention), build)
