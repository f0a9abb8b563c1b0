"""Derivation from expanded ids: vectorised == naive reference, and the known worked values."""

import numpy as np
import pytest
from handoff_strategies import prompts
from hypothesis import given
from hypothesis import strategies as st
from oracles import derive_layout_naive

from mm_handoff import HandoffError, get_adapter
from mm_handoff.errors import GridMismatchError
from mm_handoff.layout import derive_layout

QWEN_RAW = [151644, 872, 198, 151652, 151656, 151653, 74785, 419, 2766, 13, 151645, 198, 151644, 77091, 198]
META_720P40 = {"fps": 24.0, "frames_indices": list(range(40)), "total_num_frames": 40}


@given(prompts())
def test_vectorised_equals_naive(case):
    """The numpy derivation equals the plain-Python one on random prompts of every family."""
    adapter, _, image_grids, video_grids, _, expanded = case
    kw = dict(image_grid_thw=image_grids, video_grid_thw=video_grids, family=adapter.family,
              convention=adapter.convention, tokenizer_digest=adapter.tokenizer_digest)
    fast = derive_layout(expanded, adapter.spec, **kw)
    slow = derive_layout_naive(expanded, adapter.spec, **kw)
    assert fast == slow
    assert fast.fingerprint() == slow.fingerprint()
    for item, grid in zip([i for i in fast.items if i.modality == "video"], video_grids, strict=True):
        assert len(item.runs) == grid[0] and item.timestamps is not None


def test_720p40_layout_values():
    """40 frames at 720p: 12,054 ids, 20 runs of 594 from index 11, HF's timestamps and markers."""
    a = get_adapter("qwen3_vl", )
    ids = a.rebuild_token_ids(QWEN_RAW, video_grid_thw=[[20, 36, 66]], video_metadata=[META_720P40])
    lay = a.derive_layout(ids, video_grid_thw=[[20, 36, 66]])
    assert lay.prompt_len == 12054
    assert lay.run_lengths == [594] * 20 and lay.run_positions[0] == 11
    assert len(lay.vision_start_positions) == 21 and lay.vision_start_positions[0] == 3
    assert lay.vision_end_positions[-1] == 12044
    assert lay.items[0].timestamps == (0.0, 0.1, 0.2, 0.3, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.9, 1.0, 1.1,
                                       1.2, 1.3, 1.4, 1.4, 1.5, 1.6)
    assert lay.items[0].timestamp_spans[0] == (4, 10)
    assert lay.mrope_position_delta == -11220 and int(lay.mrope_position_ids.max()) == 833


def test_stock_single_run_shape_derives_and_is_marked():
    """The stock PD prompt derives to one run per item and no timestamps (validate rejects it)."""
    a = get_adapter("qwen3_vl")
    stock = a.stock_token_ids(QWEN_RAW, video_grid_thw=[[20, 36, 66]])
    lay = a.derive_layout(stock, video_grid_thw=[[20, 36, 66]], mrope=False)
    assert lay.prompt_len == 11894 and lay.run_lengths == [11880] and lay.items[0].timestamps is None


def test_pads_and_grids_must_agree():
    a = get_adapter("qwen3_vl")
    ids = a.stock_token_ids(QWEN_RAW, video_grid_thw=[[20, 36, 66]])
    with pytest.raises(GridMismatchError) as info:
        a.derive_layout(ids, video_grid_thw=[[20, 36, 64]], request_id="req-7")
    assert info.value.request_id == "req-7" and info.value.actual == 11880


def test_adjacent_items_split_like_the_mask_helpers():
    """Two images with touching pads are split by their counts, as TensorRT-LLM does."""
    a = get_adapter("qwen3_vl")
    ids = [1, a.spec.vision_start] + [a.spec.image_pad] * 8 + [a.spec.vision_end]
    lay = a.derive_layout(ids, image_grid_thw=[[1, 2, 8], [1, 4, 4]], mrope=False)
    assert lay.run_positions == [2, 6] and lay.item_run_cu_offsets == [0, 1, 2]
    assert lay.multimodal_lengths == [4, 4]


def test_image_then_video_order_and_types():
    a = get_adapter("qwen3_vl")
    s = a.spec
    raw = [1, s.vision_start, s.image_pad, s.vision_end, 2, s.vision_start, s.video_pad, s.vision_end, 3]
    meta = {"fps": 2.0, "frames_indices": [0, 1, 2, 3], "total_num_frames": 4}
    ids = a.rebuild_token_ids(raw, image_grid_thw=[[1, 2, 2]], video_grid_thw=[[2, 2, 4]], video_metadata=[meta])
    lay = a.derive_layout(ids, image_grid_thw=[[1, 2, 2]], video_grid_thw=[[2, 2, 4]])
    assert lay.item_types == [0, 1] and lay.multimodal_lengths == [1, 4] and lay.item_run_cu_offsets == [0, 1, 3]
    assert np.array_equal(lay.token_ids[:4], [1, s.vision_start, s.image_pad, s.vision_end])


@given(prompts(), st.data())
def test_prompt_check_accepts_its_own_prompt_and_rejects_others(case, data):
    """check_prompt(layout, raw) passes for the prompt the layout came from and fails for a changed one."""
    adapter, raw, image_grids, video_grids, _, expanded = case
    lay = adapter.derive_layout(expanded, image_grid_thw=image_grids, video_grid_thw=video_grids, mrope=False)
    adapter.check_prompt(lay, raw)
    s = adapter.spec
    text_at = [i for i, t in enumerate(raw) if t not in (s.image_pad, s.video_pad, s.vision_start, s.vision_end)]
    other = list(raw)
    k = data.draw(st.sampled_from(text_at))
    other[k] += 1
    with pytest.raises(HandoffError):
        adapter.check_prompt(lay, other)


@pytest.mark.parametrize("text, expected", [("<5.0 seconds>", 5.0), ("<12.3 seconds>", 12.3), ("<0.0 seconds>", 0.0),
                                            ("<5 seconds>", None), ("<12.25 seconds>", None), ("<.5 seconds>", None),
                                            ("<1.2.3 seconds>", None), ("5.0 seconds>", None)])
def test_timestamp_text_is_read_alike_by_the_package_and_the_oracle(text, expected):
    """Only what ':.1f' prints is a timestamp: one dot, one decimal; the fast parser and the oracle agree."""
    a = get_adapter("qwen3_vl")
    s, ts = a.spec, a.spec.timestamps
    char = {str(i): d for i, d in enumerate(ts.digits)}
    char["."] = ts.dot
    inner = text.strip("<>").replace(" seconds", "")
    stamp = ([ts.open] if text.startswith("<") else []) + [char[c] for c in inner] + [ts.seconds, ts.close]
    ids = [1, s.vision_start] + stamp + [s.vision_start] + [s.video_pad] * 4 + [s.vision_end, s.vision_end, 2]
    kw = dict(video_grid_thw=[[1, 4, 4]], family="qwen3_vl", convention="pad_only")
    fast = derive_layout(ids, s, **kw)
    slow = derive_layout_naive(ids, s, **kw)
    got = fast.items[0].timestamps
    assert got == (None if expected is None else (expected,))
    assert slow.items[0].timestamps == got and fast == slow


def test_an_empty_prompt_is_a_layout_error():
    """No ids: the layout's own error, from the derivation as from the constructor (not an IndexError)."""
    from mm_handoff import LayoutError, get_adapter

    with pytest.raises(LayoutError) as info:
        get_adapter("qwen3_vl").derive_layout([])
    assert info.value.field == "token_ids"
