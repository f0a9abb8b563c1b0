"""The hooks' whole work on the engine's real input types, as multiples of converting the ids at all.

TensorRT-LLM's ``_preprocess`` hands the encoder hook ``prompt_token_ids`` as a Python list, and the
prefill hook receives the encoder's wire form as a plain dict inside the first embedding handle.
Each group (one per prompt size, so its rows come from one run) times, next to each other:

- ``F``: ``np.fromiter(ids, np.int32, count=len(ids))``, converting the same list at all (the unit);
- ``encoder_hook``: list ids + grids -> ``derive_layout`` -> ``to_wire`` -> stamped into a handle
  dict (the core calls ``mm_handoff.trtllm``'s encoder hook makes; the hook's own JSON-safe copy of
  the video metadata is engine glue and not timed);
- ``prefill_hook``: the carried wire dict -> :func:`mm_handoff.accept_layout` (decode, skew, grid,
  per-item rows and row width from the handle dicts, this request's raw prompt, the mRoPE handle's
  length) -> ``DisaggPrefillMultimodalInputs`` keyword arguments; ``prefill_hook_dataclass`` also
  builds TensorRT-LLM's dataclass (the stand-in's, with upstream's per-id checks), and
  ``prefill_stock`` is what TensorRT-LLM does today (``stock_baseline.py``);
- ``mrope_*``: the adapter's ``mrope_positions`` from a list and from an int64 array (what a
  processor returns), and HF ``get_rope_index`` from the same inputs (a list needs ``torch.tensor``
  first); bitwise equality with HF is checked in the set-up.
"""

import numpy as np
import pytest
from cases import CASES, RAW_IDS, RAW_TEXT, ROUNDS, expanded, hf_rope_index
from hooks import LAYOUT_KEY, carried_handles, encoder_hook, prefill_hook

from mm_handoff import HandoffLayout

NAMES = list(CASES)
HF_ROUNDS = {"720p40": 50, "768f-official": 10, "768f-720p": 5}


def _run(benchmark, fn, rounds):
    return benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)


def _inputs(name):
    """(adapter, ids as a list, grids as lists, layout, width of a handle row)."""
    adapter, ids, layout = expanded(name)
    width = adapter.hidden_size * (1 + adapter.deepstack_levels)
    return adapter, ids.tolist(), [list(CASES[name].grid)], layout, width


@pytest.mark.parametrize("group", ["hooks", "mrope-io"])
@pytest.mark.parametrize("name", NAMES)
def test_F_fromiter(benchmark, name, group):
    """The unit: converting the prompt list to an int32 array, timed in each group's run."""
    ids = _inputs(name)[1]
    benchmark.group = f"{group}/{name}"
    benchmark.extra_info.update(tokens=len(ids), role="unit")
    out = _run(benchmark, lambda: np.fromiter(ids, np.int32, count=len(ids)), ROUNDS[name])
    assert out.tolist() == ids


@pytest.mark.parametrize("name", NAMES)
def test_encoder_hook(benchmark, name):
    adapter, ids, grids, layout, width = _inputs(name)
    benchmark.group = f"hooks/{name}"
    benchmark.extra_info.update(tokens=len(ids), groups=CASES[name].grid[0], role="mm-handoff")
    handle = _run(benchmark, lambda: encoder_hook(adapter, ids, {"video_grid_thw": grids}, width), ROUNDS[name])
    assert HandoffLayout.from_wire(handle[LAYOUT_KEY]) == layout.with_mrope(None, None)  # no mRoPE shipped


def _prefill(adapter, handles, n):
    return prefill_hook(adapter, handles, RAW_IDS, n)


@pytest.mark.parametrize("name", NAMES)
def test_prefill_hook(benchmark, name):
    adapter, ids, _, layout, width = _inputs(name)
    handles = carried_handles(layout, width)
    benchmark.group = f"hooks/{name}"
    benchmark.extra_info.update(tokens=len(ids), role="mm-handoff")
    out = _run(benchmark, lambda: _prefill(adapter, handles, len(ids)), ROUNDS[name])
    assert out["prompt_token_ids"] == ids and out["multimodal_run_lengths"] == layout.run_lengths


@pytest.mark.parametrize("name", NAMES)
def test_prefill_hook_dataclass(benchmark, name):
    from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs

    adapter, ids, _, layout, width = _inputs(name)
    handles = carried_handles(layout, width)
    benchmark.group = f"hooks/{name}"
    benchmark.extra_info.update(role="mm-handoff")
    out = _run(benchmark, lambda: DisaggPrefillMultimodalInputs(**_prefill(adapter, handles, len(ids))), ROUNDS[name])
    assert out.prompt_token_ids == ids


@pytest.mark.parametrize("name", NAMES)
def test_prefill_stock(benchmark, name):
    from stock_baseline import stock_prefill

    from mm_handoff.hf.tokenizers import load_tokenizer

    adapter, _, _, layout, width = _inputs(name)
    tok = load_tokenizer("qwen3", shared=True)
    handles = [{"tensor_size": [layout.num_pads, width]}]
    s = adapter.spec
    benchmark.group = f"hooks/{name}"
    benchmark.extra_info.update(role="baseline")
    out = _run(benchmark, lambda: stock_prefill(tok, RAW_TEXT, handles, image_pad=s.image_pad, video_pad=s.video_pad,
                                                vision_start=s.vision_start), ROUNDS[name])
    assert len(out.prompt_token_ids) == len(RAW_IDS) - 1 + layout.num_pads


def _hf_inputs(adapter, ids_list):
    import torch

    input_ids = torch.tensor([ids_list])
    return input_ids, (input_ids == adapter.spec.video_pad).int() * 2


@pytest.mark.parametrize("source", ["list", "array"])
@pytest.mark.parametrize("name", NAMES)
def test_mrope_ours(benchmark, name, source):
    import torch

    adapter, ids, grids, _, _ = _inputs(name)
    given = ids if source == "list" else np.asarray(ids, dtype=np.int64)
    rope = hf_rope_index()
    input_ids, types_ = _hf_inputs(adapter, ids)
    hf_pos, hf_delta = rope(input_ids, types_, video_grid_thw=torch.tensor(grids))
    pos, delta = adapter.mrope_positions(given, video_grid_thw=grids)
    assert torch.equal(hf_pos[:, 0, :], torch.from_numpy(np.array(pos))) and int(hf_delta) == delta
    benchmark.group = f"mrope-io/{name}"
    benchmark.extra_info.update(tokens=len(ids), role="mm-handoff")
    _run(benchmark, lambda: adapter.mrope_positions(given, video_grid_thw=grids), ROUNDS[name])


@pytest.mark.parametrize("source", ["list", "array"])
@pytest.mark.parametrize("name", NAMES)
def test_mrope_hf(benchmark, name, source):
    import torch

    adapter, ids, grids, _, _ = _inputs(name)
    rope = hf_rope_index()
    input_ids, types_ = _hf_inputs(adapter, ids)
    grid = torch.tensor(grids)
    benchmark.group = f"mrope-io/{name}"
    benchmark.extra_info.update(role="baseline")
    torch.set_num_threads(1)
    if source == "list":
        fn = lambda: rope(torch.tensor([ids]), types_, video_grid_thw=grid.clone())  # noqa: E731
    else:
        fn = lambda: rope(input_ids, types_, video_grid_thw=grid.clone())  # noqa: E731
    _run(benchmark, fn, HF_ROUNDS[name])
