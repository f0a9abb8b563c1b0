"""The shared validator: the single source of every handoff check point.

Pure functions. The TensorRT-LLM glue, the HF reference engine, the CLI and the tests all call
these, so a rule changes in one place. Each failure is a typed :class:`HandoffError` naming the
request, the field, the expected and the actual value, plus the likely cause.
"""

from __future__ import annotations

import numpy as np

from .errors import (
    EmbeddingCountError,
    FingerprintMismatchError,
    GridMismatchError,
    MropeLengthError,
    SkewError,
    TokenMismatchError,
)
from .items import VIDEO
from .layout import HandoffLayout, readonly_ids
from .spec import TokenSpec

__all__ = ["validate", "check_mrope_slice", "shape_of", "check_grid", "check_embedding_rows", "check_token_ids",
           "first_difference", "check_skew"]

_STOCK_HINT = ("the prefill side likely rebuilt the prompt from text (one pad run per item, no timestamps); "
               "ship the encoder's layout or rebuild it with the family adapter")


#: the largest count (a length, an index, a row count) any check reads: far beyond any prompt
_MAX_COUNT = 2**62


def _plain_count(value):
    """A plain int in ``[0, 2**62]`` for ints and numpy ints (read without calling methods an int
    subclass overrides); None for anything else."""
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        value = int.__index__(value)
    elif isinstance(value, np.integer):
        value = int(value)
    else:
        return None
    return value if 0 <= value <= _MAX_COUNT else None


def _count(value, field: str, request_id, error=MropeLengthError) -> int:
    count = _plain_count(value)
    if count is None:
        raise error(field, "a non-negative int", value, request_id=request_id)
    return count


def shape_of(value, *, field: str = "mrope_position_ids.shape", request_id=None) -> tuple:
    """The shape of an array/tensor, a shape sequence, or a handle dict's ``tensor_size``, as ints.

    Anything else (floats, strings, bytes, negative sizes, a handle without ``tensor_size``) raises
    a :class:`MropeLengthError` naming ``field``.
    """
    try:
        if isinstance(value, dict):
            value = dict.get(value, "tensor_size")  # dict's own get: a subclass's cannot interfere
        shape = getattr(value, "shape", None)
        if shape is None:
            shape = value
        dims = tuple(shape) if isinstance(shape, (list, tuple)) and len(shape) <= 8 else None  # torch.Size: a tuple
    except Exception:  # an object whose attributes or iteration fail
        dims = shape = None
    counts = None if dims is None else [_plain_count(d) for d in dims]
    if counts is None or None in counts:
        raise MropeLengthError(field, "a shape of non-negative ints", shape if dims is None else dims,
                               request_id=request_id)
    return tuple(counts)


def check_mrope_slice(mrope_position_ids_or_shape, prompt_len: int, *, begin: int = 0,
                      end: int | None = None, request_id=None) -> int:
    """Check that mRoPE ids cover the prompt exactly before ``[:, :, begin:end]`` is taken.

    Accepts an array/tensor or its shape, ``[3, L]`` or ``[3, 1, L]`` (what the context-phase slice
    in TensorRT-LLM sees). Returns L. Shapes only: no copy, no device sync.
    """
    prompt_len = _count(prompt_len, "prompt_len", request_id)
    begin = _count(begin, "begin", request_id)
    end = None if end is None else _count(end, "end", request_id)
    shape = shape_of(mrope_position_ids_or_shape, request_id=request_id)
    if not (len(shape) == 2 and shape[0] == 3) and not (len(shape) == 3 and shape[:2] == (3, 1)):
        raise MropeLengthError("mrope_position_ids.shape", "[3, L] or [3, 1, L]", list(shape),
                               request_id=request_id)
    length = shape[-1]
    if length != prompt_len:
        raise MropeLengthError("mrope_position_ids.shape[-1]", f"prompt length {prompt_len}", length,
                               request_id=request_id,
                               hint=(_STOCK_HINT if length > prompt_len else
                                     "the mRoPE ids were computed for a shorter prompt"))
    stop = prompt_len if end is None else end
    if not (0 <= begin <= stop <= length):
        raise MropeLengthError("mrope slice", f"0 <= begin <= end <= {length}", (begin, stop),
                               request_id=request_id)
    return length


def check_grid(layout: HandoffLayout, *, request_id=None) -> None:
    """Runs follow the grid: video groups == t and pads per group == h*w/merge^2; images one run."""
    m2 = layout.spec.merge_size ** 2
    for i, item in enumerate(layout.items):
        t, h, w = item.grid_thw
        runs = item.run_offsets.shape[0]
        if item.modality == VIDEO:
            if runs != t:
                raise GridMismatchError(f"items[{i}].runs", f"{t} runs for grid {item.grid_thw}", runs,
                                        request_id=request_id, hint=_STOCK_HINT)
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


