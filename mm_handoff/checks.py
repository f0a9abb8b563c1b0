"""The accept step on a carried layout, and every check it is made of.

The prefill side receives the encoder's layout (its wire form, or an already decoded
:class:`~mm_handoff.layout.HandoffLayout`) with the embeddings, and must not run it unless every
part agrees with what this side holds. :func:`accept_layout` is that step, in one order, for every
engine (the TensorRT-LLM glue, ``prefill_request``, the HF reference engine, the vLLM glue);
:func:`validate` is the same step on an already decoded layout, with or without this side's adapter:

1. decode the wire form (bounded by :class:`~mm_handoff.reading.Limits`, checksummed before any
   layout object is built, re-validated: a layout's timestamps, spans and groups follow from its ids);
2. mRoPE ids (or their shape) about to be sliced cover the prompt exactly (the silent slice of
   TensorRT-LLM #20138);
3. skew: family, the whole token spec (field by field), tokenizer digest and processor convention
   against this side's adapter, so the layout is read with this side's ids and sizes only;
4. grids: the runs follow the grids, and where the family prints timestamps every video group has
   one (a video of one group included); the carried mRoPE delta is the one the adapter computes from
   the ids and grids, and so are the values of mRoPE ids held in this process (the layout's own, or
   an array about to be sliced); this request's own grids and video metadata (its timestamps, all of
   its frame lists within ``limits.max_frames``), when the engine has them, equal the layout's;
5. embeddings: one per item, rows per item == pads per item, row width == the adapter's
   ``hidden * (1 + deepstack levels)`` where it is known (or the rows alone: a total or per item);
6. the fingerprint, when one is given;
7. this request's own prompt: the expanded ids equal the layout's, or an un-expanded prompt,
   re-expanded with the layout's items, gives exactly the layout's ids (handoffs mixed up between
   requests, or a prompt edited on the way, fail loudly).

Without an adapter (``validate(layout)``) steps 3 and 4's delta are skipped and a prompt must be the
expanded ids. :func:`check_own_request` is the part of the step that tells whether a layout is this
request's at all (its own grids, video metadata and prompt): the engine glues run it apart, since its
failure is refused under every policy. This side's facts travel through the step as one value,
:class:`SideFacts`. What an engine checks without a layout is here too: the mRoPE slice
(:func:`check_mrope_slice`), a prompt's pads vs the encoder's rows (:func:`check_prompt_pads`) and one
placeholder per item before an engine expands them (:func:`check_placeholders`); two id sequences are
compared by :func:`~mm_handoff.layout.tokens.check_token_ids`. The engine glue calls these and adds only
what is its own.

Pure functions. Each failure is a typed :class:`HandoffError` naming the request, the field, the
expected and the actual value, plus the likely cause. An adapter that fails in another way (a
third-party adapter raising ``TypeError``, say) is wrapped in an :class:`AdapterError`, so a serving
policy that handles ``HandoffError`` sees every failure.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .adapters.base import typed_adapter
from .adapters.families import same_family
from .errors import (
    STOCK_HINT,
    AdapterError,
    EmbeddingCountError,
    FingerprintMismatchError,
    GridMismatchError,
    HandoffError,
    MropeLengthError,
    SkewError,
    TokenMismatchError,
    typed_failures,
)
from .layout.contract import HandoffLayout
from .layout.items import IMAGE, VIDEO
from .layout.spec import TokenSpec, equals_checked_grids, normalize_grids
from .layout.tokens import check_token_ids, readonly_ids
from .reading import (
    embedding_shapes_of,
    plain_sequence,
    read_count,
    resolve_limits,
    sequence_len,
    shape_of,
    video_metadata_of,
)


# ------------------------------------------------------------------------------------ the checks
@typed_failures("prompt_token_ids", EmbeddingCountError)
def check_prompt_pads(prompt_token_ids, spec: TokenSpec, rows: int, *, request_id=None, limits=None) -> None:
    """Without a layout: the image/video pads in a prompt are as many as the encoder's embedding rows."""
    rows = read_count(rows, "rows", request_id, EmbeddingCountError)
    ids = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=resolve_limits(limits).max_prompt_len)
    found = int(np.count_nonzero((ids == spec.image_pad) | (ids == spec.video_pad)))
    if found != rows:
        raise EmbeddingCountError("prompt_token_ids (image/video pads)", f"{rows} (rows of the encoder's embeddings)",
                                  found, request_id=request_id)


