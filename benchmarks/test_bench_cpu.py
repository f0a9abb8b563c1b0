"""CPU suite: per-request cost of the layer at three prompt sizes, side by side with baselines.

Groups (one table per group in pytest-benchmark's output):
- ``encoder/<case>``: derive the layout from the processor's ids + encode the wire form, vs a naive
  pure-Python derivation (the baseline a careful engineer would write first);
- ``prefill/<case>``: mm-handoff (decode the wire form + validate + TensorRT-LLM prefill inputs) vs
  stock (tokenize the raw prompt + upstream's single-run expansion, as TensorRT-LLM does today);
- ``mrope/<case>``: the adapter's numpy mRoPE vs HF ``get_rope_index`` (bitwise equality checked first).
The wire size vs the embedding payload is recorded in each encoder row's ``extra_info``.
"""

import json

import numpy as np
import pytest
from cases import CASES, RAW_IDS, RAW_TEXT, ROUNDS, expanded, hf_rope_index, payload_bytes
from oracles import derive_layout_naive

from mm_handoff import HandoffLayout, validate

NAMES = list(CASES)


def _run(benchmark, fn, name):
    return benchmark.pedantic(fn, rounds=ROUNDS[name], iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("name", NAMES)
def test_encoder_mm_handoff(benchmark, name):
    adapter, ids, layout = expanded(name)
    grid = [CASES[name].grid]
    benchmark.group = f"encoder/{name}"
    benchmark.extra_info.update(tokens=int(len(ids)), groups=CASES[name].grid[0], role="mm-handoff")

    def encode():
        lay = adapter.derive_layout(ids, video_grid_thw=grid, mrope=False)
        return json.dumps(lay.to_wire())

    text = _run(benchmark, encode, name)
    benchmark.extra_info.update(wire_bytes=len(text), payload_bytes=payload_bytes(layout),
                                wire_fraction=len(text) / payload_bytes(layout))


@pytest.mark.parametrize("name", NAMES)
def test_encoder_naive_python(benchmark, name):
    adapter, ids, _ = expanded(name)
    id_list = ids.tolist()
    grid = [CASES[name].grid]
    benchmark.group = f"encoder/{name}"
    benchmark.extra_info.update(tokens=len(id_list), role="baseline")
    rounds = {"720p40": 20, "768f-official": 10, "768f-720p": 2}[name]
    benchmark.pedantic(lambda: derive_layout_naive(id_list, adapter.spec, video_grid_thw=grid, family="qwen3_vl",
                                                   convention="pad_only"), rounds=rounds, iterations=1)


@pytest.mark.parametrize("name", NAMES)
def test_prefill_mm_handoff(benchmark, name):
    adapter, ids, layout = expanded(name)
    text = json.dumps(layout.to_wire())
    rows = layout.num_pads
    mrope_shape = (3, 1, layout.prompt_len)  # the encoder's handle carries its tensor_size
    benchmark.group = f"prefill/{name}"
    benchmark.extra_info.update(tokens=int(len(ids)), role="mm-handoff")

    def prefill():
        lay = HandoffLayout.from_wire(text)
        validate(lay, mrope_position_ids=mrope_shape, embedding_rows=rows)
        return lay.to_disagg_prefill_inputs()

    out = _run(benchmark, prefill, name)
    assert out["prompt_token_ids"] == ids.tolist()


@pytest.mark.parametrize("name", NAMES)
def test_prefill_mm_handoff_dataclass(benchmark, name):
    """The same, plus building TensorRT-LLM's ``DisaggPrefillMultimodalInputs`` (its per-id checks), as
    the glue's prefill hook returns it: comparable row for row with the stock path below."""
    from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs

    adapter, ids, layout = expanded(name)
    text = json.dumps(layout.to_wire())
    rows = layout.num_pads
    mrope_shape = (3, 1, layout.prompt_len)
    benchmark.group = f"prefill/{name}"
    benchmark.extra_info.update(role="mm-handoff")

    def prefill():
        lay = HandoffLayout.from_wire(text)
        validate(lay, mrope_position_ids=mrope_shape, embedding_rows=rows)
        return DisaggPrefillMultimodalInputs(**lay.to_disagg_prefill_inputs())

    assert _run(benchmark, prefill, name).prompt_token_ids == ids.tolist()


@pytest.mark.parametrize("name", NAMES)
def test_prefill_dataclass_alone(benchmark, name):
    """The floor of any exact prefill through TensorRT-LLM's dataclass: building it from the correct
    layout's kwargs, computed beforehand (its ``__post_init__`` checks every id in Python, so it grows
    with the prompt, which timestamps and per-group markers make longer than the stock one)."""
    from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs

    adapter, ids, layout = expanded(name)
    kwargs = layout.to_disagg_prefill_inputs()
    benchmark.group = f"prefill/{name}"
    benchmark.extra_info.update(tokens=int(len(ids)), role="floor")
    assert _run(benchmark, lambda: DisaggPrefillMultimodalInputs(**kwargs), name).prompt_token_ids == ids.tolist()


@pytest.mark.parametrize("name", NAMES)
def test_prefill_stock_trtllm(benchmark, name):
    from stock_baseline import stock_prefill
    from tensorrt_llm._torch.models.modeling_qwen3vl import _expand_prompt_token_ids_for_mm_handoff

    from mm_handoff.hf.tokenizers import load_tokenizer

    adapter, ids, layout = expanded(name)
    tok = load_tokenizer("qwen3", shared=True)
    handles = [{"tensor_size": [layout.num_pads, 16384]}]
    s = adapter.spec
    benchmark.group = f"prefill/{name}"
    benchmark.extra_info.update(role="baseline")

    def stock():
        return stock_prefill(tok, RAW_TEXT, handles, image_pad=s.image_pad, video_pad=s.video_pad,
                             vision_start=s.vision_start)

    # the emulation builds exactly what the stand-in of upstream's function builds
    reference = _expand_prompt_token_ids_for_mm_handoff(tok(RAW_TEXT, return_tensors="np").input_ids[0], handles,
                                                        image_token_id=s.image_pad, video_token_id=s.video_pad,
                                                        vision_start_token_id=s.vision_start)
    out = _run(benchmark, stock, name)
    assert vars(out) == vars(reference)
    assert len(out.prompt_token_ids) == len(RAW_IDS) - 1 + layout.num_pads  # one run, no timestamps
    benchmark.extra_info.update(tokens=len(out.prompt_token_ids))


@pytest.mark.parametrize("name", NAMES)
def test_mrope_mm_handoff(benchmark, name):
    adapter, ids, _ = expanded(name)
    grid = [CASES[name].grid]
    benchmark.group = f"mrope/{name}"
    benchmark.extra_info.update(tokens=int(len(ids)), role="mm-handoff")
    _check_bitwise(adapter, ids, grid)
    _run(benchmark, lambda: adapter.mrope_positions(ids, video_grid_thw=grid), name)


@pytest.mark.parametrize("name", NAMES)
def test_mrope_hf_get_rope_index(benchmark, name):
    import torch

    adapter, ids, _ = expanded(name)
    rope = hf_rope_index()
    input_ids = torch.from_numpy(ids.astype(np.int64))[None]
    types_ = (input_ids == adapter.spec.video_pad).int() * 2
    grid = torch.tensor([CASES[name].grid])
    benchmark.group = f"mrope/{name}"
    benchmark.extra_info.update(role="baseline")
    rounds = {"720p40": 50, "768f-official": 10, "768f-720p": 5}[name]
    torch.set_num_threads(1)
    benchmark.pedantic(lambda: rope(input_ids, types_, video_grid_thw=grid.clone()), rounds=rounds, iterations=1,
                       warmup_rounds=1)


def _check_bitwise(adapter, ids, grid):
    import torch

    rope = hf_rope_index()
    input_ids = torch.from_numpy(ids.astype(np.int64))[None]
    hf_pos, hf_delta = rope(input_ids, (input_ids == adapter.spec.video_pad).int() * 2,
                            video_grid_thw=torch.tensor(grid))
    pos, delta = adapter.mrope_positions(ids, video_grid_thw=grid)
    assert torch.equal(hf_pos[:, 0, :], torch.from_numpy(np.array(pos))) and hf_pos.dtype == torch.int64
    assert int(hf_delta) == delta


@pytest.mark.parametrize("name", NAMES)
def test_roundtrip_mm_handoff(benchmark, name):
    """Derivation + validation + wire round trip (encode, JSON, decode): one request's whole layer."""
    adapter, ids, layout = expanded(name)
    grid = [CASES[name].grid]
    rows = layout.num_pads
    benchmark.group = f"roundtrip/{name}"
    benchmark.extra_info.update(tokens=int(len(ids)), role="mm-handoff")

    def roundtrip():
        lay = adapter.derive_layout(ids, video_grid_thw=grid, mrope=False)
        validate(lay, embedding_rows=rows)
        back = HandoffLayout.from_wire(json.dumps(lay.to_wire()))
        return validate(back, mrope_position_ids=(3, 1, back.prompt_len), embedding_rows=rows)

    assert _run(benchmark, roundtrip, name) == layout.without_mrope().with_mrope(None, None)


@pytest.mark.parametrize("name", NAMES)
def test_roundtrip_naive_python(benchmark, name):
    """The same with the naive pure-Python derivation in place of the numpy one."""
    adapter, ids, layout = expanded(name)
    id_list = ids.tolist()
    grid = [CASES[name].grid]
    rows = layout.num_pads
    benchmark.group = f"roundtrip/{name}"
    benchmark.extra_info.update(role="baseline")
    rounds = {"720p40": 20, "768f-official": 10, "768f-720p": 2}[name]

    def roundtrip():
        lay = derive_layout_naive(id_list, adapter.spec, video_grid_thw=grid, family="qwen3_vl", convention="pad_only",
                                  tokenizer_digest=adapter.tokenizer_digest)
        validate(lay, embedding_rows=rows)
        back = HandoffLayout.from_wire(json.dumps(lay.to_wire()))
        return validate(back, mrope_position_ids=(3, 1, back.prompt_len), embedding_rows=rows)

    benchmark.pedantic(roundtrip, rounds=rounds, iterations=1)
