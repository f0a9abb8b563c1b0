"""PD side: what SGLang's ``get_validated_mm_data`` produced, checked against the carried layout.

SGLang's EPD prefill side (``--language-only``) rebuilds the prompt from the request's prompt, the
encoder's grids and, for the Qwen3-family model types, the encoder's ``video_timestamps``
(``QwenVLImageProcessor.get_mm_data``, SGLang 0.5.23 ``srt/multimodal/processors/qwen_vl.py``):
``<t seconds>`` + ``<|vision_start|>`` + pads + ``<|vision_end|>`` per temporal group, one multimodal
item per pad run, and the mRoPE ids computed locally. Its own check (``_validate_precomputed_embedding_layout``
in ``base_processor.py``) compares embedding rows with the item offsets only.

* :func:`check_mm_output`: with a carried layout, the shared accept step
  (:func:`mm_handoff.accept_layout`: skew of family / spec / tokenizer / convention, grids, the mRoPE
  delta, this request's grids and embedding rows), then SGLang's ids, its items' offsets (one per pad
  run, in order, with their modality), its mRoPE ids and its delta against the layout's.
* :func:`check_own_inputs`: that a carried (and accepted) layout is this request's at all: SGLang's own
  inputs (the prompt, its grids, its per-video timestamps) give it. A layout that is another request's is
  refused under every policy (:mod:`mm_handoff.glue.policy`), never answered with.
* :func:`check_stamped`: without a layout, a family that stamps every group must have one timestamp
  per temporal group; without them SGLang builds one pad run per video (#20138's layout), silently.
* :func:`check_derived`: without a layout but with this side's adapter, SGLang's ids must be a valid
  layout of the family for the request's grids, and its offsets and mRoPE ids must be that layout's.
* :func:`engine_inputs`: the carried layout turned into what SGLang's scheduler takes (ids, the items'
  offsets, mRoPE ids and delta): the ``rebuild`` remedy, and mm-handoff's PD-side work in the benchmark.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs
import numpy as np

from ..adapters.base import typed_adapter
from ..adapters.timestamps import format_timestamp
from ..checks import accept_layout, check_own_request
from ..errors import EmbeddingCountError, GridMismatchError, HandoffError, MropeLengthError, typed_failures
from ..layout import HandoffLayout
from ..layout.items import VIDEO
from ..layout.spec import normalize_grids
from ..layout.tokens import check_token_ids, readonly_ids
from ..reading import plain_sequence, resolve_limits, sequence_len, shape_of, strict_int

#: the model types whose ``get_mm_data`` stamps every temporal group when ``video_timestamps`` is given
#: (SGLang 0.5.23, ``QwenVLImageProcessor.get_mm_data``); its encoder sends them for all but ``qwen4_exp``
STAMPING_MODEL_TYPES = frozenset({"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen4_exp",
                                  "intern_s2_preview", "cosmos3_omni"})

_IDS_FIELD = "input_ids after SGLang's get_mm_data"
_FALLBACK_HINT = ("without video_timestamps SGLang builds one pad run per video (#20138's layout) and its own "
                  "check passes: the encoder's video loader gave no video_metadata, or its model type is not on "
                  "the encoder's list")


def modality_name(value) -> str:
    """``Modality.VIDEO`` -> ``"video"`` (SGLang's enum) or a plain string."""
    name = getattr(value, "name", value)
    return str(name).lower()


def grids_of(value, field: str, merge_size: int, request_id=None, *, limits=None) -> list:
    """SGLang's grid tensor (``[n, 3]``) or list as a list of ``(t, h, w)``; ``[]`` for none (bounded by
    ``limits`` before it is read)."""
    try:
        return normalize_grids(value, field, merge_size=merge_size, limits=limits)
    except HandoffError as exc:
        raise exc.with_request(request_id) from None


@typed_failures("mm_items offsets")
def output_runs(output, *, most: int | None = None) -> list:
    """``[(modality, start, end_exclusive), ...]``: SGLang's items' offsets (inclusive ends, plain ints: never
    truncated) in order; at most ``most`` of them (the rest is not read)."""
    runs: list = []
    for k, item in enumerate(itertools.islice(output.mm_items, most)):
        offsets = item.offsets if item.offsets is not None else ()
        for start, end in itertools.islice(offsets, None if most is None else most - len(runs)):
            try:
                start, end = strict_int(start), strict_int(end)
            except (TypeError, ValueError, OverflowError) as exc:
                raise GridMismatchError(f"mm_items[{k}].offsets", "(start, end) ints", (start, end)) from exc
            runs.append((modality_name(item.modality), start, end + 1))
        if most is not None and len(runs) >= most:
            break
    return runs


def _layout_runs(layout: HandoffLayout) -> list:
    """``[(modality, (start, end_inclusive)), ...]``: the layout's pad runs in order, as SGLang's items hold
    them."""
    runs: list = []
    for item in layout.items:
        m = item.modality
        runs += [(m, (s, s + n - 1)) for s, n in zip(item.run_offsets.tolist(), item.run_lengths.tolist(), strict=True)]
    return runs


@attrs.frozen(eq=False)
class EngineInputs:
    """What SGLang's scheduler takes for one request, built from a layout."""

    #: the expanded ids (a Python list, as SGLang keeps them)
    input_ids: list
    #: one ``(modality, (start, end_inclusive))`` per pad run, in prompt order (SGLang's items)
    runs: list
    #: ``[3, len]`` int64 mRoPE ids
    mrope_positions: np.ndarray
    mrope_position_delta: int


@typed_failures("layout")
def engine_inputs(layout: HandoffLayout, adapter, *, limits=None, request_id=None) -> EngineInputs:
    """The layout's ids, pad runs (SGLang's item offsets) and mRoPE ids, computed by this side's adapter
    (with the bounds the layout was accepted under, ``limits``)."""
    positions, delta = typed_adapter(adapter, request_id=request_id).layout_mrope_positions(
        layout, limits=limits, request_id=request_id)
    return EngineInputs(layout.token_id_list(), _layout_runs(layout), np.asarray(positions), int(delta))


@typed_failures("video_timestamps")
def check_stamped(model_type: str, video_grid_thw, video_timestamps, *, merge_size: int = 2, limits=None,
                  request_id=None) -> None:
    """A model type that stamps every group got one timestamp per temporal group for every video."""
    if model_type not in STAMPING_MODEL_TYPES:
        return
    grids = grids_of(video_grid_thw, "video_grid_thw", merge_size, request_id, limits=limits)
    if not grids:
        return
    if video_timestamps is None:
        raise GridMismatchError("video_timestamps", f"one per temporal group ({[g[0] for g in grids]})", None,
                                request_id=request_id, hint=_FALLBACK_HINT)
    if not isinstance(video_timestamps, (list, tuple)) or sequence_len(video_timestamps) != len(grids):
        raise GridMismatchError("video_timestamps", f"a list of {len(grids)} (one per video)",
                                sequence_len(video_timestamps) if isinstance(video_timestamps, (list, tuple))
                                else type(video_timestamps).__name__, request_id=request_id)
    counts = [_count_of(s) for s in plain_sequence(video_timestamps)]
    if counts != [g[0] for g in grids]:
        raise GridMismatchError("video_timestamps", f"{[g[0] for g in grids]} (one per temporal group, per video)",
                                counts, request_id=request_id,
                                hint="SGLang reads one per group and ignores extras; a missing one is an IndexError")


def _count_of(values) -> int | None:
    """How many values a list, a tuple or a 1-D array or tensor holds, without reading them; None otherwise."""
    if isinstance(values, (list, tuple)):
        return sequence_len(values)
    shape = getattr(values, "shape", None)
    return int(shape[0]) if isinstance(shape, tuple) and len(shape) == 1 else None


def _check_runs(expected: list, output, request_id) -> None:
    actual = output_runs(output, most=len(expected) + 1)  # one more tells that there are more
    if actual == expected:
        return
    k = next((i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
             min(len(expected), len(actual)))
    count = f"more than {len(expected)}" if len(actual) > len(expected) else f"{len(actual)}"
    raise GridMismatchError(f"mm_items offsets (run {k})" if len(actual) == len(expected) else "mm_items offsets",
                            f"{len(expected)} runs; run {k}: {expected[k] if k < len(expected) else None}",
                            f"{count} runs; run {k}: {actual[k] if k < len(actual) else None}",
                            request_id=request_id, hint="SGLang's items do not sit on the layout's pad runs")


def _check_mrope(positions: np.ndarray, delta: int, output, request_id) -> None:
    got = output.mrope_positions
    if got is None:
        raise MropeLengthError("mrope_positions", f"{list(positions.shape)} ids", None, request_id=request_id)
    shape = shape_of(getattr(got, "shape", None), field="mrope_positions.shape", request_id=request_id)
    if shape != positions.shape:  # before anything is copied
        raise MropeLengthError("mrope_positions", f"shape {list(positions.shape)}", f"shape {list(shape)}",
                               request_id=request_id)
    got = np.asarray(got.cpu().numpy() if hasattr(got, "cpu") else got)
    bad = np.flatnonzero((got != positions).any(axis=0))
    if bad.size:
        i = int(bad[0])
        raise GridMismatchError(f"mrope_positions[:, {i}]", positions[:, i].tolist(), got[:, i].tolist(),
                                request_id=request_id, hint="SGLang's mRoPE ids differ from the layout's")
    own = _delta_of(output.mrope_position_delta, request_id)
    if own != delta:
        raise GridMismatchError("mrope_position_delta", delta, own, request_id=request_id)


def _delta_of(value, request_id) -> int:
    """SGLang's delta: an int, or a one-value integer tensor or array (``[[delta]]``), read exactly (a float,
    a string, a second value or a wider tensor is refused, never truncated or copied)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__index__(value)  # an int subclass's own __int__ is not asked
    if isinstance(value, np.integer):
        return int(value)
    if value is None or not hasattr(value, "shape"):
        raise MropeLengthError("mrope_position_delta", "an int or a one-value integer tensor",
                               type(value).__name__, request_id=request_id)
    shape = shape_of(value, field="mrope_position_delta.shape", request_id=request_id)
    dtype = str(getattr(value, "dtype", ""))
    if math.prod(shape) != 1 or not any(k in dtype for k in ("int8", "int16", "int32", "int64")):
        raise MropeLengthError("mrope_position_delta", "one integer value", f"shape {list(shape)}, dtype {dtype}",
                               request_id=request_id)
    return int(value.reshape(-1)[0])


def _embedding_rows(embeddings, request_id) -> dict:
    rows = {}
    for modality, tensor in (embeddings or {}).items():
        field = f"embeddings[{modality_name(modality)}].shape"
        try:
            shape = shape_of(getattr(tensor, "shape", None), field=field, request_id=request_id)
        except MropeLengthError as exc:  # (shape_of's class is the mRoPE one's)
            raise EmbeddingCountError(field, "[rows, width]", exc.actual, request_id=request_id) from None
        if len(shape) != 2:
            raise EmbeddingCountError(field, "[rows, width]", list(shape), request_id=request_id)
        rows[modality_name(modality)] = shape[0]  # a plain int: read strictly
    return rows


def check_embedding_rows_per_modality(layout: HandoffLayout, embeddings, request_id) -> None:
    """Per modality, the rows SGLang received equal the layout's pads of that modality."""
    if embeddings is None:
        return
    got = _embedding_rows(embeddings, request_id)
    want: dict[str, int] = {}
    for item in layout.items:
        want[item.modality] = want.get(item.modality, 0) + item.embedding_length
    if got != want:
        raise EmbeddingCountError("embeddings (rows per modality)", f"{want} (pads per modality)", got,
                                  request_id=request_id)


@typed_failures("get_validated_mm_data inputs")
def check_own_inputs(layout: HandoffLayout, adapter, *, prompt=None, img_grid_thw=None, video_grid_thw=None,
                     video_timestamps=None, limits=None, request_id=None) -> HandoffLayout:
    """That an accepted layout is this request's: SGLang's own inputs to ``get_validated_mm_data`` give it,
    each where given: its grids, its prompt (ids, expanded or not: :func:`mm_handoff.checks.check_own_request`)
    and, per video, its first ``t`` timestamps as SGLang prints them (``<t seconds>``, one per temporal
    group: the same clip at another frame rate is another request's). Returns the layout.

    Its failure is refused under every policy (:mod:`mm_handoff.glue.policy`): the hook never answers a
    request with, nor passes it on beside, a layout that is not its own. ``limits``: this request's bounds
    (:class:`~mm_handoff.reading.Limits`; None: the process default).
    """
    check_own_request(layout, adapter, prompt_token_ids=prompt, image_grid_thw=img_grid_thw,
                      video_grid_thw=video_grid_thw, limits=limits, request_id=request_id)
    if video_timestamps is None:
        return layout
    videos = [(k, item) for k, item in enumerate(layout.items) if item.modality == VIDEO]
    if not isinstance(video_timestamps, (list, tuple)) or sequence_len(video_timestamps) != len(videos):
        raise GridMismatchError("video_timestamps", f"a list of {len(videos)} (one per video of the layout)",
                                sequence_len(video_timestamps) if isinstance(video_timestamps, (list, tuple))
                                else type(video_timestamps).__name__, request_id=request_id)
    for j, ((k, item), given) in enumerate(zip(videos, plain_sequence(video_timestamps), strict=True)):
        printed = [float(format_timestamp(s)[1:-len(" seconds>")])
                   for s in _first_seconds(given, item.grid_thw[0], f"video_timestamps[{j}]", request_id)]
        if item.timestamps is None or list(item.timestamps) != printed:
            raise GridMismatchError(f"items[{k}].timestamps", f"{printed} (this request's video_timestamps[{j}], "
                                    "as SGLang prints them)", item.timestamps, request_id=request_id,
                                    hint="the carried layout is another request's: other frames or frame rate")
    return layout


def _first_seconds(values, t: int, field: str, request_id) -> list:
    """The first ``t`` of one video's timestamps (a list, a tuple or a 1-D array or tensor, counted before it
    is read; SGLang reads one per group and ignores extras), each a finite number of seconds >= 0."""
    count = _count_of(values)
    if count is None or count < t:
        raise GridMismatchError(field, f"at least {t} timestamps (one per temporal group)",
                                type(values).__name__ if count is None else count, request_id=request_id)
    head = plain_sequence(values)[:t] if isinstance(values, (list, tuple)) else values[:t].tolist()
    out = []
    for g, v in enumerate(head):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(v) or v < 0:
            raise GridMismatchError(f"{field}[{g}]", "seconds (a finite number >= 0)", v, request_id=request_id)
        out.append(float(v))
    return out


@typed_failures("sglang output")
def check_mm_output(output, carried: Any, adapter, *, embeddings=None, img_grid_thw=None, video_grid_thw=None,
                    prompt=None, video_timestamps=None, limits=None, request_id=None,
                    inputs: EngineInputs | None = None) -> HandoffLayout:
    """SGLang's ``MultimodalProcessorOutput`` equals the carried layout (a layout or its wire form).

    The accept step first (this request's grids); that the layout is this request's (its ``prompt`` and
    ``video_timestamps``, where given: :func:`check_own_inputs`); the embedding rows per modality; then the
    ids, the items' offsets, the mRoPE ids and delta. ``inputs``: :func:`engine_inputs` when already
    computed. ``limits``: this request's bounds (:class:`~mm_handoff.reading.Limits`; None: the process
    default). Returns the layout.
    """
    layout = accept_layout(carried, adapter, image_grid_thw=img_grid_thw, video_grid_thw=video_grid_thw,
                           limits=limits, request_id=request_id)
    if prompt is not None or video_timestamps is not None:
        check_own_inputs(layout, adapter, prompt=prompt, video_timestamps=video_timestamps, limits=limits,
                         request_id=request_id)
    return compare_output(output, layout, adapter, embeddings=embeddings, limits=limits, request_id=request_id,
                          inputs=inputs)


@typed_failures("sglang output")
def compare_output(output, layout: HandoffLayout, adapter, *, embeddings=None, limits=None, request_id=None,
                   inputs: EngineInputs | None = None) -> HandoffLayout:
    """The part of :func:`check_mm_output` after the accept step: the embedding rows per modality, SGLang's
    ids, its items' offsets, its mRoPE ids and delta against an accepted layout's. Returns the layout."""
    check_embedding_rows_per_modality(layout, embeddings, request_id)
    check_token_ids(layout.token_ids, output.input_ids, request_id=request_id, field=_IDS_FIELD, limits=limits)
    inputs = inputs or engine_inputs(layout, adapter, limits=limits, request_id=request_id)
    _check_runs([(m, s, e + 1) for m, (s, e) in inputs.runs], output, request_id)
    _check_mrope(inputs.mrope_positions, inputs.mrope_position_delta, output, request_id)
    return layout


@typed_failures("sglang output")
def check_derived(output, adapter, *, img_grid_thw=None, video_grid_thw=None, limits=None,
                  request_id=None) -> HandoffLayout:
    """Without a carried layout: SGLang's ids are a valid layout of this side's family for the request's
    grids (every group stamped and framed), and its offsets and mRoPE ids are that layout's. ``limits``:
    this request's bounds (None: the process default), checked before anything is read."""
    typed = typed_adapter(adapter, request_id=request_id)
    merge = typed.spec.merge_size
    images = grids_of(img_grid_thw, "img_grid_thw", merge, request_id, limits=limits) or None
    videos = grids_of(video_grid_thw, "video_grid_thw", merge, request_id, limits=limits) or None
    ids = readonly_ids(output.input_ids, _IDS_FIELD, max_len=resolve_limits(limits).max_prompt_len)
    layout = typed.derive_layout(ids, image_grid_thw=images, video_grid_thw=videos, mrope=False, limits=limits,
                                 request_id=request_id)
    inputs = engine_inputs(layout, adapter, limits=limits, request_id=request_id)
    _check_runs([(m, s, e + 1) for m, (s, e) in inputs.runs], output, request_id)
    _check_mrope(inputs.mrope_positions, inputs.mrope_position_delta, output, request_id)
    return layout
