"""Hardening: no check depends on ``assert``; validator entry points turn any garbage into typed errors;
encoder/prefill skew is named; the registry and adapters are safe under concurrent use."""

import ast
import concurrent.futures
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from handoff_strategies import layouts
from hypothesis import given
from hypothesis import strategies as st

import mm_handoff
from mm_handoff import HandoffError, HandoffLayout, SkewError, check_mrope_slice, check_skew, get_adapter, validate
from mm_handoff.adapters import FAMILIES
from mm_handoff.errors import (
    EmbeddingCountError,
    LayoutError,
    MropeLengthError,
    TokenMismatchError,
    WireFormatError,
    _fmt,
)
from mm_handoff.layout.tokens import first_difference

from_wire = HandoffLayout.from_wire

PKG = Path(mm_handoff.__file__).parent


def test_package_has_no_assert_statements():
    """Validation never relies on assert (it vanishes under python -O)."""
    offenders = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assert):
                offenders.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert offenders == []


def test_checks_hold_under_python_O():
    """In an optimised interpreter every invalid input still raises its typed error."""
    script = r'''
import sys, numpy as np
from mm_handoff import *
from mm_handoff.errors import *
from_wire = HandoffLayout.from_wire
a = get_adapter("qwen3_vl"); s = a.spec
assert_off = True
try:
    assert False
except AssertionError:
    assert_off = False
if not assert_off:
    sys.exit("not running under -O")
raw = [1, s.vision_start, s.video_pad, s.vision_end, 2]
meta = {"fps": 24.0, "frames_indices": list(range(8)), "total_num_frames": 8}
grid = [[4, 4, 6]]
agg = a.derive_layout(a.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=[meta]), video_grid_thw=grid)
stock = a.derive_layout(a.stock_token_ids(raw, video_grid_thw=[[4, 4, 6]]), video_grid_thw=[[4, 4, 6]], mrope=False)
cases = [
    (MropeLengthError, lambda: validate(stock, mrope_position_ids=agg.mrope_position_ids)),
    (GridMismatchError, lambda: validate(stock)),
    (EmbeddingCountError, lambda: validate(agg, embedding_rows=3)),
    (MropeLengthError, lambda: check_mrope_slice([3, 1, 10], 9)),
    (LayoutError, lambda: HandoffLayout([1, 2], (MultimodalItem("video", ((0, 2),), 2, (1, 2, 4)),), s, family="x",
                                        convention="pad_only")),
    (WireFormatError, lambda: from_wire(dict(agg.to_wire(), checksum="0" * 32))),
    (WireFormatError, lambda: from_wire(dict(agg.to_wire(), length=10**12))),
]
for kind, fn in cases:
    try:
        fn()
    except kind:
        continue
    sys.exit(f"{kind.__name__} not raised")
print("ok", len(cases))
'''
    r = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok 7"


GARBAGE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.text(max_size=8),
              st.binary(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=6), inner, max_size=5)),
    max_leaves=12,
)


def _names_values(exc):
    """The message carries the field and the actual value (the expected one is in every message too),
    the value shortened when it is long (the message stays under 1,000 characters)."""
    text = str(exc)
    assert exc.field in text and _fmt(exc.actual) in text and "expected" in text and len(text) <= 1000


def _count(v):
    """The oracle's reading of a count: a non-negative int (bools are not counts), else None."""
    return v if type(v) is int and v >= 0 else None


def _mrope_outcome(shape, prompt_len, begin):
    """What check_mrope_slice must do: return L, or raise (None)."""
    if isinstance(shape, dict):
        shape = shape.get("tensor_size")
    if _count(prompt_len) is None or _count(begin) is None or not isinstance(shape, list):
        return None
    if not all(_count(d) is not None for d in shape):
        return None
    if not (len(shape) == 2 and shape[0] == 3) and not (len(shape) == 3 and shape[:2] == [3, 1]):
        return None
    return shape[-1] if shape[-1] == prompt_len and begin <= prompt_len else None


@given(GARBAGE, GARBAGE, GARBAGE)
def test_check_mrope_slice_garbage(shape, prompt_len, begin):
    """Anything as shape, prompt length or bounds: exactly the oracle's verdict, as a MropeLengthError."""
    expected = _mrope_outcome(shape, prompt_len, begin)
    if expected is not None:
        assert check_mrope_slice(shape, prompt_len, begin=begin) == expected
        return
    with pytest.raises(MropeLengthError) as info:
        check_mrope_slice(shape, prompt_len, begin=begin)
    _names_values(info.value)


@given(st.lists(st.integers(0, 10), min_size=2, max_size=3), st.integers(0, 10), st.integers(0, 10))
def test_check_mrope_slice_near_valid(shape, prompt_len, begin):
    """Shapes close to valid ones (where garbage rarely lands) get the oracle's verdict too."""
    shape = [3] + shape[1:]
    expected = _mrope_outcome(shape, prompt_len, begin)
    if expected is not None:
        assert check_mrope_slice(shape, prompt_len, begin=begin) == expected
    else:
        with pytest.raises(MropeLengthError):
            check_mrope_slice(shape, prompt_len, begin=begin)


@given(GARBAGE)
def test_from_wire_garbage(obj):
    """Garbage is never a payload: a WireFormatError naming a wire field."""
    with pytest.raises(WireFormatError) as info:
        from_wire(obj)
    assert info.value.field.startswith("wire.")
    _names_values(info.value)


