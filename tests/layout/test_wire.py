"""Wire form: round trip, JSON safety, and every corruption ends in a typed, field-naming error."""

import base64
import copy
import json
import zlib

import numpy as np
import pytest
from adversary import answer
from handoff_strategies import layouts
from hypothesis import given
from hypothesis import strategies as st

from mm_handoff import HandoffError, HandoffLayout, Limits, WireFormatError, get_adapter
from mm_handoff.errors import _fmt
from mm_handoff.layout.wire import VERSION

from_wire = HandoffLayout.from_wire

RAW = [151644, 872, 198, 151652, 151656, 151653, 74785, 419, 2766, 13, 151645, 198, 151644, 77091, 198]


@pytest.fixture(scope="module")
def layout():
    a = get_adapter("qwen3_vl")
    meta = {"fps": 24.0, "frames_indices": list(range(40)), "total_num_frames": 40}
    ids = a.rebuild_token_ids(RAW, video_grid_thw=[[20, 36, 66]], video_metadata=[meta])
    return a.derive_layout(ids, video_grid_thw=[[20, 36, 66]])


def test_round_trip_through_json(layout):
    """to_wire -> JSON -> from_wire gives the same layout minus the (recomputable) mRoPE ids."""
    wire = layout.to_wire()
    text = json.dumps(wire)
    back = HandoffLayout.from_wire(text)
    assert back == layout.with_mrope(None, layout.mrope_position_delta)
    assert back.mrope_position_ids is None and back.mrope_position_delta == -11220
    assert back.fingerprint(include_mrope=False) == layout.fingerprint(include_mrope=False)
    assert len(text) < 1500  # 12,054 ids in ~1 KB
    # it fits inside a handle dict as an extra key and survives JSON there too
    handle = {"tensor_size": [11880, 16384], "method_key": 2, "mm_handoff.layout": wire}
    assert from_wire(json.loads(json.dumps(handle))["mm_handoff.layout"]) == back


@given(layouts())
def test_round_trip_property(lay):
    back = from_wire(json.loads(json.dumps(lay.to_wire())))
    assert back == lay.with_mrope(None, lay.mrope_position_delta)


def _raw(w):
    return bytearray(zlib.decompress(base64.b64decode(w["arrays"])))


def _set_raw(w, raw):
    w["arrays"] = base64.b64encode(zlib.compress(bytes(raw), 1)).decode()


def _mutations(draw, wire):
    """One single-field corruption of a valid payload."""
    w = copy.deepcopy(wire)
    kind = draw(st.sampled_from(["drop", "extra", "retype", "perturb_int", "flip_content", "flip_blob",
                                 "truncate_blob", "reorder_runs", "checksum", "version", "item_field",
                                 "spec_field", "sizes_field"]))
    junk = draw(st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40), st.text(max_size=5),
                          st.lists(st.integers(-3, 3), max_size=3), st.floats(allow_nan=True)))
    if kind == "drop":
        w.pop(draw(st.sampled_from(sorted(w))))
    elif kind == "extra":
        w[draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in w))] = junk
    elif kind == "retype":
        key = draw(st.sampled_from(sorted(w)))
        if w[key] == junk:
            return None
        w[key] = junk
    elif kind == "perturb_int":
        key = draw(st.sampled_from(["length", "mrope_position_delta"]))
        w[key] = (w[key] or 0) + draw(st.integers(1, 1000)) * draw(st.sampled_from([1, -1]))
    elif kind == "flip_content":  # bytes changed before compression: zlib is happy, the content is not
        raw = _raw(w)
        i = draw(st.integers(0, len(raw) - 1))
        raw[i] ^= draw(st.integers(1, 255))
        _set_raw(w, raw)
    elif kind in ("flip_blob", "truncate_blob"):
        blob = bytearray(base64.b64decode(w["arrays"]))
        if kind == "flip_blob":
            i = draw(st.integers(0, len(blob) - 1))
            blob[i] ^= draw(st.integers(1, 255))
        else:
            blob = blob[: draw(st.integers(0, len(blob) - 1))]
        w["arrays"] = base64.b64encode(bytes(blob)).decode()
    elif kind == "reorder_runs":
        n_runs, n_rle = w["sizes"]["runs"], w["sizes"]["rle"]
        if n_runs < 2:
            return None
        raw = _raw(w)
        arr = np.frombuffer(bytes(raw), dtype="<i4").copy()
        offs = np.cumsum(arr[2 * n_rle:2 * n_rle + n_runs])[::-1]
        arr[2 * n_rle:2 * n_rle + n_runs] = np.concatenate(([offs[0]], np.diff(offs)))
        _set_raw(w, arr.tobytes())
    elif kind == "checksum":
        w["checksum"] = "0" * 32
    elif kind == "version":
        w["version"] = draw(st.integers(0, 99).filter(lambda v: v != VERSION))
    elif kind in ("item_field", "spec_field", "sizes_field"):
        target = {"spec_field": w["spec"], "sizes_field": w["sizes"]}.get(kind)
        if kind == "item_field":
            if not w["items"]:
                return None
            target = w["items"][draw(st.integers(0, len(w["items"]) - 1))]
        key = draw(st.sampled_from(sorted(target)))
        if target[key] == junk:
            return None
        target[key] = junk
    return kind, w