@typed_failures("prompt_token_ids")
def check_placeholders(prompt_token_ids, spec: TokenSpec, *, images: int, videos: int,
                       field: str = "prompt_token_ids before expansion", hint: str | None = None,
                       request_id=None, limits=None) -> None:
    """Before an engine expands a prompt: one ``<|image_pad|>`` per image and one ``<|video_pad|>`` per
    video, exactly (a prompt that was already expanded fails at its first surplus pad; one that lacks a
    placeholder, by the count)."""
    images = read_count(images, "images", request_id, HandoffError)
    videos = read_count(videos, "videos", request_id, HandoffError)
    raw = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=resolve_limits(limits).max_prompt_len)
    for name, pad, count in (("<|image_pad|>", spec.image_pad, images), ("<|video_pad|>", spec.video_pad, videos)):
        places = np.flatnonzero(raw == pad)
        if len(places) < count:
            raise GridMismatchError(field, f"{count} {name} (one per item)", f"{len(places)} {name}",
                                    request_id=request_id, hint="the prompt lacks an item's placeholder")
        if len(places) == count:
            continue
        index = int(places[count])
        lo = max(0, index - 3)
        raise TokenMismatchError(
            field, f"{count} {name} (one per item)", f"{len(places)} {name}",
            index=index, expected_context=f"no {name} after the item's placeholder",
            actual_context=raw[lo:index + 4].tolist(), request_id=request_id, hint=hint)


@typed_failures("mrope_position_ids", MropeLengthError)
def check_mrope_slice(mrope_position_ids_or_shape, prompt_len: int, *, begin: int = 0,
                      end: int | None = None, request_id=None) -> int:
    """Check that mRoPE ids cover the prompt exactly before ``[:, :, begin:end]`` is taken.

    Accepts an array/tensor or its shape, ``[3, L]`` or ``[3, 1, L]`` (what the context-phase slice
    in TensorRT-LLM sees). Returns L. Shapes only: no copy, no device sync.
    """
    prompt_len = read_count(prompt_len, "prompt_len", request_id)
    begin = read_count(begin, "begin", request_id)
    end = None if end is None else read_count(end, "end", request_id)
    shape = shape_of(mrope_position_ids_or_shape, request_id=request_id)
    if not (len(shape) == 2 and shape[0] == 3) and not (len(shape) == 3 and shape[:2] == (3, 1)):
        raise MropeLengthError("mrope_position_ids.shape", "[3, L] or [3, 1, L]", list(shape),
                               request_id=request_id)
    length = shape[-1]
    if length != prompt_len:
        raise MropeLengthError("mrope_position_ids.shape[-1]", f"prompt length {prompt_len}", length,
                               request_id=request_id,
                               hint=(STOCK_HINT if length > prompt_len else
                                     "the mRoPE ids were computed for a shorter prompt"))
    stop = prompt_len if end is None else end
    if not (0 <= begin <= stop <= length):
        raise MropeLengthError("mrope slice", f"0 <= begin <= end <= {length}", (begin, stop),
                               request_id=request_id)
    return length


