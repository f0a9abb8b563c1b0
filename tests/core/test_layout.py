"""HandoffLayout: construction checks every invariant, deep immutability, identity."""

import doctest
import subprocess
import sys

import attrs
import numpy as np
import pytest

import mm_handoff
from mm_handoff import HandoffLayout, LayoutError, MropeLengthError, MultimodalItem, PlaceholderRun, TokenSpec
from mm_handoff import layout as layout_module

SPEC = TokenSpec(image_pad=5, video_pad=6, vision_start=3, vision_end=4)
IDS = [1, 3, 9, 3, 6, 6, 4, 9, 3, 6, 6, 4, 4, 2]


def video(runs=((4, 2), (9, 2)), rows=4, grid=(2, 2, 4), **kw):
    return MultimodalItem("video", runs, rows, grid, **kw)


def make(ids=IDS, items=None, **kw):
    kw.setdefault("family", "qwen3_vl")
    kw.setdefault("convention", "pad_only")
    return HandoffLayout(ids, (video(),) if items is None else items, SPEC, **kw)


def test_module_docstring_example_runs():
    """The worked example in the module docstring is true."""
    result = doctest.testmod(layout_module)
    assert result.attempted > 0 and result.failed == 0


def test_flat_views_match_the_aggregated_mask_helpers():
    """Positions, lengths, runs and cu offsets use TensorRT-LLM's aggregated values (pads only)."""
    lay = make()
    assert lay.multimodal_positions == [4]
    assert lay.multimodal_lengths == [4]
    assert lay.multimodal_embedding_lengths == [4]
    assert lay.item_run_cu_offsets == [0, 2]
    assert lay.run_positions == [4, 9]
    assert lay.run_lengths == [2, 2]
    assert lay.item_types == [1]
    assert lay.vision_start_positions.tolist() == [1, 3, 8]
    assert lay.vision_end_positions.tolist() == [6, 11, 12]
    kwargs = lay.to_disagg_prefill_inputs()
    assert kwargs["prompt_token_ids"] == IDS and kwargs["special_token_offsets"] is None


