"""The engine's id list (``token_id_list``, TensorRT-LLM's ``prompt_token_ids``) is the ids, exactly,
whatever the mix of pad runs and text: one fill of the commonest pad, the other ids put between."""

from __future__ import annotations

from handoff_strategies import TEXT_IDS, make_adapter, video_metadata
from hypothesis import event, given, settings
from hypothesis import strategies as st


@st.composite
def long_prompts(draw):
    """Prompts of a few hundred to a few thousand ids: images and videos with text between them."""
    adapter = make_adapter(draw(st.sampled_from(["qwen3_vl", "qwen3_5"])), "pad_only")
    s, m = adapter.spec, adapter.spec.merge_size
    raw = draw(st.lists(TEXT_IDS, min_size=0, max_size=300))
    images, videos, metas = [], [], []
    for _ in range(draw(st.integers(1, 5))):
        raw += [s.vision_start]
        if draw(st.booleans()):
            raw += [s.image_pad]
            images.append((1, m * draw(st.integers(1, 12)), m * draw(st.integers(1, 12))))
        else:
            raw += [s.video_pad]
            frames = draw(st.integers(1, 24))
            t = -(-frames // s.temporal_patch_size)
            videos.append((t, m * draw(st.integers(1, 6)), m * draw(st.integers(1, 6))))
            metas.append(draw(video_metadata(frames)))
        raw += [s.vision_end] + draw(st.lists(TEXT_IDS, min_size=0, max_size=40))
    ids = adapter.rebuild_token_ids(raw, image_grid_thw=images, video_grid_thw=videos, video_metadata=metas)
    return adapter.derive_layout(ids, image_grid_thw=images, video_grid_thw=videos, mrope=False)


@settings(max_examples=300, deadline=None)
@given(long_prompts())
def test_the_id_list_is_the_ids(layout):
    expected = layout.token_ids.tolist()
    runs = len(layout.run_positions)
    event("fill path" if layout.prompt_len >= 256 and (runs + 1) * 16 <= layout.prompt_len else "tolist path")
    assert layout.token_id_list() == expected
    assert layout.to_disagg_prefill_inputs()["prompt_token_ids"] == expected
    assert all(type(v) is int for v in layout.token_id_list())
