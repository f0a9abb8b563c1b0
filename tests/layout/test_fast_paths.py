"""The fast paths for few runs compute what the general (vectorised) paths compute: the same acceptance,
the same values, the same refusal, on inputs drawn well beyond the honest shapes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm_handoff.errors import LayoutError, WireFormatError
from mm_handoff.layout import invariants, wire
from mm_handoff.layout.spec import TokenSpec
from mm_handoff.layout.tokens import frozen, read_only, run_length_form

SPEC = TokenSpec(image_pad=5, video_pad=6, vision_start=3, vision_end=4)


@st.composite
def ids_and_runs(draw):
    """Ids of text, image and video pads, and run columns that mostly follow the pads (split, joined, shifted,
    of the wrong modality, overlapping, past the end, unsorted: each drawn now and then)."""
    ids = draw(st.lists(st.sampled_from([1, 3, 4, 5, 5, 6, 6]), min_size=1, max_size=40))
    arr = np.asarray(ids, dtype=np.int32)
    values, counts = run_length_form(arr)
    runs, at = [], 0
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        if v in (5, 6):
            kind = int(v == 6)
            if c > 1 and draw(st.booleans()):  # split into two touching runs of one modality
                cut = draw(st.integers(1, c - 1))
                runs += [[at, cut, kind], [at + cut, c - cut, kind]]
            else:
                runs.append([at, c, kind])
        at += c
    for _ in range(draw(st.integers(0, 2))):  # a lie
        if not runs:
            break
        k = draw(st.integers(0, len(runs) - 1))
        what = draw(st.sampled_from(["offset", "length", "kind", "drop", "swap"]))
        if what == "offset":
            runs[k][0] = max(0, runs[k][0] + draw(st.sampled_from([-1, 1, 2])))
        elif what == "length":
            runs[k][1] = max(1, runs[k][1] + draw(st.sampled_from([-1, 1, 5])))
        elif what == "kind":
            runs[k][2] = 1 - runs[k][2]
        elif what == "drop":
            runs.pop(k)
        elif len(runs) > 1:
            runs[0], runs[-1] = runs[-1], runs[0]
    cols = np.asarray(runs, dtype=np.int64).reshape(-1, 3)
    columns = (read_only(cols[:, 0].copy()), read_only(cols[:, 1].copy()), read_only(cols[:, 2].astype(np.int8)), None)
    return read_only(arr), (values, counts), columns


def _outcome(ids, rle, columns):
    try:
        invariants.check_runs_and_pads(ids, rle, columns, SPEC)
    except LayoutError as exc:
        return exc.field, exc.expected
    return None


@settings(max_examples=500)
@given(ids_and_runs())
def test_runs_against_pads_on_lists_equal_the_vectorised_check(case):
    ids, rle, columns = case
    fast = _outcome(ids, rle, columns)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(invariants, "FEW_RUNS", -1)  # the vectorised path for every size
        general = _outcome(ids, rle, columns)
    assert fast == general


# ----------------------------------------------------------------------------- the wire's columns
@st.composite
def payloads(draw):
    """Wire payloads whose blob holds any values: negative ids, counts below one, repeated neighbours, a
    declared length the counts do not sum to, runs and timestamps of any size."""
    n_rle = draw(st.integers(1, 12))
    values = draw(st.lists(st.integers(-2, 9), min_size=n_rle, max_size=n_rle))
    counts = draw(st.lists(st.integers(-1, 5), min_size=n_rle, max_size=n_rle))
    n_runs = draw(st.integers(0, 6))
    offsets = sorted(draw(st.lists(st.integers(0, 60), min_size=n_runs, max_size=n_runs)))
    lengths = draw(st.lists(st.integers(1, 9), min_size=n_runs, max_size=n_runs))
    stamped = draw(st.booleans()) and n_runs > 0
    seconds = [0.5 * g for g in range(n_runs)] if stamped else []
    spans = [(o - 3, o - 1) for o in offsets] if stamped else np.zeros((0, 2), dtype=np.int64)
    heads = (("video", (n_runs, 2, 2), n_runs, stamped),) if n_runs else ()
    content = wire.WireContent(family="qwen3_vl", convention="pad_only", tokenizer_digest=None, spec=SPEC,
                               values=values, counts=counts, heads=heads, offsets=offsets, lengths=lengths,
                               seconds=seconds, spans=spans, mrope_position_delta=None, checksum="")
    payload = wire.encode(content, checksum=wire.checksum(content))
    if draw(st.booleans()):
        payload["length"] = max(n_rle, payload["length"] + draw(st.integers(-2, 2)))
    return payload


def _decoded(payload):
    try:
        c = wire.decode(payload)
    except WireFormatError as exc:
        return type(exc), exc.field, exc.expected, exc.actual
    cols = (c.values, c.counts, c.offsets, c.lengths, c.seconds, c.spans)
    assert all(frozen(a) for a in cols)
    return [(a.dtype.str, a.shape, a.tolist()) for a in cols]


@settings(max_examples=400)
@given(payloads())
def test_the_wire_columns_read_on_lists_equal_the_vectorised_reading(payload):
    fast = _decoded(payload)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wire, "FEW_VALUES", -1)  # the vectorised path for every size
        general = _decoded(payload)
    assert fast == general