def test_deeply_immutable():
    """No field can be changed: frozen attrs, read-only arrays, tuples."""
    lay = make(mrope_position_ids=np.zeros((3, len(IDS)), dtype=np.int64), mrope_position_delta=0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        lay.family = "other"
    with pytest.raises(ValueError):
        lay.token_ids[0] = 7
    with pytest.raises(ValueError):
        lay.mrope_position_ids[0, 0] = 7
    with pytest.raises(ValueError):
        lay.vision_start_positions[0] = 7
    assert isinstance(lay.items, tuple) and isinstance(lay.items[0].runs, tuple)


def test_caller_array_is_copied_not_aliased():
    """Mutating the caller's array afterwards does not change the layout."""
    ids = np.array(IDS, dtype=np.int64)
    lay = make(ids=ids)
    ids[0] = 99
    assert lay.token_ids[0] == 1


@pytest.mark.parametrize(
    "items, field",
    [
        ((video(runs=((4, 2), (8, 2))),), "runs[1]"),  # covers a non-pad token
        ((video(runs=((9, 2), (4, 2))),), "runs[1].offset"),  # unsorted
        ((video(runs=((4, 2), (5, 2))),), "runs[1].offset"),  # overlapping
        ((video(runs=((4, 2), (13, 2))),), "runs[1]"),  # outside the prompt
        ((video(runs=((4, 2), (9, 1)), rows=3, grid=(2, 2, 4)),), "items[0].embedding_length"),
        ((video(runs=((4, 2),), rows=2, grid=(1, 2, 4)),), "token_ids"),  # orphan pads
        ((video(runs=((4, 2), (9, 2)), rows=4, grid=(2, 2, 4), timestamps=(0.1,)),), "items[0].timestamps"),
        ((video(runs=((4, 2), (9, 2)), grid=(2, 3, 4)),), "items[0].grid_thw"),
        ((video(runs=()),), "items[0].runs"),
    ],
)
def test_invalid_layouts_cannot_exist(items, field):
    """Each broken invariant raises LayoutError naming the field."""
    with pytest.raises(LayoutError) as info:
        make(items=items)
    assert info.value.field == field
    assert field in str(info.value)


def test_mrope_shape_is_checked_at_construction():
    """mRoPE ids must be (3, L) and cover the prompt exactly."""
    with pytest.raises(MropeLengthError) as info:
        make(mrope_position_ids=np.zeros((3, len(IDS) + 2), dtype=np.int64))
    assert (info.value.expected, info.value.actual) == (len(IDS), len(IDS) + 2)
    with pytest.raises(LayoutError):
        make(mrope_position_ids=np.zeros((2, len(IDS)), dtype=np.int64))
    lay = make(mrope_position_ids=np.zeros((3, 1, len(IDS)), dtype=np.int32), mrope_position_delta=np.int64(-3))
    assert lay.mrope_position_ids.shape == (3, len(IDS)) and lay.mrope_position_ids.dtype == np.int64
    assert lay.mrope_position_delta == -3 and type(lay.mrope_position_delta) is int


@pytest.mark.parametrize("bad", [[], [[1, 2]], ["a", "b"], [-1, 3], [2**40]])
def test_bad_token_ids(bad):
    with pytest.raises(LayoutError) as info:
        make(ids=bad, items=())
    assert info.value.field == "token_ids"


def test_other_fields_checked():
    with pytest.raises(LayoutError):
        make(convention="sideways")
    with pytest.raises(LayoutError):
        make(family="")
    with pytest.raises(LayoutError):
        TokenSpec(image_pad=5, video_pad=5, vision_start=3, vision_end=4)
    with pytest.raises(LayoutError):
        TokenSpec(image_pad=5, video_pad=6, vision_start=3, vision_end=4, merge_size=0)


def test_fingerprint_identity():
    """Equal layouts share a fingerprint; any change to ids, runs or mRoPE changes it."""
    a, b = make(), make()
    assert a == b and hash(a) == hash(b) and a.fingerprint() == b.fingerprint()
    other_ids = list(IDS)
    other_ids[0] = 2
    assert make(ids=other_ids).fingerprint() != a.fingerprint()
    with_mrope = a.with_mrope(np.zeros((3, len(IDS)), dtype=np.int64), 0)
    assert with_mrope.fingerprint() != a.fingerprint()
    assert with_mrope.fingerprint(include_mrope=False) == a.fingerprint()
    assert with_mrope != a and with_mrope.without_mrope() == a


def test_fingerprint_is_stable_across_processes():
    """The digest does not depend on hash randomisation or the process."""
    code = ("from mm_handoff import *; "
            "s = TokenSpec(image_pad=5, video_pad=6, vision_start=3, vision_end=4); "
            "v = MultimodalItem('video', ((4, 2), (9, 2)), 4, (2, 2, 4)); "
            "print(HandoffLayout([1,3,9,3,6,6,4,9,3,6,6,4,4,2], (v,), s, family='qwen3_vl', "
            "convention='pad_only').fingerprint())")
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONHASHSEED": str(seed)}).stdout.strip() for seed in (1, 2)}
    assert out == {make().fingerprint()}


def test_errors_are_value_errors_and_carry_values():
    """HandoffError subclasses ValueError; the message names field, expected, actual."""
    err = mm_handoff.MropeLengthError("mrope_position_ids.shape[-1]", 11894, 12054, request_id="r1")
    assert isinstance(err, ValueError)
    assert (err.field, err.expected, err.actual, err.request_id) == ("mrope_position_ids.shape[-1]", 11894, 12054, "r1")
    assert str(err) == "request 'r1': mrope_position_ids.shape[-1]: expected 11894, got 12054"