@typed_failures("layout", GridMismatchError)
def check_grid(layout: HandoffLayout, *, request_id=None) -> None:
    """Runs follow the grid: video groups == t and pads per group == h*w/merge^2; images one run. Where the
    family prints timestamps (its spec has their vocabulary) every video group has one, a video of one
    group included: a video without them is the stock prefill shape."""
    m2 = layout.spec.merge_size ** 2
    stamping = layout.spec.timestamps is not None
    for i, item in enumerate(layout.items):
        t, h, w = item.grid_thw
        runs = item.run_offsets.shape[0]
        if item.modality == VIDEO:
            if runs != t:
                raise GridMismatchError(f"items[{i}].runs", f"{t} runs for grid {item.grid_thw}", runs,
                                        request_id=request_id, hint=STOCK_HINT)
            if stamping and item.seconds is None:
                raise GridMismatchError(f"items[{i}].timestamps", f"a <t seconds> text before each of its {t} "
                                        "group(s) (the family prints one before every group)", None,
                                        request_id=request_id, hint=STOCK_HINT)
            per_group = h * w // m2
            wrong = np.flatnonzero(item.run_lengths != per_group)
            if wrong.size:  # name the first group that does not follow the grid
                g = int(wrong[0])
                raise GridMismatchError(f"items[{i}].runs[{g}].length",
                                        f"{per_group} pads per group for grid {item.grid_thw}",
                                        int(item.run_lengths[g]), request_id=request_id)
        elif runs != 1:
            raise GridMismatchError(f"items[{i}].runs", f"1 run for image grid {item.grid_thw}", runs,
                                    request_id=request_id)


@typed_failures("embedding_rows", EmbeddingCountError)
def check_embedding_rows(layout: HandoffLayout, embedding_rows, *, request_id=None) -> None:
    """Pads vs the encoder's rows: a total, or one count per item in prompt order (counted before read)."""
    def as_count(value):
        return read_count(value, "embedding_rows", request_id, EmbeddingCountError)

    if isinstance(embedding_rows, np.ndarray) and embedding_rows.ndim != 1:
        if embedding_rows.ndim:
            raise EmbeddingCountError("embedding_rows", "a count, or one count per item", f"shape "
                                      f"{embedding_rows.shape}", request_id=request_id)
        embedding_rows = embedding_rows[()]  # a 0-d array is the total it holds
    if not isinstance(embedding_rows, (list, tuple, np.ndarray)):
        rows = as_count(embedding_rows)
        if rows != layout.num_pads:
            raise EmbeddingCountError("embedding_rows", f"{layout.num_pads} (pads in the prompt)", rows,
                                      request_id=request_id)
        return
    given = len(embedding_rows) if isinstance(embedding_rows, np.ndarray) else sequence_len(embedding_rows)
    if given != len(layout.items):  # before any entry is read (a broadcast view of 10**7)
        raise EmbeddingCountError("embedding_rows", f"{len(layout.items)} counts (one per image/video)",
                                  given, request_id=request_id)
    rows = [as_count(r) for r in (embedding_rows if isinstance(embedding_rows, np.ndarray)
                                  else plain_sequence(embedding_rows))]
    expected = layout.multimodal_embedding_lengths
    if rows != expected:
        raise EmbeddingCountError("embedding_rows", f"{expected} (pads per item)", rows, request_id=request_id)


@typed_failures("layout", SkewError)
def check_skew(layout: HandoffLayout, *, family: str, convention: str, tokenizer_digest: str | None,
               spec: TokenSpec | None = None, request_id=None) -> None:
    """Encoder (the layout) and prefill (its adapter) agree on family, tokenizer, spec and convention.

    ``spec``: this side's; the carried spec must equal it field by field (a layout is only ever read
    with this side's ids and sizes). ``tokenizer_digest``: this side's; when it is given the layout
    must carry the same one (a layout without one is a skew too). The message says what each side
    has, so a version skew between the two deployments is obvious.
    """
    if not isinstance(layout, HandoffLayout):
        raise SkewError("layout", "a HandoffLayout", type(layout).__name__, request_id=request_id)
    if type(family) is not str or type(convention) is not str or (
            tokenizer_digest is not None and type(tokenizer_digest) is not str) or (
            spec is not None and not isinstance(spec, TokenSpec)):
        raise SkewError("prefill side", "family and convention strings, a digest string or None, a TokenSpec or "
                        "None", {"family": family, "convention": convention, "tokenizer_digest": tokenizer_digest,
                                 "spec": type(spec).__name__}, request_id=request_id,
                        hint="the adapter does not follow the protocol")
    if not same_family(layout.family, family):
        raise SkewError("family", f"{family} (prefill)", f"{layout.family} (encoder)", request_id=request_id,
                        hint="encoder and prefill serve different model families")
    if spec is not None and layout.spec is not spec and layout.spec != spec:
        name, ours, theirs = _first_spec_difference(spec, layout.spec)
        raise SkewError(f"spec.{name}", f"{ours!r} (prefill)", f"{theirs!r} (encoder)", request_id=request_id,
                        hint="the layout was built with other ids or sizes than this side's")
    if tokenizer_digest is not None and layout.tokenizer_digest != tokenizer_digest:
        raise SkewError("tokenizer_digest", f"{tokenizer_digest} (prefill)", f"{layout.tokenizer_digest} (encoder)",
                        request_id=request_id, hint="encoder and prefill use different tokenizers or special ids")
    if layout.convention != convention:
        raise SkewError("convention", f"{convention} (prefill)", f"{layout.convention} (encoder)",
                        request_id=request_id,
                        hint="encoder and prefill run transformers versions on different sides of 5.10")


