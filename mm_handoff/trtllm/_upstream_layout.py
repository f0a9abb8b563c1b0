"""Upstream's own carrier, validated: ``DisaggregatedParams.multimodal_layout`` read as a ``HandoffLayout``.

A TensorRT-LLM whose ``DisaggregatedParams`` has ``multimodal_layout`` (a ``DisaggPrefillMultimodalInputs``
built on the encoder side) no longer rebuilds the prompt on the prefill side, and its own check of the
carried value is a handle count. mm-handoff then stops rewriting the prefill (``mode=validate``) and reads
that value the way it reads its own carried layout, through the same strict readers and
:class:`~mm_handoff.reading.Limits` as the wire form:

0. every carried field is read once, strictly and bounded before it is converted: the ids by
   :func:`~mm_handoff.layout.tokens.readonly_ids` within ``limits.max_prompt_len`` (a broadcast view claiming
   millions of ids is refused from its shape); every column as plain ints, counted first (per item: at most
   ``limits.max_items``; per run: ``limits.max_runs``; the embed-mask prefix sum: exactly one value per id),
   each an int within what the prompt allows (``8.9`` rows, a ``"10"`` offset, a ``True`` item type, an
   infinite length or an id of ``2**70`` are refused by name, never truncated or converted);
1. the carried ``prompt_token_ids`` are parsed with **this side's** family spec: every item's pad runs
   (from the carried run columns, else the pad runs inside each item's span), its modality (the pad id
   its ids spell), its timestamps (as the ids spell them, :func:`mm_handoff.layout.derive_layout`), and its
   grid: the encoder's grids when mm-handoff's encoder hook carried them (``"mm_handoff.grids"`` in the
   first embedding handle), else the grid the runs spell (``t`` = the item's groups, ``h * w / merge^2`` =
   pads per group; only the product of ``h`` and ``w`` is known then, so nothing reads them apart: mRoPE
   ids held as values are checked by their shape only, as a handle's are);
2. every field upstream carried must equal what the parsed layout gives for it (positions, lengths, rows,
   runs, item types, the embed-mask prefix sum, ``encoder_token_lengths`` per item (its ``t * h * w``
   patches: rows times ``merge^2``), and no ``special_token_offsets``, which the Qwen families never
   register): a value that contradicts the ids it came with is refused, naming ``multimodal_layout.<field>``;
3. the layout then goes through the same accept step as mm-handoff's own
   (:func:`mm_handoff.checks.accept_layout`): handles vs rows, the mRoPE ids' length, the grids vs runs;
   and, where given, this request's own prompt (:func:`mm_handoff.checks.check_own_request`);
4. a video item of a family that stamps every temporal group must spell its timestamps: a video without
   them is what an encoder that predates the per-group layout sends (one pad run), refused as stale.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from ..adapters.base import typed_adapter
from ..checks import accept_layout, check_mrope_slice, check_own_request
from ..errors import GridMismatchError, HandoffError, LayoutError, typed_failures
from ..layout.tokens import readonly_ids
from ..reading import MAX_COUNT, plain_ints, plain_sequence, resolve_limits, sequence_len, shape_of, strict_int
from ._carrier import GRIDS_KEY, carried, embed_mask_cumsum, encoder_token_lengths

UPSTREAM_LAYOUT_FIELD = "multimodal_layout"
#: fields of ``DisaggPrefillMultimodalInputs`` compared one to one with the parsed layout's values
_COMPARED = ("multimodal_positions", "multimodal_lengths", "multimodal_embedding_lengths",
             "multimodal_item_run_cu_offsets", "multimodal_run_positions", "multimodal_run_lengths", "item_types")
#: the per-item columns upstream's dataclass requires (``List[int]``, no default)
_REQUIRED = ("multimodal_positions", "multimodal_lengths", "multimodal_embedding_lengths")
_RUN_COLUMNS = ("multimodal_item_run_cu_offsets", "multimodal_run_positions", "multimodal_run_lengths")
_STALE_HINT = ("an encoder that predates the per-group layout (one pad run per video, no timestamps); "
               "upgrade the encoder, or carry mm-handoff's layout")
_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _field(name: str) -> str:
    return f"{UPSTREAM_LAYOUT_FIELD}.{name}"


def _attribute(owner, name: str, request_id, field: str | None = None):
    """One carried field, read once (an attribute that fails when read is a typed error naming it)."""
    try:
        return getattr(owner, name, None)
    except Exception as exc:
        raise LayoutError(field or _field(name), "a readable field", type(exc).__name__,
                          request_id=request_id) from exc


def _count(value, name: str, request_id) -> int:
    """How many values a carried column holds, read without converting it: a list's or tuple's stored
    length, a 1-D array's or tensor's shape; anything else is refused by name."""
    if isinstance(value, (list, tuple)):
        return sequence_len(value)
    if hasattr(value, "shape") and hasattr(value, "tolist"):
        try:
            shape = shape_of(value, field=f"{_field(name)}.shape", request_id=request_id)
        except HandoffError:
            shape = None
        if shape is not None and len(shape) == 1:
            return shape[0]
        raise LayoutError(_field(name), "a list of ints, or a 1-D integer tensor",
                          f"shape {list(shape) if shape is not None else None}", request_id=request_id)
    raise LayoutError(_field(name), "a list of ints", type(value).__name__, request_id=request_id)


def _column(value, name: str, *, most: int, high: int, request_id) -> list | None:
    """A carried column as plain ints, strictly: None stays None; at most ``most`` values, counted before any
    is read; each an int in ``[0, high]`` (an integral float such as ``8.0`` is 8: JSON and torch hand those
    over; ``8.9``, ``"10"``, ``True``, ``inf`` and ``2**70`` are refused, never truncated or converted)."""
    if value is None:
        return None
    count = _count(value, name, request_id)
    if count > most:
        raise LayoutError(_field(name), f"at most {most} values (the limits, or what the prompt holds)", count,
                          request_id=request_id, hint="raise the limits for longer requests")
    try:
        values = list(plain_sequence(value)) if isinstance(value, (list, tuple)) else value.tolist()
    except Exception as exc:  # a tensor or an array whose conversion fails
        raise LayoutError(_field(name), "a list of ints", type(value).__name__, request_id=request_id) from exc
    if not isinstance(values, list) or len(values) != count:
        raise LayoutError(_field(name), f"{count} values (its shape)", type(values).__name__, request_id=request_id)
    if not values or plain_ints(values, 0, high):
        return values
    for i, v in enumerate(values):  # the first value that is not a plain int in range names itself
        try:
            n = strict_int(v)
        except (TypeError, ValueError, OverflowError) as exc:
            raise LayoutError(f"{_field(name)}[{i}]", "an int", v, request_id=request_id) from exc
        if not 0 <= n <= high:
            raise LayoutError(f"{_field(name)}[{i}]", f"an int in [0, {high}]", n, request_id=request_id)
        values[i] = n
    return values


@attrs.frozen
class _Carried:
    """The carried fields, each read once and strictly (see the module doc, step 0)."""

    ids: np.ndarray
    columns: dict
    special_token_offsets: list | None
    encoder_token_lengths: list | None
    cumsum: object


def _read(upstream, limits, request_id) -> _Carried:
    raw = _attribute(upstream, "prompt_token_ids", request_id)
    if raw is None:
        raise LayoutError(_field("prompt_token_ids"), "the encoder's expanded prompt", None, request_id=request_id)
    ids = readonly_ids(raw, _field("prompt_token_ids"), max_len=limits.max_prompt_len)
    n = int(ids.shape[0])
    if not n:
        raise LayoutError(_field("prompt_token_ids"), "the encoder's expanded prompt", "no ids", request_id=request_id)
    most_runs = min(limits.max_runs, n)
    bounds = {"multimodal_positions": (limits.max_items, n), "multimodal_lengths": (limits.max_items, n),
              "multimodal_embedding_lengths": (limits.max_items, n), "item_types": (limits.max_items, 1),
              "multimodal_run_positions": (most_runs, n), "multimodal_run_lengths": (most_runs, n),
              "multimodal_item_run_cu_offsets": (limits.max_items + 1, most_runs)}
    columns = {name: _column(_attribute(upstream, name, request_id), name, most=most, high=high,
                             request_id=request_id) for name, (most, high) in bounds.items()}
    for name in _REQUIRED:
        if columns[name] is None:
            raise LayoutError(_field(name), "one value per item (upstream's dataclass requires it)", None,
                              request_id=request_id)
    given = [name for name in _RUN_COLUMNS if columns[name] is not None]
    if given and len(given) != len(_RUN_COLUMNS):
        raise LayoutError(_field(given[0]), f"all of {list(_RUN_COLUMNS)} or none", f"only {given}",
                          request_id=request_id)
    special = _column(_attribute(upstream, "special_token_offsets", request_id), "special_token_offsets",
                      most=limits.max_items, high=n, request_id=request_id)
    lengths = _column(_attribute(upstream, "encoder_token_lengths", request_id), "encoder_token_lengths",
                      most=limits.max_items, high=MAX_COUNT, request_id=request_id)
    return _Carried(ids, columns, special, lengths, _attribute(upstream, "multimodal_embed_mask_cumsum", request_id))


def _item_runs(found: _Carried, spec, request_id) -> list:
    """``[(modality, offsets, lengths)]`` per item, from the carried run columns (else the pad runs in each
    item's span); the modality is the pad id the ids spell at the item's runs. Every value was read in
    ``[0, prompt length]``: nothing here can overflow."""
    ids, cols = found.ids, found.columns
    positions, lengths = cols["multimodal_positions"], cols["multimodal_lengths"]
    cu, run_pos, run_len = (cols[name] for name in _RUN_COLUMNS)
    n = int(ids.shape[0])
    per_item = []
    if cu is not None and run_pos is not None and run_len is not None:
        if len(run_pos) != len(run_len) or not cu or cu[0] != 0 or cu[-1] != len(run_pos) \
                or any(b < a for a, b in zip(cu, cu[1:], strict=False)):
            raise LayoutError(_field("multimodal_item_run_cu_offsets"),
                              f"offsets from 0 to {len(run_pos)} over the runs, non-decreasing", cu,
                              request_id=request_id)
        for a, b in zip(cu, cu[1:], strict=False):
            per_item.append((np.asarray(run_pos[a:b], np.int64), np.asarray(run_len[a:b], np.int64)))
    else:  # an older whole-request handoff without run columns: the pad runs inside each item's span
        if len(positions) != len(lengths):
            raise LayoutError(_field("multimodal_lengths"), f"{len(positions)} values (one per position)",
                              len(lengths), request_id=request_id)
        pads = np.isin(ids, [spec.image_pad, spec.video_pad])
        for i, (p, ln) in enumerate(zip(positions, lengths, strict=True)):
            if p + ln > n:
                raise LayoutError(_field(f"multimodal_positions[{i}]"), f"a span inside the {n}-token prompt",
                                  (p, p + ln), request_id=request_id)
            inside = pads[p:p + ln].astype(np.int8)
            edges = np.diff(np.concatenate(([0], inside, [0])))
            starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
            per_item.append((starts + p, ends - starts))
    out = []
    for i, (off, ln) in enumerate(per_item):
        if off.size == 0 or (ln < 1).any() or (off + ln > n).any():
            raise LayoutError(_field(f"items[{i}].runs"), f"at least one run, each inside the {n}-token prompt",
                              list(zip(off.tolist(), ln.tolist(), strict=True)), request_id=request_id)
        first = int(ids[int(off[0])])
        modality = "image" if first == spec.image_pad else "video" if first == spec.video_pad else None
        if modality is None:
            raise LayoutError(_field(f"items[{i}].runs[0]"), "a run of <|image_pad|> or <|video_pad|> ids",
                              f"id {first} at {int(off[0])}", request_id=request_id)
        out.append((modality, off, ln))
    return out


def _spelled_grid(modality: str, lengths: np.ndarray, merge: int, index: int, request_id) -> tuple:
    """The grid the runs spell: ``t`` groups of ``h * w / merge^2`` pads (h, w: a factorisation of that)."""
    per = int(lengths[0])
    if (lengths != per).any():
        raise LayoutError(_field(f"items[{index}].runs"), "groups of one length (one grid per item)",
                          lengths.tolist(), request_id=request_id)
    a = max(d for d in range(1, math.isqrt(per) + 1) if per % d == 0)
    t = int(lengths.shape[0]) if modality == "video" else 1
    if modality == "image" and lengths.shape[0] != 1:
        raise LayoutError(_field(f"items[{index}].runs"), "one run per image", int(lengths.shape[0]),
                          request_id=request_id)
    return (t, merge * a, merge * (per // a))


_CARRIED_GRIDS = "carried"


def _grids(found: dict, items: list, merge: int, request_id) -> tuple:
    grids = found.get(GRIDS_KEY)
    if isinstance(grids, dict):  # the encoder's own grids, carried by mm-handoff's encoder hook
        given = [grids.get("image_grid_thw"), grids.get("video_grid_thw")]
        return (*(None if g is None or (isinstance(g, list) and not g) else g for g in given), _CARRIED_GRIDS)
    image: list = []
    video: list = []
    for i, (modality, _, lengths) in enumerate(items):
        (image if modality == "image" else video).append(_spelled_grid(modality, lengths, merge, i, request_id))
    return image or None, video or None, "spelled by the runs"


def _read_layout(upstream, adapter, mm_handles, limits, request_id) -> tuple:
    """``(layout, where its grids come from)``: steps 0, 1, 2 and 4 of the module doc."""
    adapter = typed_adapter(adapter, request_id=request_id)
    spec = adapter.spec
    found = _read(upstream, limits, request_id)
    items = _item_runs(found, spec, request_id)
    image_grid, video_grid, source = _grids(carried(mm_handles), items, spec.merge_size, request_id)
    layout = adapter.derive_layout(found.ids, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=False,
                                   limits=limits, request_id=request_id)
    ours = layout.to_disagg_prefill_inputs()
    for name in _COMPARED:
        theirs = found.columns[name]
        if theirs is not None and ours.get(name) is not None and theirs != list(ours[name]):
            raise LayoutError(_field(name), f"{list(ours[name])[:16]} (what its prompt_token_ids spell)", theirs[:16],
                              request_id=request_id, hint="the carried layout contradicts its own ids")
    _check_optional(found, layout, request_id)
    _check_stamped(layout, spec, source, request_id)
    return layout, source


@typed_failures(UPSTREAM_LAYOUT_FIELD, LayoutError)
def read_upstream_layout(upstream, adapter, *, mm_handles=None, limits=None, request_id=None):
    """Upstream's carried ``DisaggPrefillMultimodalInputs`` as a :class:`~mm_handoff.layout.HandoffLayout`,
    read strictly within ``limits`` (:class:`~mm_handoff.reading.Limits`; None: the process default),
    parsed with this side's spec and compared field by field (steps 0, 1, 2 and 4 of the module doc)."""
    return _read_layout(upstream, adapter, mm_handles, resolve_limits(limits), request_id)[0]


def _check_optional(found: _Carried, layout, request_id) -> None:
    """The fields upstream's newer dataclass adds, and the special offsets: each what the ids give."""
    special = found.special_token_offsets
    if special:  # None or empty: none, as the ids give
        raise LayoutError(_field("special_token_offsets"), "none (the Qwen families register no multimodal "
                          "special token: the aggregated layout holds only pads)", special[:16],
                          request_id=request_id, hint="the stock prefill's vision_start-inclusive layout")
    theirs = found.encoder_token_lengths
    if theirs is not None and theirs != encoder_token_lengths(layout):
        raise LayoutError(_field("encoder_token_lengths"), f"{encoder_token_lengths(layout)[:16]} (per item its "
                          "t*h*w patches: its rows times merge^2)", theirs[:16], request_id=request_id,
                          hint="the carried layout contradicts its own ids")
    if found.cumsum is not None:
        _check_cumsum(found.cumsum, layout, request_id)


def _check_cumsum(cumsum, layout, request_id) -> None:
    """The embed-mask prefix sum: one integer per id (counted before it is read), each what the ids give."""
    field = _field("multimodal_embed_mask_cumsum")
    n = layout.prompt_len
    expected = f"the prefix sum of the prompt's pad mask ({n} integers)"
    count = _count(cumsum, "multimodal_embed_mask_cumsum", request_id)
    if count != n:
        raise LayoutError(field, expected, f"{count} values", request_id=request_id)
    got: np.ndarray
    if isinstance(cumsum, (list, tuple)):
        values = _column(cumsum, "multimodal_embed_mask_cumsum", most=n, high=MAX_COUNT, request_id=request_id)
        got = np.asarray(values, dtype=np.int64)
    else:
        dtype = str(getattr(cumsum, "dtype", ""))
        if not dtype.endswith(_INT_DTYPES):
            raise LayoutError(field, expected, f"dtype {dtype}", request_id=request_id)
        try:
            got = np.asarray(cumsum.detach().cpu().numpy() if hasattr(cumsum, "detach") else cumsum).reshape(-1)
        except Exception as exc:
            raise LayoutError(field, expected, type(cumsum).__name__, request_id=request_id) from exc
    ours = embed_mask_cumsum(layout).numpy()
    if got.shape != ours.shape or not np.array_equal(got, ours):
        bad = int(np.flatnonzero(got != ours)[0]) if got.shape == ours.shape else None
        raise LayoutError(field, expected, f"shape {got.shape}" if bad is None else f"{int(got[bad])} at {bad}",
                          request_id=request_id)


def _check_stamped(layout, spec, source: str, request_id) -> None:
    """A family that stamps every group: each video spells its timestamps, else it is a stale encoder's."""
    if spec.timestamps is None:
        return
    for i, item in enumerate(layout.items):
        if item.modality == "video" and item.seconds is None:
            raise GridMismatchError(_field(f"items[{i}].timestamps"),
                                    "a <t seconds> text before every temporal group (this family prints them)",
                                    f"no timestamps, {item.run_offsets.shape[0]} run(s) (grid {source})",
                                    request_id=request_id, hint=_STALE_HINT)


@typed_failures(UPSTREAM_LAYOUT_FIELD, LayoutError)
def check_upstream_layout(upstream, adapter, *, disaggregated_params=None, prompt_token_ids=None,
                          own_prompt_ids=None, mrope_position_ids=None, limits=None, request_id=None):
    """Steps 0-4: refuse a carried layout that contradicts itself or this request; return it parsed.

    ``prompt_token_ids``: what upstream's ``_preprocess`` will run (must be the carried ids);
    ``own_prompt_ids``: this request's own prompt (its text tokenized), which the carried ids must expand
    (:func:`mm_handoff.checks.check_own_request`; admission runs it apart, under every policy).
    ``limits``: this request's bounds (:class:`~mm_handoff.reading.Limits`; None: the process default).
    """
    limits = resolve_limits(limits)
    handles = _attribute(disaggregated_params, "multimodal_embedding_handles", request_id,
                         "disaggregated_params.multimodal_embedding_handles")
    layout, source = _read_layout(upstream, adapter, handles, limits, request_id)
    if prompt_token_ids is not None:
        ran = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=limits.max_prompt_len)
        if ran.shape != layout.token_ids.shape or not np.array_equal(ran, layout.token_ids):
            raise LayoutError("prompt_token_ids", f"the carried {_field('prompt_token_ids')} ({layout.prompt_len} ids)",
                              f"{ran.shape[0]} other ids", request_id=request_id)
    if mrope_position_ids is None:
        mrope_position_ids = _attribute(disaggregated_params, "mrope_position_ids_handle", request_id,
                                        "disaggregated_params.mrope_position_ids_handle")
    if mrope_position_ids is not None:
        check_mrope_slice(mrope_position_ids, layout.prompt_len, request_id=request_id)
        if source != _CARRIED_GRIDS:  # h and w are not known apart: the values cannot be computed, their shape is
            mrope_position_ids = shape_of(mrope_position_ids, request_id=request_id)
    layout = accept_layout(layout, adapter, embeddings=handles if isinstance(handles, list) and handles else None,
                           mrope_position_ids=mrope_position_ids, limits=limits, request_id=request_id)
    if own_prompt_ids is not None:
        check_own_request(layout, adapter, prompt_token_ids=own_prompt_ids, limits=limits, request_id=request_id)
    return layout
