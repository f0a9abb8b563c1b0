"""One step that accepts a carried layout on the prefill side, whatever the engine.

The prefill side receives the encoder's layout (its wire form, or an already decoded
:class:`~mm_handoff.layout.HandoffLayout`) together with the embeddings, and must not run it
unless every part agrees with what this side holds. :func:`accept_layout` is that step, in one
order, for the TensorRT-LLM glue, ``prefill_request``, the HF reference engine and the vLLM glue:

1. decode the wire form (bounded by :class:`~mm_handoff.limits.Limits`, checksummed before any
   layout object is built, re-validated: a layout's timestamps, spans and groups follow from its ids);
2. skew: family, the whole token spec (field by field), tokenizer digest and processor convention
   against this side's adapter, so the layout is read with this side's ids and sizes only;
3. grids: the runs follow the grids; the carried mRoPE delta is the one the adapter computes from
   the ids and grids; this request's own grids, when the engine has them, equal the layout's;
4. embeddings: one per item, rows per item == pads per item, row width == the adapter's
   ``hidden * (1 + deepstack levels)`` where it is known;
5. this request's own prompt: the expanded ids equal the layout's, or an un-expanded prompt,
   re-expanded with the layout's items, gives exactly the layout's ids (handoffs mixed up between
   requests, or a prompt edited on the way, fail loudly);
6. mRoPE ids (or their shape) cover the prompt exactly.

Any failure is a :class:`~mm_handoff.errors.HandoffError`. An adapter that fails in another way
(a third-party adapter raising ``TypeError``, say) is wrapped in an
:class:`~mm_handoff.errors.AdapterError`, so a serving policy that handles ``HandoffError`` sees
every failure of this step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .checks import check_embedding_rows, check_grid, check_mrope_slice, check_skew, check_token_ids, shape_of
from .errors import AdapterError, EmbeddingCountError, GridMismatchError, HandoffError
from .items import IMAGE, VIDEO
from .layout import HandoffLayout, readonly_ids
from .spec import normalize_grids

__all__ = ["accept_layout", "call_adapter", "adapter_value", "embedding_shapes_of"]


def call_adapter(adapter, method: str, *args, request_id=None, **kwargs):
    """``adapter.method(*args, **kwargs)``; a failure that is not a HandoffError becomes an AdapterError."""
    try:
        return getattr(adapter, method)(*args, **kwargs)
    except HandoffError as exc:
        exc.with_request(request_id)
        raise
    except Exception as exc:  # a third-party adapter's bug must reach the policy as a typed error
        raise AdapterError(f"adapter.{method}", f"{method}() of {adapter!r} to succeed",
                           f"{type(exc).__name__}: {exc}", request_id=request_id,
                           hint="the family adapter failed; see the chained exception") from exc


def adapter_value(adapter, name: str, *, request_id=None):
    """``adapter.<name>`` (an attribute or property); an untyped failure becomes an AdapterError."""
    try:
        return getattr(adapter, name)
    except HandoffError as exc:
        exc.with_request(request_id)
        raise
    except Exception as exc:  # a third-party adapter's bug reaches the policy as a typed error
        raise AdapterError(f"adapter.{name}", f"{name} of {adapter!r}", f"{type(exc).__name__}: {exc}",
                           request_id=request_id) from exc


def embedding_shapes_of(embeddings, *, field: str = "embeddings", request_id=None) -> list:
    """Per-item shapes (as int tuples) of tensors, arrays, shape tuples or handle dicts."""
    if not isinstance(embeddings, (list, tuple)):
        raise HandoffError(field, "a list with one embedding (or handle) per image/video",
                           type(embeddings).__name__, request_id=request_id)
    return [shape_of(e, field=f"{field}[{i}].shape", request_id=request_id) for i, e in enumerate(embeddings)]


def _check_embeddings(layout: HandoffLayout, shapes: Sequence[tuple], width: int | None, request_id) -> None:
    if len(shapes) != len(layout.items):
        raise EmbeddingCountError("embeddings", f"{len(layout.items)} (one per image/video)", len(shapes),
                                  request_id=request_id)
    for i, shape in enumerate(shapes):
        if len(shape) != 2:
            raise EmbeddingCountError(f"embeddings[{i}].shape", "[rows, width]", list(shape), request_id=request_id)
    check_embedding_rows(layout, [s[0] for s in shapes], request_id=request_id)
    if width is not None:
        for i, shape in enumerate(shapes):
            if shape[1] != width:
                raise EmbeddingCountError(f"embeddings[{i}].shape[1]",
                                          f"{width} (hidden size x (1 + deepstack levels))",
                                          shape[1], request_id=request_id)


def _check_own_prompt(layout: HandoffLayout, adapter, prompt_token_ids, request_id) -> None:
    ids = readonly_ids(prompt_token_ids, "prompt_token_ids")
    if ids.shape[0] == layout.prompt_len:  # already expanded (a P -> D hop passes the encoder's ids)
        check_token_ids(layout.token_ids, ids, request_id=request_id, field="prompt_token_ids")
    else:
        call_adapter(adapter, "check_prompt", layout, ids, request_id=request_id)


def _check_delta(layout: HandoffLayout, adapter, request_id) -> None:
    """A carried mRoPE delta is what the adapter computes from the ids and the layout's grids."""
    if layout.mrope_position_delta is None:
        return
    grids = {m: [i.grid_thw for i in layout.items if i.modality == m] for m in (IMAGE, VIDEO)}
    own = call_adapter(adapter, "mrope_delta", layout.token_ids, image_grid_thw=grids[IMAGE],
                       video_grid_thw=grids[VIDEO], request_id=request_id)
    if own != layout.mrope_position_delta:
        raise GridMismatchError("mrope_position_delta", f"{own} (from the ids and the layout's grids)",
                                layout.mrope_position_delta, request_id=request_id,
                                hint="the grids or the delta were changed after the encoder computed them")


