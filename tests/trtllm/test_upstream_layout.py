"""Upstream's own carried layout (``DisaggregatedParams.multimodal_layout``) read and judged as a HandoffLayout.

The carried value here has the fields of upstream's ``DisaggPrefillMultimodalInputs`` (the
``yechank-nvidia/TensorRT-LLM`` fork, ``inputs/multimodal.py`` @ ae56b100), filled from the stand-in
encoder's real output. ``make conformance`` runs the same on upstream's own files (``test_upstream_carrier.py``).
"""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from trtllm_helpers import PROMPT, video_request

import mm_handoff.trtllm as glue
from mm_handoff.errors import HandoffError, LayoutError
from mm_handoff.layout import HandoffLayout
from mm_handoff.trtllm._carrier import adapter_for, disagg_prefill_inputs, encoder_token_lengths
from mm_handoff.trtllm._upstream_layout import check_upstream_layout, embed_mask_cumsum, read_upstream_layout


@pytest.fixture
def handoff(deployment):
    """(adapter, the encoder's layout, its handles, the request's own prompt ids) from the stand-in encoder
    with mm-handoff installed."""
    glue.install(policy="raise")
    dep = deployment()
    out = dep.encoder.generate_async(video_request()).result()
    handles = out.disaggregated_params.multimodal_embedding_handles
    layout = HandoffLayout.from_wire(handles[0][glue.LAYOUT_KEY])
    own_prompt = np.asarray(dep.tokenizer(PROMPT, return_tensors="np").input_ids[0])  # this request's own
    return adapter_for(dep.pd.input_processor), layout, handles, own_prompt


def _carried(layout, **changes):
    """What upstream's encoder carries for ``layout`` (every field of the fork's dataclass)."""
    fields = dict(layout.to_disagg_prefill_inputs(), encoder_token_lengths=encoder_token_lengths(layout),
                  multimodal_embed_mask_cumsum=embed_mask_cumsum(layout))
    fields.update(changes)
    return SimpleNamespace(**fields)


def _without_stamp(handles):
    return [{k: v for k, v in h.items() if not k.startswith("mm_handoff.")} for h in handles]


@pytest.mark.parametrize("stamped", [True, False], ids=["grids-carried", "grids-spelled-by-runs"])
def test_an_honest_carried_layout_reads_as_the_encoders_layout(handoff, stamped):
    adapter, layout, handles, own_prompt = handoff
    handles = handles if stamped else _without_stamp(handles)
    read = read_upstream_layout(_carried(layout), adapter, mm_handles=handles)
    assert read.token_ids.tolist() == layout.token_ids.tolist()
    assert read.to_disagg_prefill_inputs() == layout.to_disagg_prefill_inputs()
    assert [item.grid_thw[0] for item in read.items] == [item.grid_thw[0] for item in layout.items]
    params = SimpleNamespace(multimodal_embedding_handles=handles, mrope_position_ids_handle=None)
    accepted = check_upstream_layout(_carried(layout), adapter, disaggregated_params=params,
                                     prompt_token_ids=layout.token_ids.tolist(), own_prompt_ids=own_prompt,
                                     mrope_position_ids=(3, 1, layout.prompt_len))
    assert accepted.token_ids.tolist() == layout.token_ids.tolist()


@pytest.mark.parametrize("stamped", [True, False], ids=["grids-carried", "grids-spelled-by-runs"])
def test_a_stale_encoders_one_run_video_is_refused(handoff, stamped):
    """The stock prompt (one pad run per video, no timestamps) carried as if it were the encoder's."""
    adapter, layout, handles, own_prompt = handoff
    video = [item.grid_thw for item in layout.items if item.modality == "video"]
    stock = adapter.stock_token_ids(own_prompt, video_grid_thw=video).tolist()
    pads = [i for i, t in enumerate(stock) if t == adapter.spec.video_pad]
    stale = SimpleNamespace(prompt_token_ids=stock, multimodal_positions=[pads[0]], multimodal_lengths=[len(pads)],
                            multimodal_embedding_lengths=[len(pads)], multimodal_item_run_cu_offsets=[0, 1],
                            multimodal_run_positions=[pads[0]], multimodal_run_lengths=[len(pads)])
    with pytest.raises(HandoffError) as info:
        read_upstream_layout(stale, adapter, mm_handles=handles if stamped else _without_stamp(handles),
                             request_id="r-stale")
    assert "r-stale" in str(info.value)
    if not stamped:  # nothing to compare the grid with: the family's stamps say it
        assert "multimodal_layout.items[0].timestamps" in str(info.value)


@pytest.mark.parametrize("field", ["multimodal_embed_mask_cumsum", "multimodal_run_lengths", "item_types",
                                   "multimodal_positions", "encoder_token_lengths"])
def test_a_carried_field_that_contradicts_its_ids_is_refused(handoff, field):
    adapter, layout, handles, _ = handoff
    honest = _carried(layout)
    value = getattr(honest, field)
    if field == "multimodal_embed_mask_cumsum":
        value = value.clone()
        value[int(np.flatnonzero(np.diff(value.numpy(), prepend=0))[0])] -= 1
    elif field == "multimodal_run_lengths":
        value = [value[0] + 1, value[1] - 1, *value[2:]]
    elif field == "item_types":
        value = [0] * len(value)
    elif field == "multimodal_positions":
        value = [value[0] + 1, *value[1:]]
    else:
        value = [*value, 7]
    with pytest.raises(LayoutError, match=f"multimodal_layout.{field}"):
        read_upstream_layout(_carried(layout, **{field: value}), adapter, mm_handles=handles)


def test_the_prompt_upstream_runs_must_be_the_carried_one(handoff):
    adapter, layout, handles, _ = handoff
    params = SimpleNamespace(multimodal_embedding_handles=handles, mrope_position_ids_handle=None)
    with pytest.raises(LayoutError, match="prompt_token_ids"):
        check_upstream_layout(_carried(layout), adapter, disaggregated_params=params,
                              prompt_token_ids=layout.token_ids.tolist()[:-1])


def test_the_newer_fields_are_filled_where_the_dataclass_has_them(handoff):
    """``to_disagg_prefill_inputs()`` adapted to the installed dataclass: the fork's fields filled, an older
    dataclass (the stand-in's, as NVIDIA main) given none of them."""
    import torch
    from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs as Older

    _, layout, _, _ = handoff

    @dataclasses.dataclass
    class Newer(Older):
        encoder_token_lengths: list | None = None
        multimodal_embed_mask_cumsum: torch.Tensor | None = None

    newer = disagg_prefill_inputs(layout, Newer)
    assert newer.encoder_token_lengths == [int(np.prod(i.grid_thw)) for i in layout.items]
    cumsum = newer.multimodal_embed_mask_cumsum
    assert cumsum.dtype == torch.int64 and cumsum.device.type == "cpu" and cumsum.shape == (layout.prompt_len,)
    assert int(cumsum[-1]) == sum(layout.multimodal_embedding_lengths)
    older = disagg_prefill_inputs(layout, Older)
    assert not hasattr(older, "encoder_token_lengths")
