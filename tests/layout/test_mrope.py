"""Numpy mRoPE: hand-checked values; HF bitwise parity lives in tests/hf."""

import numpy as np
import pytest
from handoff_strategies import layouts
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mm_handoff import HandoffLayout, MultimodalItem, get_adapter
from mm_handoff.errors import GridMismatchError, LayoutError
from mm_handoff.layout.mrope import (
    _many_runs_delta,
    _many_runs_delta_vectorised,
    layout_delta,
    layout_positions,
    mrope_positions,
)
from mm_handoff.layout.spec import TokenSpec


def test_text_only_is_arange():
    a = get_adapter("qwen3_vl")
    pos, delta = a.mrope_positions([1, 2, 3, 4])
    assert pos.tolist() == [[0, 1, 2, 3]] * 3 and delta == 0


def test_one_group_rules():
    """A pad run at p with grid (1, 4, 6): t=p, h=p+row, w=p+col; then p += max(h,w)/merge."""
    a = get_adapter("qwen3_vl")
    s = a.spec
    ids = [7, s.vision_start] + [s.image_pad] * 6 + [s.vision_end, 8]
    pos, delta = a.mrope_positions(ids, image_grid_thw=[[1, 4, 6]])
    assert pos[:, :2].tolist() == [[0, 1]] * 3
    assert pos[0, 2:8].tolist() == [2] * 6
    assert pos[1, 2:8].tolist() == [2, 2, 2, 3, 3, 3]
    assert pos[2, 2:8].tolist() == [2, 3, 4, 2, 3, 4]
    assert pos[:, 8].tolist() == [5, 5, 5] and pos[:, 9].tolist() == [6, 6, 6]
    assert delta == 7 - len(ids)
    assert pos.dtype == np.int64 and not pos.flags.writeable


def test_single_run_for_multi_group_video_raises_like_hf():
    """HF get_rope_index cannot position the stock single-run layout; neither do we."""
    a = get_adapter("qwen3_vl")
    s = a.spec
    ids = [1, s.vision_start] + [s.video_pad] * 8 + [s.vision_end]
    with pytest.raises(GridMismatchError):
        a.mrope_positions(ids, video_grid_thw=[[2, 2, 4]])


@given(layouts(mrope=True))
def test_the_delta_from_the_runs_equals_the_delta_from_the_ids(layout):
    """What the accept step compares a carried delta with (O(runs)) is mrope_positions' own delta; and what
    the adapter computes from the layout (its plan of the runs) is what derive_layout computed from the ids."""
    assert layout_delta(layout) == layout.mrope_position_delta
    positions, delta = get_adapter(layout.family).layout_mrope_positions(layout)
    assert np.array_equal(positions, layout.mrope_position_ids) and delta == layout.mrope_position_delta


def test_touching_image_runs_fall_back_to_the_ids():
    """Two images with no token between them are one pad segment to get_rope_index: the ids decide."""
    a = get_adapter("qwen3_vl")
    s = a.spec
    ids = [7, s.vision_start] + [s.image_pad] * 2 + [s.image_pad] * 2 + [s.vision_end, 8]
    runs = (MultimodalItem("image", [(2, 2)], 2, (1, 2, 4)), MultimodalItem("image", [(4, 2)], 2, (1, 2, 4)))
    layout = HandoffLayout(ids, runs, s, family="qwen3_vl", convention="pad_only")
    with pytest.raises(GridMismatchError):
        layout_delta(layout)


# ------------------------------------------------------------------ the plan from a layout's runs
_SPEC = TokenSpec(image_pad=5, video_pad=6, vision_start=3, vision_end=4)


