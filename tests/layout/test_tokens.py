"""The engine's id list (``token_id_list``, TensorRT-LLM's ``prompt_token_ids``) is the ids, exactly,
whatever the mix of pad runs and text: one fill of the commonest pad, the other ids put between."""

from __future__ import annotations

import numpy as np
from handoff_strategies import prompts
from hypothesis import event, given, settings
from hypothesis import strategies as st

from mm_handoff.layout.tokens import filled_id_list

#: prompts of a few hundred to a few thousand ids, so both of the list's paths are taken
LONG = prompts(max_items=5, image_side=12, video_side=6, max_frames=24, text=(300, 40))


@settings(max_examples=300, deadline=None)
@given(LONG)
def test_the_id_list_is_the_ids(case):
    adapter, _, image_grids, video_grids, _, ids = case
    layout = adapter.derive_layout(ids, image_grid_thw=image_grids, video_grid_thw=video_grids, mrope=False)
    expected = layout.token_ids.tolist()
    runs = len(layout.run_positions)
    event("fill path" if layout.prompt_len >= 256 and (runs + 1) * 16 <= layout.prompt_len else "tolist path")
    assert layout.token_id_list() == expected
    assert layout.to_disagg_prefill_inputs()["prompt_token_ids"] == expected
    assert all(type(v) is int for v in layout.token_id_list())


FILL = 151656


@st.composite
def fill_runs(draw):
    """Ids of fill runs and gaps of other ids, with many runs (so the strided path is taken) whose gap
    lengths and run lengths repeat for stretches (so it finds blocks) or vary (so they end). A gap of
    length 0 makes two runs touch, as two runs of one modality may in a layout."""
    sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    runs = draw(st.lists(st.tuples(st.sampled_from(sizes), st.integers(1, 3)),
                         min_size=draw(st.sampled_from([0, 60])), max_size=120))
    ids, starts, ends = [], [], []
    for gap, pads in runs:
        ids += draw(st.lists(st.integers(0, 1000), min_size=gap, max_size=gap))
        starts.append(len(ids))
        ids += [FILL] * pads
        ends.append(len(ids))
    ids += draw(st.lists(st.integers(0, 1000), max_size=3))
    return np.asarray(ids, dtype=np.int32), np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


@settings(max_examples=500, deadline=None)
@given(fill_runs())
def test_the_filled_list_is_the_ids(case):
    ids, starts, ends = case
    event("strided path" if starts.shape[0] > 32 else "slice per gap")
    out = filled_id_list(ids, FILL, starts, ends)
    assert out == ids.tolist()
    assert all(type(v) is int for v in out)


def test_a_regular_video_is_written_by_strides():
    # 384 groups: 9 text ids, then 26 pads; the same list as tolist, for a run of strides
    group = [*range(100, 109), *[FILL] * 26]
    ids = np.asarray(group * 384 + [7, 8], dtype=np.int32)
    starts = np.arange(384) * 35 + 9
    assert filled_id_list(ids, FILL, starts, starts + 26) == ids.tolist()


def test_runs_that_touch_at_the_end():
    # 40 runs one id apart, then one touching the last: a block of one empty gap ends the list
    ids, starts = [], []
    for _ in range(40):
        starts.append(len(ids) + 1)
        ids += [7, FILL, FILL]
    starts.append(len(ids))
    ids.append(FILL)
    starts_ = np.asarray(starts)
    ends = np.append(starts_[:-1] + 2, len(ids))
    arr = np.asarray(ids, dtype=np.int32)
    assert filled_id_list(arr, FILL, starts_, ends) == ids


def test_a_layout_whose_last_runs_touch():
    # 42 one-pad images, the last two with no marker between them (runs of one modality may touch):
    # the engine's list takes the strided path and ends on an empty gap, through the wire as well
    from mm_handoff import HandoffLayout, MultimodalItem, get_adapter

    adapter = get_adapter("qwen3_vl")
    s = adapter.spec
    ids, items = [100] * 700, []
    for _ in range(40):
        ids += [s.vision_start, s.image_pad, s.vision_end]
        items.append(MultimodalItem("image", [(len(ids) - 2, 1)], 1, (1, 2, 2)))
    ids.append(s.vision_start)
    for _ in range(2):
        items.append(MultimodalItem("image", [(len(ids), 1)], 1, (1, 2, 2)))
        ids.append(s.image_pad)
    ids += [s.vision_end, 5]
    layout = HandoffLayout(np.asarray(ids, dtype=np.int32), items, s, family=adapter.family,
                           convention=adapter.convention)
    assert layout.token_id_list() == ids
    assert HandoffLayout.from_wire(layout.to_wire()).to_disagg_prefill_inputs()["prompt_token_ids"] == ids
