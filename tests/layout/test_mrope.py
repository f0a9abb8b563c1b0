"""Numpy mRoPE: hand-checked values; HF bitwise parity lives in tests/hf."""

import numpy as np
import pytest
from handoff_strategies import layouts
from hypothesis import given

from mm_handoff import HandoffLayout, MultimodalItem, get_adapter
from mm_handoff.errors import GridMismatchError
from mm_handoff.layout.mrope import layout_delta


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
    """What the accept step compares a carried delta with (O(runs)) is mrope_positions' own delta."""
    assert layout_delta(layout) == layout.mrope_position_delta


def test_touching_image_runs_fall_back_to_the_ids():
    """Two images with no token between them are one pad segment to get_rope_index: the ids decide."""
    a = get_adapter("qwen3_vl")
    s = a.spec
    ids = [7, s.vision_start] + [s.image_pad] * 2 + [s.image_pad] * 2 + [s.vision_end, 8]
    runs = (MultimodalItem("image", [(2, 2)], 2, (1, 2, 4)), MultimodalItem("image", [(4, 2)], 2, (1, 2, 4)))
    layout = HandoffLayout(ids, runs, s, family="qwen3_vl", convention="pad_only")
    with pytest.raises(GridMismatchError):
        layout_delta(layout)