def check_embedding_rows(layout: HandoffLayout, embedding_rows, *, request_id=None) -> None:
    """Pads vs the encoder's rows: a total, or one count per item in prompt order."""
    def as_count(value):
        return _count(value, "embedding_rows", request_id, EmbeddingCountError)

    if not isinstance(embedding_rows, (list, tuple, np.ndarray)):
        rows = as_count(embedding_rows)
        if rows != layout.num_pads:
            raise EmbeddingCountError("embedding_rows", f"{layout.num_pads} (pads in the prompt)", rows,
                                      request_id=request_id)
        return
    rows = [as_count(r) for r in embedding_rows]
    expected = layout.multimodal_embedding_lengths
    if rows != expected:
        raise EmbeddingCountError("embedding_rows", f"{expected} (pads per item)", rows, request_id=request_id)


def first_difference(expected_ids, actual_ids, *, field: str = "token_ids") -> int | None:
    """The first index where two id sequences differ (the shorter length if one is a prefix); None if equal."""
    a = readonly_ids(expected_ids, field)
    b = readonly_ids(actual_ids, field)
    if a.shape == b.shape and np.array_equal(a, b):
        return None
    n = min(a.shape[0], b.shape[0])
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def check_token_ids(expected_ids, actual_ids, *, request_id=None, field: str = "prompt_token_ids",
                    context: int = 3) -> None:
    """Token ids equal; otherwise name the first differing index and the tokens around it."""
    a = readonly_ids(expected_ids, field)
    b = readonly_ids(actual_ids, field)
    index = first_difference(a, b, field=field)
    if index is None:
        return
    lo = max(0, index - context)
    raise TokenMismatchError(f"{field} (length)" if a.shape != b.shape else field,
                             f"{a.shape[0]} ids", f"{b.shape[0]} ids", index=index,
                             expected_context=a[lo:index + context + 1].tolist(),
                             actual_context=b[lo:index + context + 1].tolist(),
                             request_id=request_id,
                             hint=_STOCK_HINT if a.shape[0] > b.shape[0] else None)


def validate(layout: HandoffLayout, *, prompt_token_ids=None, mrope_position_ids=None,
             embedding_rows=None, fingerprint: str | None = None, request_id=None) -> HandoffLayout:
    """Check a layout against what the prefill side is about to use; return it unchanged.

    Order: mRoPE length (the silent-slice bug), pads vs embedding rows, runs vs grid, fingerprint,
    token ids. The first failure raises.
    """
    if mrope_position_ids is not None:
        check_mrope_slice(mrope_position_ids, layout.prompt_len, request_id=request_id)
    if prompt_token_ids is not None:
        prompt_token_ids = readonly_ids(prompt_token_ids, "prompt_token_ids")
    if prompt_token_ids is not None and len(prompt_token_ids) != layout.prompt_len and mrope_position_ids is None:
        if layout.mrope_position_ids is not None:
            check_mrope_slice(layout.mrope_position_ids, len(prompt_token_ids), request_id=request_id)
    if embedding_rows is not None:
        check_embedding_rows(layout, embedding_rows, request_id=request_id)
    check_grid(layout, request_id=request_id)
    if fingerprint is not None:
        actual = layout.fingerprint(include_mrope=False)
        if fingerprint != actual:
            raise FingerprintMismatchError("fingerprint", fingerprint, actual, request_id=request_id,
                                           hint="the prefill layout is not the one the encoder described")
    if prompt_token_ids is not None:
        check_token_ids(layout.token_ids, prompt_token_ids, request_id=request_id)
    return layout


def check_skew(layout: HandoffLayout, *, family: str, convention: str, tokenizer_digest: str | None,
               spec: TokenSpec | None = None, request_id=None) -> None:
    """Encoder (the layout) and prefill (its adapter) agree on family, tokenizer, spec and convention.

    ``spec``: this side's; the carried spec must equal it field by field (a layout is only ever read
    with this side's ids and sizes). ``tokenizer_digest``: this side's; when it is given the layout
    must carry the same one (a layout without one is a skew too). The message says what each side
    has, so a version skew between the two deployments is obvious.
    """
    if layout.family != family and not _aliases(layout.family, family):
        raise SkewError("family", f"{family} (prefill)", f"{layout.family} (encoder)", request_id=request_id,
                        hint="encoder and prefill serve different model families")
    if spec is not None and layout.spec != spec:
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


_ALIASES = ({"cosmos3", "cosmos3_omni"},)


def _aliases(a: str, b: str) -> bool:
    return any(a in group and b in group for group in _ALIASES)
