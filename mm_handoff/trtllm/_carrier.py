"""What travels from the encoder to the prefill side, where it rides, and how a check point reads it.

``DisaggregatedParams`` is a slotted dataclass and ``trtllm-serve`` converts it field by field, so a
new field would be dropped. The embedding-handle dicts travel whole (``List[Dict[str, Any]]``) and
``SharedTensorContainer.from_dict`` ignores keys it does not know, so the encoder stamps three
namespaced, JSON-safe keys into ``multimodal_embedding_handles[0]``:

* ``"mm_handoff.layout"``: the encoder's expanded prompt and layout (``HandoffLayout.to_wire()``);
* ``"mm_handoff.grids"``: ``{"family", "convention", "image_grid_thw", "video_grid_thw"}``;
* ``"mm_handoff.video_metadata"``: per video ``{"fps", "frames_indices", "total_num_frames", ...}``.

The last two let the prefill side rebuild the exact ids (policy ``rebuild``) when the layout itself is
missing. A caller may also put the same two keys in the request's ``inputs`` dict.

Every check point applies the policy to a failed check through :func:`enforce`, the same way.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable

from ..accept import adapter_value, embedding_shapes_of
from ..errors import HandoffError
from ..policy import Policy
from ..registry import REGISTRY, build_adapter

__all__ = [
    "LAYOUT_KEY",
    "GRIDS_KEY",
    "VIDEO_METADATA_KEY",
    "CARRIED_KEYS",
    "FALLBACK",
    "enforce",
    "embedding_handles",
    "carried",
    "handle_rows",
    "request_label",
    "adapter_for",
    "adapter_value",
    "find_multimodal_params",
    "mrope_ids_of",
]

log = logging.getLogger("mm_handoff.trtllm")

LAYOUT_KEY = "mm_handoff.layout"
GRIDS_KEY = "mm_handoff.grids"
VIDEO_METADATA_KEY = "mm_handoff.video_metadata"
CARRIED_KEYS = (LAYOUT_KEY, GRIDS_KEY, VIDEO_METADATA_KEY)

#: what :func:`enforce` returns under ``fallback``: the caller goes on with the engine's own result
FALLBACK = object()


def enforce(policy: Policy, error: HandoffError, *, where: str, rebuild: Callable | None = None):
    """Apply the policy to one failed check; returns ``rebuild()``'s value or :data:`FALLBACK`.

    ``raise``: the typed error propagates. ``fallback``: a warning. ``rebuild``: ``rebuild()`` where
    the caller can rebuild (the prefill point), else the same as ``raise``.
    """
    if policy is Policy.FALLBACK:
        log.warning("mm-handoff: %s: %s (policy=fallback: continuing with the engine's own behaviour)",
                    where, error)
        return FALLBACK
    if policy is Policy.REBUILD and rebuild is not None:
        log.info("mm-handoff: %s: %s (policy=rebuild: rebuilding the aggregated layout)", where, error)
        return rebuild()
    raise error


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


def handle_rows(mm_handles, *, request_id=None) -> list:
    """Rows per embedding handle (``tensor_size[0]``), in item order; shapes only, nothing rebuilt."""
    shapes = embedding_shapes_of(mm_handles, field="multimodal_embedding_handles", request_id=request_id)
    for i, shape in enumerate(shapes):
        if not shape:
            raise HandoffError(f"multimodal_embedding_handles[{i}].tensor_size", "[rows, width]", list(shape),
                               request_id=request_id)
    return [shape[0] for shape in shapes]


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


# ----------------------------------------------------------------------------------- adapters
_ADAPTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ADAPTERS_LOCK = threading.Lock()


def adapter_for(processor, *, convention: str | None = None, request_id=None):
    """The family adapter of a TensorRT-LLM input processor, cached per processor instance.

    Resolved through the registry by class (along the MRO) and built by
    :func:`~mm_handoff.registry.build_adapter` with the processor's tokenizer and config, so a factory
    written to the documented signature (no ``convention``) works and any failure is an AdapterError.
    """
    key = (convention,)
    try:
        with _ADAPTERS_LOCK:
            cached = _ADAPTERS.get(processor, {}).get(key)
    except TypeError:  # not weak-referenceable: no cache
        cached = None
    if cached is not None:
        return cached
    adapter = build_adapter(REGISTRY.resolve(type(processor)), tokenizer=getattr(processor, "tokenizer", None),
                            config=getattr(processor, "config", None), convention=convention,
                            request_id=request_id)
    try:
        with _ADAPTERS_LOCK:
            _ADAPTERS.setdefault(processor, {})[key] = adapter
    except TypeError:
        pass
    return adapter