def _first_spec_difference(ours: TokenSpec, theirs: TokenSpec) -> tuple:
    a, b = ours.as_dict(), theirs.as_dict()
    for name in a:
        if a[name] != b[name]:
            if isinstance(a[name], dict) and isinstance(b[name], dict):
                sub = next(k for k in a[name] if a[name][k] != b[name][k])
                return f"{name}.{sub}", a[name][sub], b[name][sub]
            return name, a[name], b[name]
    return "spec", a, b


# ------------------------------------------------------------------------------ the accept step
@attrs.frozen
class SideFacts:
    """What this (prefill) side holds for one request, to check a carried layout against: one value through
    the accept step. Every field is optional; what is given is checked (see :func:`validate`)."""

    #: tensors, arrays or handle dicts, one per item; or their ``(rows, width)`` shapes; or the rows alone (a
    #: total, or one count per item): at most one of the three
    embeddings: Any = None
    embedding_shapes: Any = None
    embedding_rows: Any = None
    #: this request's own prompt (expanded, or as the engine holds it before expansion)
    prompt_token_ids: Any = None
    #: the mRoPE ids (or their shape) about to be sliced
    mrope_position_ids: Any = None
    #: this request's own grids and video metadata (fps, frames_indices per video), when the engine has them
    image_grid_thw: Any = None
    video_grid_thw: Any = None
    video_metadata: Any = None
    #: the encoder's ``layout.fingerprint(include_mrope=False)``
    fingerprint: Any = None
    #: the bounds of this request (:class:`~mm_handoff.reading.Limits`; None: the process default)
    limits: Any = None
    request_id: Any = None


def _check_mrope(layout: HandoffLayout, adapter, side: SideFacts) -> None:
    """Step 2. Without an adapter a prompt must be the expanded ids, so the layout's own mRoPE ids are
    what would be sliced to a prompt of another length."""
    if side.mrope_position_ids is not None:
        check_mrope_slice(side.mrope_position_ids, layout.prompt_len, request_id=side.request_id)
    elif adapter is None and side.prompt_token_ids is not None and layout.mrope_position_ids is not None:
        ids = readonly_ids(side.prompt_token_ids, "prompt_token_ids",
                           max_len=resolve_limits(side.limits).max_prompt_len)
        if ids.shape[0] != layout.prompt_len:
            check_mrope_slice(layout.mrope_position_ids, int(ids.shape[0]), request_id=side.request_id)


def _values_of(mrope_position_ids, request_id):
    """The values of mRoPE ids held in this process (a numpy array, a CPU tensor), as ``(3, L)``; None for a
    shape, a handle or a device tensor (read without a copy or a device sync: their shape is checked). Ids
    that are not integers (floats, bools, objects) are refused: no slice of them is a position."""
    arr = mrope_position_ids
    if hasattr(arr, "detach") and getattr(arr, "device", None) is not None and str(arr.device) == "cpu":
        arr = arr.detach().numpy()
    if not isinstance(arr, np.ndarray):
        return None
    if arr.dtype.kind not in "iu":
        raise MropeLengthError("mrope_position_ids", "integer mRoPE ids", f"dtype {arr.dtype}", request_id=request_id)
    return arr.reshape(3, -1)


