"""HandoffLayout: construction checks every invariant, deep immutability, identity."""

import doctest
import subprocess
import sys

import attrs
import numpy as np
import pytest

import mm_handoff
from mm_handoff import HandoffLayout, LayoutError, MropeLengthError, MultimodalItem, PlaceholderRun, TokenSpec
from mm_handoff.layout import contract as layout_module

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
    lay = make(mrope_position_ids=np.zeros((3, len(IDS)), dtype=np.int64), mrope_position_delta=1 - len(IDS))
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
        ((video(runs=((4, 2), (9, 2)), grid=(2, 3, 4)),), "items[0].grid_thw"),
    ],
)
def test_invalid_layouts_cannot_exist(items, field):
    """Each broken cross-field invariant raises LayoutError naming the field."""
    with pytest.raises(LayoutError) as info:
        make(items=items)
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"runs": ()}, "MultimodalItem.runs"),
        ({"timestamps": (0.1,), "timestamp_spans": ((0, 1),)}, "MultimodalItem.timestamps"),
        ({"timestamps": (0.1, 0.5)}, "MultimodalItem.timestamp_spans"),  # spans missing
        ({"timestamps": (0.1, 0.25), "timestamp_spans": ((0, 1), (2, 3))}, "MultimodalItem.timestamps[1]"),
        ({"timestamps": ("0.1", 0.5), "timestamp_spans": ((0, 1), (2, 3))}, "MultimodalItem.timestamps[0]"),
        ({"rows": 5}, "MultimodalItem.runs"),  # runs sum to 4
    ],
)
def test_invalid_items_cannot_exist(kwargs, field):
    """An item checks its own invariants at construction, before any layout holds it."""
    with pytest.raises(LayoutError) as info:
        video(**kwargs)
    assert info.value.field == field


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda: PlaceholderRun("a", None), "PlaceholderRun.offset"),
        (lambda: PlaceholderRun(4, None), "PlaceholderRun.length"),
        (lambda: PlaceholderRun("4", 2), "PlaceholderRun.offset"),
        (lambda: PlaceholderRun(4.5, 2), "PlaceholderRun.offset"),
        (lambda: PlaceholderRun(-1, 2), "PlaceholderRun.offset"),
        (lambda: PlaceholderRun(4, 0), "PlaceholderRun.length"),
        (lambda: PlaceholderRun(True, 2), "PlaceholderRun.offset"),
        (lambda: video(rows=4.9), "MultimodalItem.embedding_length"),
        (lambda: video(rows="4"), "MultimodalItem.embedding_length"),
        (lambda: video(grid=(2.7, 2, 4)), "MultimodalItem.grid_thw"),
        (lambda: video(grid=("2", 2, 4)), "MultimodalItem.grid_thw"),
        (lambda: video(grid=(2, 2)), "MultimodalItem.grid_thw"),
        (lambda: video(runs=((4, 2), (9.5, 2))), "PlaceholderRun.offset"),
        (lambda: video(runs=((4, 2), "ab")), "MultimodalItem.runs"),
        (lambda: make(mrope_position_delta=1.5), "mrope_position_delta"),
        (lambda: make(mrope_position_delta="3"), "mrope_position_delta"),
    ],
)
def test_non_integral_values_are_typed_errors_not_truncated(build, field):
    """4.9 rows, a "4" offset or a (2.7, 2, 4) grid are rejected, never truncated to ints."""
    with pytest.raises(LayoutError) as info:
        build()
    assert info.value.field == field


def test_integral_numbers_of_other_types_are_normalised():
    """numpy ints and integral floats (what JSON and torch hand over) become plain ints."""
    run = PlaceholderRun(np.int64(4), 2.0)
    assert (run.offset, run.length) == (4, 2) and type(run.offset) is int and type(run.length) is int
    item = video(rows=np.int32(4), grid=(np.int64(2), 2.0, 4))
    assert item.embedding_length == 4 and item.grid_thw == (2, 2, 4)
    assert all(type(v) is int for v in item.grid_thw)


def test_mrope_shape_is_checked_at_construction():
    """mRoPE ids must be (3, L) and cover the prompt exactly."""
    with pytest.raises(MropeLengthError) as info:
        make(mrope_position_ids=np.zeros((3, len(IDS) + 2), dtype=np.int64))
    assert (info.value.expected, info.value.actual) == (len(IDS), len(IDS) + 2)
    with pytest.raises(LayoutError):
        make(mrope_position_ids=np.zeros((2, len(IDS)), dtype=np.int64))
    ramp = np.broadcast_to(np.arange(len(IDS), dtype=np.int32), (3, 1, len(IDS)))
    lay = make(mrope_position_ids=ramp, mrope_position_delta=np.int64(0))
    assert lay.mrope_position_ids.shape == (3, len(IDS)) and lay.mrope_position_ids.dtype == np.int64
    assert lay.mrope_position_delta == 0 and type(lay.mrope_position_delta) is int
    with pytest.raises(LayoutError) as info:  # a delta that is not the ids' max + 1 - L
        make(mrope_position_ids=ramp, mrope_position_delta=-3)
    assert info.value.field == "mrope_position_delta" and info.value.actual == -3


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
    """Equal layouts share a fingerprint; ids, runs and the mRoPE delta change it; mRoPE ids do not."""
    a, b = make(), make()
    assert a == b and hash(a) == hash(b) and a.fingerprint() == b.fingerprint()
    other_ids = list(IDS)
    other_ids[0] = 2
    assert make(ids=other_ids).fingerprint() != a.fingerprint()
    assert make(mrope_position_delta=0).fingerprint() != a.fingerprint()
    with_ids = make(mrope_position_ids=np.zeros((3, len(IDS)), dtype=np.int64))
    assert with_ids.fingerprint() == a.fingerprint() and with_ids == a  # derived data, not identity
    assert with_ids.fingerprint(include_mrope=True) != a.fingerprint(include_mrope=True)
    assert with_ids.without_mrope().mrope_position_ids is None