def test_from_wire_deeply_nested_json():
    """JSON nested past the interpreter's recursion limit is a typed error, not a RecursionError."""
    with pytest.raises(HandoffError) as info:
        from_wire("[" * 100_000 + "]" * 100_000)
    assert info.value.field == "wire.json"


@given(st.text(max_size=200))
def test_from_wire_garbage_text(text):
    """Any text is a WireFormatError (it is not JSON, or not a payload)."""
    with pytest.raises(WireFormatError) as info:
        from_wire(text)
    _names_values(info.value)


def _as_ids(value):
    """The oracle's reading of token ids: a list of ints in int32 range (a bool is never an id), else None."""
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        return None
    ids = list(value)
    return ids if all(0 <= v <= 2**31 - 1 for v in ids) else None


@given(layouts(mrope=False), GARBAGE)
def test_validate_garbage_rows(lay, rows):
    """Embedding rows: None (not given), or a total or per-item list equal to the layout's pads passes;
    anything else is an EmbeddingCountError."""
    good = rows is None or (type(rows) is int and rows == lay.num_pads) or (
        isinstance(rows, list) and all(type(r) is int for r in rows) and rows == lay.multimodal_embedding_lengths)
    if good:
        assert validate(lay, embedding_rows=rows) is lay
        return
    with pytest.raises(EmbeddingCountError) as info:
        validate(lay, embedding_rows=rows)
    assert info.value.field == "embedding_rows" and "expected" in str(info.value)


@given(layouts(mrope=False), GARBAGE)
def test_validate_garbage_prompt_ids(lay, ids):
    """Prompt ids: not ids at all -> LayoutError; other ids -> TokenMismatchError naming the index."""
    as_ids = _as_ids(ids)
    if ids is None or as_ids == lay.token_ids.tolist():  # None: not given, nothing to compare
        assert validate(lay, prompt_token_ids=ids) is lay
    elif as_ids is None:
        with pytest.raises(LayoutError) as info:
            validate(lay, prompt_token_ids=ids)
        assert info.value.field == "prompt_token_ids"
    else:
        with pytest.raises(TokenMismatchError) as info:
            validate(lay, prompt_token_ids=ids)
        assert info.value.index == first_difference(lay.token_ids, as_ids)


def test_reject_1e12_pads_before_allocation():
    """A payload of a few hundred bytes claiming 10**12 pads is refused before anything is allocated."""
    wire = get_adapter("qwen3_vl").derive_layout([1, 2, 3], mrope=False).to_wire()
    attack = json.dumps(dict(wire, length=10**12))
    tracemalloc.start()
    try:
        with pytest.raises(HandoffError):
            from_wire(attack)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # one MiB: far below the 4 TB a materialised run would need


@pytest.mark.parametrize("prefill_family, prefill_convention, field", [
    ("qwen3_5", "pad_only", "family"),
    ("qwen3_vl", "replace_wrapper", "convention"),
])
def test_skew_is_named_on_both_sides(prefill_family, prefill_convention, field):
    enc = FAMILIES["qwen3_vl"](convention="pad_only")
    lay = enc.derive_layout([1, 2, 3], mrope=False)
    pre = FAMILIES[prefill_family](convention=prefill_convention)
    with pytest.raises(SkewError) as info:
        check_skew(lay, family=pre.family, convention=pre.convention, tokenizer_digest=pre.tokenizer_digest,
                   request_id="r")
    assert info.value.field == field and "(prefill)" in str(info.value) and "(encoder)" in str(info.value)


def test_tokenizer_skew_detected():
    """Same family, other tokenizer ids (Qwen3.5 ids under a qwen3_vl name): the digest differs."""
    from mm_handoff.adapters.families import Qwen3_5Adapter

    enc = Qwen3_5Adapter(convention="pad_only")
    lay = enc.derive_layout([1, 2, 3], mrope=False)
    pre = FAMILIES["qwen3_5"](convention="pad_only")
    check_skew(lay, family="qwen3_5", convention="pad_only", tokenizer_digest=pre.tokenizer_digest)
    with pytest.raises(SkewError) as info:
        check_skew(lay, family="qwen3_5", convention="pad_only",
                   tokenizer_digest=FAMILIES["qwen3_vl"](convention="pad_only").tokenizer_digest)
    assert info.value.field == "tokenizer_digest"
    check_skew(FAMILIES["cosmos3_omni"](convention="pad_only").derive_layout([1], mrope=False),
               family="cosmos3", convention="pad_only", tokenizer_digest=None)  # alias, same family


def test_concurrent_derivation_and_registry_lookups():
    """Many threads deriving, encoding, decoding and resolving adapters: no cross-talk."""
    a = get_adapter("qwen3_vl")
    s = a.spec

    def job(k):
        frames = 2 + k % 9
        grid = [[(frames + 1) // 2, 2 * (1 + k % 3), 4]]
        raw = [1000 + k, s.vision_start, s.video_pad, s.vision_end, 2000 + k]
        meta = {"fps": 24.0, "frames_indices": list(range(k, k + frames)), "total_num_frames": k + frames}
        adapter = get_adapter(["qwen3_vl", "qwen3_vl_moe", "cosmos3_omni"][k % 3])
        lay = adapter.derive_layout(adapter.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=[meta]),
                                    video_grid_thw=grid)
        back = from_wire(json.dumps(lay.to_wire()))
        validate(back, embedding_rows=lay.num_pads)
        return k, lay.token_ids[0], back.fingerprint(include_mrope=False) == lay.fingerprint(include_mrope=False)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(job, range(400)))
    assert all(first == 1000 + k and same for k, first, same in results)