def _check_mrope_values(layout: HandoffLayout, adapter, side: SideFacts) -> None:
    """mRoPE ids held in this process (the layout's own, or the ids about to be sliced) are the adapter's for
    the layout's ids and grids, value by value (rows swapped or shifted ids have the right shape)."""
    rid = side.request_id
    held = [(f, v) for f, v in (("layout.mrope_position_ids", layout.mrope_position_ids),
                                ("mrope_position_ids", _values_of(side.mrope_position_ids, rid))) if v is not None]
    if not held:
        return
    own, _ = adapter.layout_mrope_positions(layout, limits=side.limits, request_id=rid)
    for field, values in held:
        if not np.array_equal(own, values):
            bad = np.argwhere(np.asarray(own) != values)[0] if own.shape == values.shape else None
            raise MropeLengthError(field, "the adapter's mRoPE ids for the layout's ids and grids",
                                   "other values" if bad is None else
                                   f"{int(values[tuple(bad)])} at row {int(bad[0])}, position {int(bad[1])} "
                                   f"(expected {int(own[tuple(bad)])})", request_id=rid,
                                   hint="the mRoPE ids were not computed for this prompt's layout")


def _check_side(layout: HandoffLayout, adapter, side: SideFacts) -> None:
    """Step 3: the layout is read with this side's family, spec, tokenizer and convention."""
    check_skew(layout, family=adapter.family, convention=adapter.convention,
               tokenizer_digest=adapter.tokenizer_digest, spec=adapter.spec, request_id=side.request_id)


def _grids_of(layout: HandoffLayout, modality: str) -> list:
    return [i.grid_thw for i in layout.items if i.modality == modality]


def _check_delta(layout: HandoffLayout, adapter, side: SideFacts) -> None:
    """A carried mRoPE delta is what the adapter computes from the ids and the layout's grids."""
    if layout.mrope_position_delta is None:
        return
    own = adapter.layout_mrope_delta(layout, limits=side.limits, request_id=side.request_id)
    if type(own) is not int and not isinstance(own, np.integer):
        raise AdapterError("adapter.layout_mrope_delta", "an int", type(own).__name__, request_id=side.request_id)
    if own != layout.mrope_position_delta:
        raise GridMismatchError("mrope_position_delta", f"{own} (from the ids and the layout's grids)",
                                layout.mrope_position_delta, request_id=side.request_id,
                                hint="the grids or the delta were changed after the encoder computed them")


def _check_own_grids(layout: HandoffLayout, side: SideFacts) -> None:
    """This request's own grids (what the engine holds, when it does) equal the layout's, in order."""
    for modality, given in ((IMAGE, side.image_grid_thw), (VIDEO, side.video_grid_thw)):
        if given is None:
            continue
        field, want = f"{modality}_grid_thw", _grids_of(layout, modality)
        if equals_checked_grids(given, want, merge_size=layout.spec.merge_size, limits=side.limits):
            continue  # (what normalize_grids would return: the layout's own grids)
        own = normalize_grids(given, field, merge_size=layout.spec.merge_size, limits=side.limits)
        if own != want:
            raise GridMismatchError(field, f"{own} (this request's)", want,
                                    request_id=side.request_id,
                                    hint="the carried layout describes other images or videos")


def _check_video_metadata(layout: HandoffLayout, adapter, side: SideFacts) -> None:
    """This request's own video metadata gives the layout's timestamps (all of its frame lists bounded)."""
    if side.video_metadata is None:
        return
    if adapter is None:
        raise HandoffError("video_metadata", "this side's adapter to read it with", None, request_id=side.request_id)
    snapshots = video_metadata_of(side.video_metadata, side.limits, request_id=side.request_id)  # read once
    adapter.check_video_metadata(layout, snapshots, limits=side.limits, request_id=side.request_id)


