"""The fast paths for few runs compute what the general (vectorised) paths compute: the same acceptance,
the same values, the same refusal, on inputs drawn well beyond the honest shapes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm_handoff.errors import LayoutError, WireFormatError
from mm_handoff.layout import contract, invariants, tokens, wire
from mm_handoff.layout.spec import TokenSpec, equals_checked_grids, normalize_grids
from mm_handoff.layout.tokens import frozen, read_only, run_length_form
from mm_handoff.reading import Limits

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


# ----------------------------------------------------------------------------- item headers, one by one
def _image_payload(grids):
    """The wire form of a prompt of images of these grids (merge size 2), each run right after text."""
    heads, offsets, lengths, values, counts, at = [], [], [], [], [], 0
    for t, h, w in grids:
        pads = t * h * w // 4
        values += [1, 5]
        counts += [1, pads]
        offsets.append(at + 1)
        lengths.append(pads)
        heads.append(("image", (t, h, w), 1, False))
        at += 1 + pads
    content = wire.WireContent(family="qwen3_vl", convention="pad_only", tokenizer_digest=None, spec=SPEC,
                               values=values + [1], counts=counts + [1], heads=tuple(heads), offsets=offsets,
                               lengths=lengths, seconds=[], spans=np.zeros((0, 2), dtype=np.int64),
                               mrope_position_delta=None, checksum="")
    return wire.encode(content, checksum=wire.checksum(content))


_ODD = [None, True, 0, -1, 2**31, 1.0, "2", [2], (), "image", "video", "audio", {"a": 1}, np.int64(2)]


@st.composite
def item_headers(draw):
    """Payloads of one to three images whose item headers are honest, or one field of one of them replaced
    (by a value of another type, out of range, a key added or taken away, the header not a dict)."""
    grids = draw(st.lists(st.tuples(st.just(1), st.sampled_from([2, 4]), st.sampled_from([2, 6])), min_size=1,
                          max_size=3))
    payload = _image_payload(grids)
    if draw(st.booleans()):
        k = draw(st.integers(0, len(grids) - 1))
        head = dict(payload["items"][k])
        what = draw(st.sampled_from(["modality", "grid_thw", "runs", "timestamps", "grid entry", "add", "drop",
                                     "not a dict"]))
        if what == "grid entry":
            grid = list(head["grid_thw"])
            grid[draw(st.integers(0, 2))] = draw(st.sampled_from(_ODD))
            head["grid_thw"] = grid
        elif what == "add":
            head["extra"] = 1
        elif what == "drop":
            head.pop(draw(st.sampled_from(sorted(head))))
        elif what == "not a dict":
            head = draw(st.sampled_from(_ODD))
        else:
            head[what] = draw(st.sampled_from(_ODD))
        payload["items"] = [*payload["items"][:k], head, *payload["items"][k + 1:]]
    return payload


@settings(max_examples=400)
@given(item_headers())
def test_few_item_headers_read_one_by_one_equal_the_reading_of_all_at_once(payload):
    fast = _decoded(payload)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wire, "_FEW_ITEMS", -1)  # the all-at-once reading for every count
        general = _decoded(payload)
    assert fast == general


# ----------------------------------------------------------------------------- ids and kinds as lists
@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(1, 40)), min_size=1, max_size=80))
def test_an_id_list_from_the_run_length_form_is_the_ids_as_a_list(runs):
    values = np.asarray([v for v, _ in runs], dtype=np.int32)
    counts = np.asarray([c for _, c in runs], dtype=np.int32)
    out = tokens.rle_id_list(values, counts)
    assert out == np.repeat(values, counts).tolist()
    assert all(type(v) is int for v in out)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from([0, 1]), st.integers(1, 3000)), min_size=1, max_size=5))
def test_the_kind_column_is_every_runs_modality_and_read_only(items):
    codes, sizes = [c for c, _ in items], [k for _, k in items]
    kind = contract._kind_column(codes, sizes)
    assert kind.dtype == np.int8 and kind.tolist() == np.repeat(np.asarray(codes, np.int8), sizes).tolist()
    assert frozen(kind)


# ----------------------------------------------------------------------------- a request's own grids
_GRID_VALUES = [1, 2, 4, 6, 3, True, 0, -2, 2**31, np.int64(4), 4.0]


@st.composite
def grids_and_checked(draw):
    """Checked grids (as a layout holds them) and a request's grids: the same, or in other containers or
    types, one value changed, one grid more or less; under limits that may be too small for them."""
    checked = draw(st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from([2, 4, 6]),
                                      st.sampled_from([2, 4, 6])), min_size=0, max_size=3))
    given = [list(g) if draw(st.booleans()) else tuple(g) for g in checked]
    what = draw(st.sampled_from(["same", "same", "value", "more", "fewer", "outer tuple", "array", "ragged"]))
    if what == "value" and given:
        k, j = draw(st.integers(0, len(given) - 1)), draw(st.integers(0, 2))
        grid = list(given[k])
        grid[j] = draw(st.sampled_from(_GRID_VALUES))
        given[k] = grid
    elif what == "more":
        given.append([1, 2, 2])
    elif what == "fewer" and given:
        given.pop()
    elif what == "outer tuple":
        given = tuple(given)
    elif what == "array" and given:
        given = np.asarray(checked, dtype=np.int64)
    elif what == "ragged" and given:
        given[0] = list(given[0])[:2]
    limits = Limits(max_runs=draw(st.sampled_from([2, 100])), max_prompt_len=draw(st.sampled_from([10, 10_000])),
                    max_items=draw(st.sampled_from([2, 100])))
    return given, checked, limits


@settings(max_examples=500)
@given(grids_and_checked())
def test_grids_told_equal_to_checked_ones_are_what_normalize_grids_returns(case):
    given, checked, limits = case
    if not equals_checked_grids(given, checked, merge_size=2, limits=limits):
        return  # (the general reading decides; nothing is claimed)
    assert normalize_grids(given, "grids", merge_size=2, limits=limits) == checked


def test_a_requests_honest_grids_are_told_equal_without_the_general_reading():
    assert equals_checked_grids([[1, 4, 6], (2, 2, 2)], [(1, 4, 6), (2, 2, 2)], merge_size=2, limits=None)
    assert not equals_checked_grids([[True, 4, 6]], [(1, 4, 6)], merge_size=2, limits=None)
    assert not equals_checked_grids([[1, 4, 6]], [(1, 4, 6)], merge_size=2, limits=Limits(max_prompt_len=5))