def test_identity_survives_the_wire_form():
    """A derived layout (mRoPE ids attached) and its decoded wire form are the same layout."""
    adapter = mm_handoff.get_adapter("qwen3_vl")
    s = adapter.spec
    raw = [1, 2, s.vision_start, s.video_pad, s.vision_end, 3]
    meta = {"fps": 24.0, "frames_indices": list(range(8)), "total_num_frames": 8}
    ids = adapter.rebuild_token_ids(raw, video_grid_thw=[[4, 4, 6]], video_metadata=[meta])
    layout = adapter.derive_layout(ids, video_grid_thw=[[4, 4, 6]])
    assert layout.mrope_position_ids is not None
    back = HandoffLayout.from_wire(layout.to_wire())
    assert back.mrope_position_ids is None
    assert back.fingerprint() == layout.fingerprint() and back == layout and hash(back) == hash(layout)


def test_from_rle_is_the_run_length_constructor():
    """from_rle expands the ids, checks every invariant and keeps the canonical run-length form."""
    values, counts = make().rle()
    again = HandoffLayout.from_rle(values, counts, (video(),), SPEC, family="qwen3_vl", convention="pad_only")
    assert again == make() and again.rle()[0] is not None
    with pytest.raises(LayoutError):
        HandoffLayout.from_rle(values, counts[:-1], (video(),), SPEC, family="qwen3_vl", convention="pad_only")


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


@pytest.mark.parametrize("offsets, lengths, field", [
    ([0, 5], [1, 2**31], "MultimodalItem.run_lengths"),  # one past the largest length
    ([0, -1], [1, 1], "MultimodalItem.run_offsets"),
    ([0, 2**31], [1, 1], "MultimodalItem.run_offsets"),
    ([0, 1], [0, 1], "MultimodalItem.run_lengths"),
    ([0, 1], [-5, 1], "MultimodalItem.run_lengths"),
    ([2**31 - 1, 0], [2**31 - 1, 1], None),  # the largest offset and length
])
def test_item_columns_are_bounded_in_one_pass(offsets, lengths, field):
    """Offsets in [0, 2**31 - 1] and lengths in [1, 2**31 - 1], for one item and for many sharing columns."""
    heads = [("video", (1, 2, 2), 1), ("image", (1, 2, 2), 1)]
    calls = [lambda: MultimodalItem.from_arrays("video", offsets, lengths, (2, 2, 2)),
             lambda: MultimodalItem.from_columns([(*h, False) for h in heads], offsets, lengths)]
    for call in calls:
        if field is None:
            assert call()
            continue
        with pytest.raises(LayoutError) as info:
            call()
        assert info.value.field == field


def _image(offset, length, grid=(1, 2, 2)):
    return MultimodalItem("image", [(offset, length)], length, grid)


@pytest.mark.parametrize("ids, items, field", [
    # two images whose pads touch: one segment of the ids' run-length form, two runs
    ([1, 5, 5, 5, 5, 2], (_image(1, 2, (1, 2, 4)), _image(3, 2, (1, 2, 4))), None),
    ([1, 5, 5, 5, 5, 2], (_image(1, 2, (1, 2, 4)), _image(3, 1, (1, 2, 2))), "token_ids"),  # a pad left out
    ([1, 5, 5, 6, 6, 2], (_image(1, 2, (1, 2, 4)), _image(3, 2, (1, 2, 4))), "runs[1]"),  # video pads in an image run
    # an image run touching a video group: two segments (the pads differ), two runs
    ([1, 5, 5, 3, 6, 6, 4, 2], (_image(1, 2, (1, 2, 4)), video(((4, 2),), 2, (1, 2, 4))), None),
    ([1, 5, 5, 5, 2], (_image(1, 2, (1, 2, 4)),), "token_ids"),  # a pad after the run
    ([5, 5, 1], (_image(0, 2, (1, 2, 4)),), None),  # a run at the prompt's start
    ([1, 5, 5], (_image(1, 2, (1, 2, 4)),), None),  # a run at its end
    ([1, 2, 3], (), None),  # text only
    ([1, 5, 3], (), "token_ids"),  # a pad and no item
])
def test_runs_against_pads_on_the_run_length_form(ids, items, field):
    """Runs cover exactly the pads of their modality, read from the ids' run-length form: runs of one
    modality that touch join into one segment; a pad outside every run or a run over other ids is refused."""
    if field is None:
        assert make(ids=ids, items=items).prompt_len == len(ids)
        return
    with pytest.raises(LayoutError) as info:
        make(ids=ids, items=items)
    assert info.value.field == field
