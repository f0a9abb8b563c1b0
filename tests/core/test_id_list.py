"""The engine's id list (``token_id_list``, TensorRT-LLM's ``prompt_token_ids``) is the ids, exactly,
whatever the mix of pad runs and text: one fill of the commonest pad, the other ids put between."""

from __future__ import annotations

from handoff_strategies import prompts
from hypothesis import event, given, settings

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