def _check_own_grids(layout: HandoffLayout, spec, image_grid_thw, video_grid_thw, limits, request_id) -> None:
    """This request's own grids (what the engine holds, when it does) equal the layout's, in order."""
    for modality, given in ((IMAGE, image_grid_thw), (VIDEO, video_grid_thw)):
        if given is None:
            continue
        field = f"{modality}_grid_thw"
        own = normalize_grids(given, field, merge_size=spec.merge_size, limits=limits)
        carried = [i.grid_thw for i in layout.items if i.modality == modality]
        if own != carried:
            raise GridMismatchError(field, f"{own} (this request's)", carried, request_id=request_id,
                                    hint="the carried layout describes other images or videos")


def accept_layout(carried: Any, adapter, *, embeddings=None, embedding_shapes=None,
                  prompt_token_ids=None, mrope_position_ids=None, image_grid_thw=None, video_grid_thw=None,
                  limits=None, request_id=None) -> HandoffLayout:
    """The encoder's layout, checked against this side (see the module doc); raises on any mismatch.

    ``carried``: a wire payload (dict) or a :class:`HandoffLayout`. ``adapter``: this side's family
    adapter. ``embeddings`` (tensors, arrays or handle dicts, one per item) or ``embedding_shapes``
    (``(rows, width)`` per item): checked when given. ``prompt_token_ids``: this request's own prompt,
    expanded or not. ``mrope_position_ids``: the ids (or their shape) about to be sliced.
    ``image_grid_thw`` / ``video_grid_thw``: this request's own grids, when the engine has them.
    ``limits``: the bounds the payload is decoded under (:class:`~mm_handoff.limits.Limits`).
    """
    if isinstance(carried, HandoffLayout):
        layout = carried
    else:
        layout = HandoffLayout.from_wire(carried, limits=limits, request_id=request_id)
    spec = adapter_value(adapter, "spec", request_id=request_id)
    check_skew(layout, family=adapter_value(adapter, "family", request_id=request_id),
               convention=adapter_value(adapter, "convention", request_id=request_id),
               tokenizer_digest=adapter_value(adapter, "tokenizer_digest", request_id=request_id),
               spec=spec, request_id=request_id)
    check_grid(layout, request_id=request_id)
    _check_delta(layout, adapter, request_id)
    _check_own_grids(layout, spec, image_grid_thw, video_grid_thw, limits, request_id)
    if embeddings is not None and embedding_shapes is not None:
        raise HandoffError("embeddings", "either embeddings or embedding_shapes", "both", request_id=request_id)
    if embeddings is not None:
        embedding_shapes = embedding_shapes_of(embeddings, request_id=request_id)
    if embedding_shapes is not None:
        shapes = embedding_shapes_of(embedding_shapes, field="embedding_shapes", request_id=request_id)
        _check_embeddings(layout, shapes, adapter_value(adapter, "handle_row_width", request_id=request_id), request_id)
    if prompt_token_ids is not None:
        _check_own_prompt(layout, adapter, prompt_token_ids, request_id)
    if mrope_position_ids is not None:
        check_mrope_slice(mrope_position_ids, layout.prompt_len, request_id=request_id)
    return layout

