"""The two hooks' core work as the TensorRT-LLM glue does it, from what the engine passes: a Python
list of ids and the grids at the encoder, the carried wire dict inside the first embedding handle at
the prefill side. Shared by the hooks' and the scale benchmarks."""

from __future__ import annotations

import json

from mm_handoff import accept_layout

LAYOUT_KEY, GRIDS_KEY = "mm_handoff.layout", "mm_handoff.grids"  # the keys the glue attaches (docs/trtllm.md)


def encoder_hook(adapter, ids: list, grids: dict, width: int) -> dict:
    """ids -> ``derive_layout`` -> ``to_wire`` -> stamped into the first handle dict (no mRoPE shipped)."""
    lay = adapter.derive_layout(ids, mrope=False, **grids)
    handle = {"tensor_size": [lay.num_pads, width]}
    carried = {GRIDS_KEY: {"family": adapter.family, "convention": adapter.convention,
                         "image_grid_thw": grids.get("image_grid_thw"), "video_grid_thw": grids.get("video_grid_thw")},
             LAYOUT_KEY: lay.to_wire()}
    for key, value in carried.items():
        handle.setdefault(key, value)
    return handle


def carried_handles(layout, width: int) -> list:
    """The prefill side's handles: one per item, the first carrying the encoder's keys (as JSON made it)."""
    carried = json.loads(json.dumps({LAYOUT_KEY: layout.to_wire()}))
    handles = [{"tensor_size": [n, width]} for n in layout.multimodal_embedding_lengths]
    handles[0].update(carried)
    return handles


def prefill_hook(adapter, handles: list, raw_ids: list, n: int) -> dict:
    """The carried keys -> ``accept_layout`` (every check, this request's raw prompt, the mRoPE handle's
    length) -> ``DisaggPrefillMultimodalInputs`` keyword arguments."""
    layout = accept_layout(handles[0][LAYOUT_KEY], adapter, embeddings=handles, prompt_token_ids=raw_ids,
                           mrope_position_ids={"tensor_size": [3, 1, n]})
    return layout.to_disagg_prefill_inputs()
