"""The numpy mRoPE equals HF ``get_rope_index`` bitwise on random prompts of every layout family."""

import types

import numpy as np
import pytest
from handoff_strategies import prompts
from hypothesis import given, settings

torch = pytest.importorskip("torch")
modeling = pytest.importorskip("transformers.models.qwen3_vl.modeling_qwen3_vl")


def hf_rope_index(merge: int):
    vision = types.SimpleNamespace(spatial_merge_size=merge)
    ns = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=vision))
    ns.get_vision_position_ids = modeling.Qwen3VLModel.get_vision_position_ids.__get__(ns)
    return modeling.Qwen3VLModel.get_rope_index.__get__(ns)


@settings(max_examples=500)
@given(prompts(max_items=4))
def test_numpy_mrope_equals_hf(case):
    adapter, _, image_grids, video_grids, _, expanded = case
    s = adapter.spec
    ids = torch.from_numpy(np.asarray(expanded, dtype=np.int64))[None]
    types_ = (ids == s.image_pad).int() + 2 * (ids == s.video_pad).int()
    hf_pos, hf_delta = hf_rope_index(s.merge_size)(
        ids, types_, image_grid_thw=torch.tensor(image_grids) if image_grids else None,
        video_grid_thw=torch.tensor(video_grids) if video_grids else None)
    pos, delta = adapter.mrope_positions(expanded, image_grid_thw=image_grids, video_grid_thw=video_grids)
    assert hf_pos.dtype == torch.int64 and pos.dtype == np.int64
    assert np.array_equal(hf_pos[:, 0, :].numpy(), pos)
    assert int(hf_delta) == delta