@given(st.data())
def test_every_single_field_corruption_is_a_typed_error(data):
    """Decoding a corrupted payload returns the original layout or raises a HandoffError naming a field."""
    lay = data.draw(layouts(mrope=False))
    wire = lay.to_wire()
    mutated = _mutations(data.draw, wire)
    if mutated is None:
        return
    kind, w = mutated
    try:
        back = from_wire(w)
    except HandoffError as exc:
        assert exc.field and exc.field in str(exc) and _fmt(exc.actual) in str(exc)
        return
    # only a no-op corruption may decode, and then it must decode to the original
    assert back == lay, kind


def test_specific_rejections(layout):
    wire = layout.to_wire()
    with pytest.raises(WireFormatError, match="wire.version"):
        from_wire(dict(wire, version=1))  # the previous format: another checksum definition
    with pytest.raises(WireFormatError, match="wire.version"):
        from_wire(dict(wire, version=VERSION + 1))
    with pytest.raises(WireFormatError, match="wire.checksum"):
        from_wire(dict(wire, checksum="f" * 32))
    with pytest.raises(WireFormatError) as info:
        from_wire(json.dumps(wire)[:-10])
    assert info.value.field == "wire.json"
    with pytest.raises(WireFormatError):
        from_wire([1, 2, 3])
    bad = copy.deepcopy(wire)  # the first run shifted by one token, onto a timestamp
    n_rle = bad["sizes"]["rle"]
    arr = np.frombuffer(zlib.decompress(base64.b64decode(bad["arrays"])), dtype="<i4").copy()
    arr[2 * n_rle] += 1
    bad["arrays"] = base64.b64encode(zlib.compress(arr.tobytes(), 1)).decode()
    with pytest.raises(HandoffError):
        from_wire(bad)
    bomb = dict(wire, arrays=base64.b64encode(zlib.compress(b"\0" * 10_000_000, 9)).decode())
    with pytest.raises(WireFormatError) as info:  # inflating stops at the declared size
        from_wire(bomb)
    assert info.value.field == "wire.arrays"


def test_huge_declared_sizes_rejected_before_allocation():
    """A few bytes claiming 10**12 pads are rejected at once, in constant memory."""
    a = get_adapter("qwen3_vl")
    tiny = a.derive_layout([1, 2, 3], mrope=False).to_wire()
    for attack in (
        dict(tiny, length=10**12),
        dict(tiny, sizes={"rle": 10**12, "runs": 0, "timestamps": 0}),
        dict(tiny, sizes={"rle": 1, "runs": 10**12, "timestamps": 0}),
        dict(tiny, items=[{"modality": "video", "grid_thw": [10**6, 10**6, 10**6], "runs": 10**12,
                           "timestamps": False}]),
    ):
        _, exc = answer(lambda attack=attack: from_wire(attack))  # the meter: no 10**12-element allocation
        assert isinstance(exc, WireFormatError), exc
    with pytest.raises(WireFormatError, match="at most"):
        from_wire(dict(tiny, items=[{}] * 5), limits=Limits(max_items=4))
    with pytest.raises(WireFormatError, match="at most"):
        from_wire(dict(tiny, length=100), limits=Limits(max_prompt_len=99))
    with pytest.raises(WireFormatError, match="at most"):
        from_wire("x" * 100, limits=Limits(max_payload_chars=10))
