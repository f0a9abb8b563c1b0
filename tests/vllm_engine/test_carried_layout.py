"""A carried layout needs the check where vLLM runs its processor (issue 33): without it vLLM failed on its own,
``TypeError: unhashable type: 'dict'``, with no hint. ``EmbedsRequest.prompt(carry_layout=True)`` now installs the
check when ``MM_HANDOFF_VLLM_CHECK`` is on, and otherwise refuses, typed, saying what to do. No engine is started."""

import pytest

pytest.importorskip("vllm")

import mm_handoff
import mm_handoff.vllm as glue
from mm_handoff import _env

# the Qwen3 tokenizer's ids of "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this
# video.<|im_end|>\n<|im_start|>assistant\n"
PROMPT = [151644, 872, 198, 151652, 151656, 151653, 74785, 419, 2766, 13, 151645, 198, 151644, 77091, 198]
GRID = [[2, 4, 6]]
METADATA = [{"fps": 24.0, "frames_indices": [0, 1, 2, 3], "total_num_frames": 4}]


@pytest.fixture
def request_():
    import torch

    adapter = mm_handoff.get_adapter("qwen3_vl")
    ids = adapter.rebuild_token_ids(PROMPT, video_grid_thw=GRID, video_metadata=METADATA)
    layout = adapter.derive_layout(ids, video_grid_thw=GRID)
    embeddings = [torch.zeros(layout.num_pads, adapter.handle_row_width)]
    glue.uninstall()
    yield glue.embeds_request(layout, embeddings, adapter, video_metadata=METADATA, request_id="req-7")
    glue.uninstall()


def test_without_the_check_a_carried_layout_is_refused_saying_what_to_do(request_, monkeypatch):
    monkeypatch.delenv(_env.VLLM_CHECK, raising=False)
    with pytest.raises(mm_handoff.HandoffError) as err:
        request_.prompt(carry_layout=True)
    message = str(err.value)
    assert err.value.request_id == "req-7" and glue.LAYOUT_KWARG in err.value.field
    assert "mm_handoff.vllm.install()" in message and "MM_HANDOFF_VLLM_CHECK=1" in message
    assert not glue.is_installed()
    assert "mm_processor_kwargs" not in request_.prompt()  # without the layout: as before


def test_with_the_switch_on_the_check_is_installed_here(request_, monkeypatch):
    monkeypatch.setenv(_env.VLLM_CHECK, "1")
    prompt = request_.prompt(carry_layout=True)
    assert glue.is_installed()
    assert mm_handoff.HandoffLayout.from_wire(prompt["mm_processor_kwargs"][glue.LAYOUT_KWARG]) == request_.layout


def test_with_the_check_installed_the_layout_is_carried(request_, monkeypatch):
    monkeypatch.setenv(_env.VLLM_CHECK, "0")
    glue.install()
    prompt = request_.prompt(carry_layout=True)
    assert prompt["mm_processor_kwargs"][glue.LAYOUT_KWARG] == request_.layout.to_wire()
    assert prompt["prompt_token_ids"] == PROMPT
