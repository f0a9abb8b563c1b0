"""mm_handoff.vllm's checks on a vLLM-shaped output, without vLLM (the engine suite runs them on the real one)."""

from types import SimpleNamespace

import pytest

from mm_handoff import get_adapter
from mm_handoff.errors import EmbeddingCountError, TokenMismatchError
from mm_handoff.vllm import check_output

RAW = [151644, 872, 198, 151652, 151656, 151653, 74785, 13, 151645, 198]
GRID = [4, 4, 6]  # two temporal groups of 6 pads


@pytest.fixture(scope="module")
def handoff():
    adapter = get_adapter("qwen3_vl")
    meta = {"fps": 2.0, "frames_indices": list(range(8)), "total_num_frames": 8}
    ids = adapter.rebuild_token_ids(RAW, video_grid_thw=[GRID], video_metadata=[meta])
    return adapter, adapter.derive_layout(ids, video_grid_thw=[GRID])


def test_equal_expansion_passes_and_rows_are_checked_when_given(handoff):
    adapter, layout = handoff
    out = SimpleNamespace(prompt_token_ids=layout.token_ids.tolist(), request_id="r1")
    width = adapter.handle_row_width
    assert check_output(out, layout.to_wire(), adapter, embeddings=[(layout.num_pads, width)]) == layout
    with pytest.raises(EmbeddingCountError) as info:
        check_output(out, layout.to_wire(), adapter, embeddings=[(layout.num_pads - 1, width)])
    assert info.value.request_id == "r1"


def test_an_expansion_that_differs_names_the_first_index(handoff):
    adapter, layout = handoff
    ids = layout.token_ids.tolist()
    ids[7] = 13
    with pytest.raises(TokenMismatchError) as info:
        check_output(SimpleNamespace(prompt_token_ids=ids, request_id="r2"), layout, adapter)
    assert info.value.index == 7 and info.value.request_id == "r2"