def _check_embeddings(layout: HandoffLayout, adapter, side: SideFacts) -> None:
    """Step 5: one embedding per item of ``[rows, width]``, rows per item == pads per item, the adapter's
    row width; or the rows alone (a total, or one count per item)."""
    rid = side.request_id
    embeddings, embedding_shapes = side.embeddings, side.embedding_shapes
    if sum(v is not None for v in (embeddings, embedding_shapes, side.embedding_rows)) > 1:
        raise HandoffError("embeddings", "one of embeddings, embedding_shapes or embedding_rows", "several",
                           request_id=rid)
    if side.embedding_rows is not None:
        check_embedding_rows(layout, side.embedding_rows, request_id=rid)
    if embeddings is None and embedding_shapes is None:
        return
    given = embeddings if embeddings is not None else embedding_shapes
    if isinstance(given, (list, tuple)) and sequence_len(given) != len(layout.items):  # before a shape is read
        raise EmbeddingCountError("embeddings", f"{len(layout.items)} (one per image/video)", sequence_len(given),
                                  request_id=rid)
    shapes = embedding_shapes_of(given, field="embeddings" if embeddings is not None else "embedding_shapes",
                                 request_id=rid)
    if len(shapes) != len(layout.items):
        raise EmbeddingCountError("embeddings", f"{len(layout.items)} (one per image/video)", len(shapes),
                                  request_id=rid)
    for i, shape in enumerate(shapes):
        if len(shape) != 2:
            raise EmbeddingCountError(f"embeddings[{i}].shape", "[rows, width]", list(shape), request_id=rid)
    rows = [s[0] for s in shapes]  # (plain ints: the shapes were read strictly)
    if rows != layout.multimodal_embedding_lengths:
        check_embedding_rows(layout, rows, request_id=rid)
    width = None if adapter is None else adapter.handle_row_width
    for i, shape in enumerate(shapes):
        if width is not None and shape[1] != width:
            raise EmbeddingCountError(f"embeddings[{i}].shape[1]", f"{width} (hidden size x (1 + deepstack levels))",
                                      shape[1], request_id=rid)


def _check_fingerprint(layout: HandoffLayout, side: SideFacts) -> None:
    """Step 6: the layout is the one the encoder described, when its fingerprint is given."""
    if side.fingerprint is None:
        return
    if type(side.fingerprint) is not str:
        raise FingerprintMismatchError("fingerprint", "the encoder's fingerprint, a string",
                                       type(side.fingerprint).__name__, request_id=side.request_id)
    if side.fingerprint != layout.fingerprint(include_mrope=False):
        raise FingerprintMismatchError("fingerprint", side.fingerprint, layout.fingerprint(include_mrope=False),
                                       request_id=side.request_id,
                                       hint="the prefill layout is not the one the encoder described")


def _check_own_prompt(layout: HandoffLayout, adapter, side: SideFacts) -> None:
    """Step 7: the expanded ids equal the layout's; an un-expanded prompt re-expands to them exactly."""
    if side.prompt_token_ids is None:
        return
    ids = readonly_ids(side.prompt_token_ids, "prompt_token_ids", max_len=resolve_limits(side.limits).max_prompt_len)
    if ids.shape[0] == layout.prompt_len or adapter is None:  # expanded (a P -> D hop passes the encoder's ids)
        check_token_ids(layout.token_ids, ids, request_id=side.request_id, field="prompt_token_ids",
                        limits=side.limits)
    else:
        adapter.check_prompt(layout, ids, request_id=side.request_id)


@typed_failures("handoff")
def check_layout(layout: HandoffLayout, adapter, side: SideFacts) -> HandoffLayout:
    """The accept step's checks (see the module doc) of a decoded layout against this side's facts, in
    order; returns the layout unchanged, raises on the first failure. ``adapter``: this side's family
    adapter, or None (the checks that need one are skipped)."""
    if not isinstance(side, SideFacts):
        raise HandoffError("side", "a SideFacts (this side's facts)", type(side).__name__)
    if adapter is not None:
        adapter = typed_adapter(adapter, request_id=side.request_id)
    if not isinstance(layout, HandoffLayout):
        raise HandoffError("layout", "a HandoffLayout (accept_layout decodes a wire payload)", type(layout).__name__,
                           request_id=side.request_id)
    _check_mrope(layout, adapter, side)
    if adapter is not None:
        _check_side(layout, adapter, side)
    check_grid(layout, request_id=side.request_id)
    if adapter is not None:
        _check_delta(layout, adapter, side)
        _check_mrope_values(layout, adapter, side)
    _check_own_grids(layout, side)
    _check_video_metadata(layout, adapter, side)
    _check_embeddings(layout, adapter, side)
    _check_fingerprint(layout, side)
    _check_own_prompt(layout, adapter, side)
    return layout


