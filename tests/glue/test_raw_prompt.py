"""The prompt before expansion (glue/unexpanded.raw_prompt_ids): what vLLM's embeds path and SGLang's EPD are
handed. It takes a layout or its wire form like every other entry, and refuses a video whose first '<' HF merged
with the text before it (no token-by-token expansion can give those ids)."""

import numpy as np
import pytest

from mm_handoff import get_adapter
from mm_handoff.errors import HandoffError
from mm_handoff.glue.unexpanded import raw_prompt_ids

META = [{"fps": 30.0, "frames_indices": [0, 3, 6, 9]}]


def _layout():
    a = get_adapter("qwen3_vl", convention="pad_only")
    s = a.spec
    raw = [100, 198, s.vision_start, s.video_pad, s.vision_end, 101]
    return a, raw, a.derive_layout(a.rebuild_token_ids(raw, video_grid_thw=[[2, 2, 2]], video_metadata=META),
                                   video_grid_thw=[[2, 2, 2]])


def test_the_wire_form_is_read_like_the_layout():
    _, raw, layout = _layout()
    assert raw_prompt_ids(layout).tolist() == raw
    assert raw_prompt_ids(layout.to_wire()).tolist() == raw


@pytest.mark.parametrize("odd", [None, 42, [1, 2, 3], object(), np.zeros(3)])
def test_anything_else_is_a_typed_error_naming_the_request(odd):
    with pytest.raises(HandoffError) as info:
        raw_prompt_ids(odd, request_id="r9")
    assert info.value.request_id == "r9"


def test_a_merged_first_timestamp_is_refused_by_name():
    a, _, layout = _layout()
    s = a.spec
    ids = layout.token_ids.copy()
    first = int(layout.items[0].span_array[0, 0])
    ids[first] = s.timestamps.open_merged[0]  # 'Ġ<': HF's ids for "... <0.0 seconds>" after a space
    merged = a.derive_layout(ids, video_grid_thw=[[2, 2, 2]])
    assert int(merged.items[0].span_array[0, 0]) == first  # derive reads the merged '<' as the timestamp's
    with pytest.raises(HandoffError, match="merged") as info:
        raw_prompt_ids(merged, request_id="r1")
    assert info.value.request_id == "r1" and "items[0]" in info.value.field