@st.composite
def _run_layouts(draw):
    """Layouts built run by run: images of any grid (t > 1 too), videos of one or several groups (a group
    of another size than its grid's, or one run for several groups: the stock shape), runs of one
    modality that touch or not, text before, between and after."""
    ids, items = draw(st.lists(st.integers(7, 9), max_size=3)), []
    for _ in range(draw(st.integers(0, 4))):
        h, w = 2 * draw(st.integers(1, 3)), 2 * draw(st.integers(1, 3))
        touch = items and draw(st.booleans()) and ids[-1] in (_SPEC.image_pad, _SPEC.video_pad)
        if draw(st.booleans()):  # an image, touching the previous image's run or in its markers
            t = draw(st.sampled_from([1, 1, 2]))
            if touch and ids[-1] != _SPEC.image_pad:
                continue
            if not touch:
                ids += [_SPEC.vision_start]
            start, n = len(ids), t * h * w // 4
            ids += [_SPEC.image_pad] * n
            items.append(MultimodalItem("image", [(start, n)], n, (t, h, w)))
        else:
            t, stock = draw(st.integers(1, 3)), draw(st.booleans())
            groups = 1 if stock else t
            sizes = [t * h * w // 4] if stock else [h * w // 4] * t
            if not stock and t > 1 and draw(st.booleans()):  # one group of another size (the rows still add up)
                sizes[0] += 1
                sizes[-1] -= 1
                if sizes[-1] < 1:
                    continue
            runs = []
            for g in range(groups):
                if g:
                    ids += [_SPEC.vision_end, 9, _SPEC.vision_start]  # text between groups, in markers
                elif not (touch and ids[-1] == _SPEC.video_pad and groups == 1):
                    ids += [_SPEC.vision_start]
                runs.append((len(ids), sizes[g]))
                ids += [_SPEC.video_pad] * sizes[g]
            if groups > 1 or not ids or ids[-1] != _SPEC.video_pad or draw(st.booleans()):
                ids += [_SPEC.vision_end]
            items.append(MultimodalItem("video", runs, sum(sizes), (t, h, w)))
        if draw(st.booleans()):
            ids += [_SPEC.vision_end] if ids[-1] in (_SPEC.image_pad, _SPEC.video_pad) else []
            ids += draw(st.lists(st.integers(7, 9), max_size=3))
    if not ids:
        ids = [7]
    try:
        return HandoffLayout(ids, items, _SPEC, family="qwen3_vl", convention="pad_only")
    except LayoutError:
        assume(False)


def _by_ids(layout):
    """The ids path's answer (positions, delta) or the error type it raises."""
    grids = {m: [i.grid_thw for i in layout.items if i.modality == m] or None for m in ("image", "video")}
    try:
        return mrope_positions(layout.token_ids, layout.spec, image_grid_thw=grids["image"],
                               video_grid_thw=grids["video"])
    except GridMismatchError as exc:
        return type(exc)


@settings(max_examples=400)
@given(_run_layouts())
def test_positions_planned_from_the_runs_equal_the_ids_path(layout):
    """The layout's plan (runs and grids, no pass over the ids) gives get_rope_index's positions and delta
    bitwise, or the same refusal, on every shape: touching runs, a group of another size, the stock run."""
    want = _by_ids(layout)
    try:
        got = layout_positions(layout)
    except GridMismatchError as exc:
        assert want is type(exc)
        return
    assert not isinstance(want, type), want
    assert got[0].dtype == np.int64 and not got[0].flags.writeable
    assert np.array_equal(got[0], want[0]) and got[1] == want[1]
    assert layout_delta(layout) == want[1]


def test_many_runs_take_the_vectorised_paths():
    """Above the few-runs bound (a long video), positions and delta come from the ids path and the
    vectorised delta, equal to the plan's on the same layout."""
    a = get_adapter("qwen3_vl")
    s = a.spec
    ids = [7]
    runs = []
    for _ in range(80):  # 80 groups of 2 pads, each wrapped, a text token between
        ids += [s.vision_start]
        runs.append((len(ids), 2))
        ids += [s.video_pad] * 2 + [s.vision_end, 8]
    video = MultimodalItem("video", runs, 160, (80, 2, 4))
    spec = TokenSpec(image_pad=s.image_pad, video_pad=s.video_pad, vision_start=s.vision_start,
                     vision_end=s.vision_end)
    layout = HandoffLayout(ids, (video,), spec, family="qwen3_vl", convention="pad_only")
    want = mrope_positions(layout.token_ids, spec, video_grid_thw=[(80, 2, 4)])
    got = layout_positions(layout)
    assert np.array_equal(got[0], want[0]) and got[1] == want[1] == layout_delta(layout)


def _delta_or_error(delta, layout):
    try:
        return delta(layout, None, None)
    except GridMismatchError as exc:
        return type(exc)


@settings(max_examples=400)
@given(_run_layouts())
def test_the_delta_of_many_runs_in_o_items_equals_the_vectorised_one(layout):
    """The delta of a long video, read from each item's last run (O(items)), is the one the vectorised pass
    over every run gives, and get_rope_index's (the ids path) where that positions the layout: on touching
    runs, groups of another size, the stock run, text after the last run or none."""
    assume(layout.items)
    got = _delta_or_error(_many_runs_delta, layout)
    assert got == _delta_or_error(_many_runs_delta_vectorised, layout)
    want = _by_ids(layout)
    if not isinstance(want, type) and not isinstance(got, type):
        assert got == want[1]


@settings(max_examples=50)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 3), st.integers(0, 2)), min_size=1, max_size=6),
       st.booleans())
def test_the_delta_of_long_videos_and_images_equals_the_ids_path(shapes, tail):
    """Above the few-runs bound: videos of up to 26 groups of several sizes, images between them, text or
    none after the last <|vision_end|>; the delta from the items equals the vectorised one and the ids path's."""
    a = get_adapter("qwen3_vl")
    s = a.spec
    ids, items = [7], []
    for video, size, gap in shapes:
        h, w = 2 * size, 2 * (size + gap)
        if video:
            runs, groups = [], 8 * size + gap
            for g in range(groups):
                ids += [8] * (1 + (g + gap) % 3) + [s.vision_start]
                runs.append((len(ids), h * w // 4))
                ids += [s.video_pad] * (h * w // 4) + [s.vision_end]
            items.append(MultimodalItem("video", runs, groups * h * w // 4, (groups, h, w)))
        else:
            t = 1 + gap % 2
            ids += [s.vision_start]
            items.append(MultimodalItem("image", [(len(ids), t * h * w // 4)], t * h * w // 4, (t, h, w)))
            ids += [s.image_pad] * (t * h * w // 4) + [s.vision_end]
    ids += [9, 8] if tail else []
    spec = TokenSpec(image_pad=s.image_pad, video_pad=s.video_pad, vision_start=s.vision_start,
                     vision_end=s.vision_end)
    layout = HandoffLayout(ids, tuple(items), spec, family="qwen3_vl", convention="pad_only")
    want = _by_ids(layout)
    assert _many_runs_delta(layout, None, None) == _many_runs_delta_vectorised(layout, None, None) == want[1]
    assert layout_delta(layout) == want[1]