@typed_failures("handoff")
def check_own_request(layout: HandoffLayout, adapter=None, *, prompt_token_ids=None, image_grid_thw=None,
                      video_grid_thw=None, video_metadata=None, limits=None, request_id=None) -> HandoffLayout:
    """That an accepted layout is this request's: its own grids and video metadata (step 4) and its own
    prompt (step 7), each where given; returns the layout unchanged, raises on the first failure.

    A glue runs it apart from the rest of the accept step because its failure is not a mismatch for the
    policy to repair: a layout that does not belong to the request is refused under every policy (a
    ``rebuild`` starts from this request's own prompt, grids and metadata, never from such a layout;
    ``fallback`` never passes it on). ``adapter``: this side's (None: a prompt must be the expanded ids).
    """
    side = SideFacts(prompt_token_ids=prompt_token_ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                     video_metadata=video_metadata, limits=limits, request_id=request_id)
    if adapter is not None:
        adapter = typed_adapter(adapter, request_id=request_id)
    if not isinstance(layout, HandoffLayout):
        raise HandoffError("layout", "an accepted HandoffLayout", type(layout).__name__, request_id=request_id)
    _check_own_grids(layout, side)
    _check_video_metadata(layout, adapter, side)
    _check_own_prompt(layout, adapter, side)
    return layout


@typed_failures("handoff")
def validate(layout: HandoffLayout, adapter=None, *, embeddings=None, embedding_shapes=None, embedding_rows=None,
             prompt_token_ids=None, mrope_position_ids=None, image_grid_thw=None, video_grid_thw=None,
             video_metadata=None, fingerprint: str | None = None, limits=None, request_id=None) -> HandoffLayout:
    """The accept step (see the module doc) on a decoded layout; returns it unchanged, raises on the first
    failure. ``adapter``: this side's family adapter; without it the checks that need one are skipped.
    The other arguments are this side's facts (:class:`SideFacts`, where each is described).
    """
    side = SideFacts(embeddings=embeddings, embedding_shapes=embedding_shapes, embedding_rows=embedding_rows,
                     prompt_token_ids=prompt_token_ids, mrope_position_ids=mrope_position_ids,
                     image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw, video_metadata=video_metadata,
                     fingerprint=fingerprint, limits=limits, request_id=request_id)
    return check_layout(layout, adapter, side)


@typed_failures("handoff")
def accept_layout(carried: Any, adapter, *, embeddings=None, embedding_shapes=None, embedding_rows=None,
                  prompt_token_ids=None, mrope_position_ids=None, image_grid_thw=None, video_grid_thw=None,
                  video_metadata=None, limits=None, request_id=None) -> HandoffLayout:
    """The encoder's layout, decoded and checked against this side (see the module doc); raises on any
    mismatch. ``carried``: a wire payload (dict) or a :class:`HandoffLayout`. ``adapter``: this side's
    family adapter. ``limits``: the bounds the payload is decoded under (:class:`~mm_handoff.reading.Limits`).
    The other arguments are this side's facts (:class:`SideFacts`).
    """
    limits = resolve_limits(limits)  # read once for every step (the process default names a setting)
    side = SideFacts(embeddings=embeddings, embedding_shapes=embedding_shapes, embedding_rows=embedding_rows,
                     prompt_token_ids=prompt_token_ids, mrope_position_ids=mrope_position_ids,
                     image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw, video_metadata=video_metadata,
                     limits=limits, request_id=request_id)
    if isinstance(carried, HandoffLayout):
        layout = carried
    else:
        layout = HandoffLayout.from_wire(carried, limits=limits, request_id=request_id)
    return check_layout(layout, adapter, side)
