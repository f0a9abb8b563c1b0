"""Upstream's carrier (``DisaggregatedParams.multimodal_layout``, ``validate`` mode) read as strictly as the wire.

Every carried field lying, mistyped, huge or a broadcast view: each ends in a typed HandoffError that names
its field and prints within 1,000 characters, within 100 MiB (``adversary.answer``), or, where the change is
no change at all (an integral float, an integer tensor of the same values, an optional field left out), in
the honest layout. Every field is held to what its ids give (``encoder_token_lengths`` per item: ``t*h*w``;
no ``special_token_offsets``); every entry takes ``limits=``. Without TensorRT-LLM: the carrier is a plain
object with the fields of the fork's ``DisaggPrefillMultimodalInputs`` (``inputs/multimodal.py`` @ ae56b100).
"""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from adversary import answer, refused
from handoff_strategies import prompts
from hypothesis import given, settings
from hypothesis import strategies as st

from mm_handoff import Limits, get_adapter
from mm_handoff.errors import HandoffError
from mm_handoff.layout import HandoffLayout
from mm_handoff.trtllm._carrier import GRIDS_KEY, embed_mask_cumsum, encoder_token_lengths
from mm_handoff.trtllm._upstream_layout import check_upstream_layout, read_upstream_layout

COLUMNS = ("multimodal_positions", "multimodal_lengths", "multimodal_embedding_lengths",
           "multimodal_item_run_cu_offsets", "multimodal_run_positions", "multimodal_run_lengths", "item_types",
           "encoder_token_lengths")
FIELDS = ("prompt_token_ids", *COLUMNS, "special_token_offsets", "multimodal_embed_mask_cumsum")
#: more ids than the default limits admit, claimed by an 8-byte view
BROADCAST = 4_194_304


def carrier_fields(layout: HandoffLayout) -> dict:
    """What upstream's encoder carries for ``layout`` (every field of the fork's dataclass)."""
    return dict(layout.to_disagg_prefill_inputs(), encoder_token_lengths=encoder_token_lengths(layout),
                multimodal_embed_mask_cumsum=embed_mask_cumsum(layout))


def _read(fields, adapter, **kwargs):
    return read_upstream_layout(SimpleNamespace(**fields), adapter, **kwargs)


def _same(a: HandoffLayout, b: HandoffLayout) -> bool:
    return a.token_ids.tolist() == b.token_ids.tolist() and a.to_disagg_prefill_inputs() == b.to_disagg_prefill_inputs()


# ---------------------------------------------------------------------------------- the mutations
def _lie_list(draw, value: list, name: str) -> list:
    """A plain-int list that says something else."""
    v = list(value)
    kinds = ["append", "replace"] if v else ["append"]
    if v:
        kinds.append("drop")
    kind = draw(st.sampled_from(kinds))
    if kind == "append":
        return v + [draw(st.integers(0, 64))]
    if kind == "drop":
        return v[:-1]
    i = draw(st.integers(0, len(v) - 1))
    new = draw(st.one_of(st.integers(0, 4 * (v[i] + 1)), st.sampled_from([1, 10**9, max(v[i] // 4, 0)]))
               .filter(lambda x: x != v[i]))
    v[i] = new
    return v


_ODD_VALUES = ("float", "str", "bool", "none", "nested", "complex")
_HUGE_VALUES = (float("inf"), float("-inf"), float("nan"), 2**70, -(2**70), 10**30, -1, 2**63)


def _odd(value: int, kind: str):
    return {"float": value + 0.9, "str": str(value), "bool": bool(value % 2), "none": None, "nested": [value],
            "complex": complex(value, 1)}[kind]


@st.composite
def corrupted(draw):
    """``(adapter, honest layout, honest fields, field, changed fields, must refuse)``."""
    adapter, _, images, videos, _, expanded = draw(prompts("qwen3_vl", max_items=2))
    layout = adapter.derive_layout(expanded, image_grid_thw=images or None, video_grid_thw=videos or None,
                                   mrope=False)
    honest = carrier_fields(layout)
    name = draw(st.sampled_from(FIELDS))
    kind = draw(st.sampled_from(["lie", "mistype", "huge", "broadcast", "same"]))
    value = honest[name]
    plain = list(value.tolist() if hasattr(value, "tolist") else value or [])
    must = True
    if kind == "same":  # no change: an integral float list, an integer tensor of the values, or left out
        how = draw(st.sampled_from(["floats", "tensor", "array", "absent"]))
        must = how == "absent" and name in ("prompt_token_ids", "multimodal_positions", "multimodal_lengths",
                                            "multimodal_embedding_lengths")
        if how == "absent" and name.startswith("multimodal_") and "run" in name:
            must = True  # one run column without the other two
        new = {"floats": [float(x) for x in plain], "tensor": torch.tensor(plain, dtype=torch.int64),
               "array": np.asarray(plain, dtype=np.int64), "absent": None}[how]
        if how == "floats" and name == "prompt_token_ids":
            must = True  # a float is never read as an id
        if how != "absent" and name == "special_token_offsets":
            new, must = value, False
    elif kind == "lie":
        if name == "special_token_offsets":
            new = draw(st.sampled_from([[0], [1], [0, 3]]))
        elif name == "prompt_token_ids":  # (another text is another request's prompt: check_own_request's)
            pads = [i for i, t in enumerate(plain) if t in (adapter.spec.image_pad, adapter.spec.video_pad)]
            how = draw(st.sampled_from(["append", "drop", "pad"] if pads else ["append", "drop"]))
            new = plain + [100] if how == "append" else plain[:-1] if how == "drop" else list(plain)
            if how == "pad":
                new[draw(st.sampled_from(pads))] = 100
        elif name == "multimodal_embed_mask_cumsum":
            new = _lie_list(draw, plain, name)
            new = torch.tensor(new, dtype=torch.int64) if draw(st.booleans()) else new
        else:
            new = _lie_list(draw, plain, name)
    elif kind == "mistype":
        if plain and draw(st.booleans()):
            new = list(plain)
            i = draw(st.integers(0, len(plain) - 1))
            new[i] = _odd(plain[i], draw(st.sampled_from(_ODD_VALUES)))
        else:
            new = draw(st.sampled_from([str(plain), {"values": plain}, set(plain), b"\x01\x02", 7, 7.5,
                                        torch.tensor(plain, dtype=torch.float64) + 0.5,
                                        torch.ones(len(plain) or 1, dtype=torch.bool),
                                        np.asarray(plain or [0], dtype=np.int64).reshape(1, -1)]))
            if isinstance(new, torch.Tensor) and new.is_floating_point() and not plain:
                must = name in ("prompt_token_ids", "multimodal_embed_mask_cumsum")  # else: no values, none odd
    elif kind == "huge":
        if plain and draw(st.booleans()):
            new = list(plain)
            new[draw(st.integers(0, len(plain) - 1))] = draw(st.sampled_from(_HUGE_VALUES))
        else:
            new = [0] * draw(st.sampled_from([2_000_000, 40_000]))
    else:  # broadcast: a few bytes claiming millions of values
        new = np.broadcast_to(draw(st.sampled_from([np.int64(1), np.int32(100), np.float64(1.5)])), (BROADCAST,))
    return adapter, layout, honest, name, {**honest, name: new}, must


@settings(max_examples=400)
@given(corrupted())
def test_every_carried_field_is_read_strictly_and_held_to_its_ids(case):
    adapter, layout, honest, name, fields, must = case
    result, error = answer(lambda: _read(fields, adapter, request_id="r1"))
    if error is None:
        assert not must, f"{name}: accepted {str(fields[name])[:120]}"
        assert _same(result, layout), name
        return
    text = str(error)
    assert error.field and str(error.field)[:40] in text and len(text) <= 1000, text[:300]
    assert error.request_id == "r1"


# ----------------------------------------------------------------------------- the named cases
QWEN = get_adapter("qwen3_vl", convention="pad_only")
S = QWEN.spec


def _video_request():
    raw = [100, S.vision_start, S.video_pad, S.vision_end, 101, S.vision_start, S.image_pad, S.vision_end]
    meta = [{"fps": 2.0, "frames_indices": [0, 1, 2, 3]}]
    ids = QWEN.rebuild_token_ids(raw, image_grid_thw=[(1, 4, 4)], video_grid_thw=[(2, 8, 8)], video_metadata=meta)
    return QWEN.derive_layout(ids, image_grid_thw=[(1, 4, 4)], video_grid_thw=[(2, 8, 8)], mrope=False)


@pytest.mark.parametrize("field, value", [
    ("encoder_token_lengths", [1, 16]), ("encoder_token_lengths", [10**9, 16]), ("encoder_token_lengths", [8, 16]),
    ("encoder_token_lengths", [128, 15]), ("special_token_offsets", [0]), ("special_token_offsets", [0, 17]),
    ("multimodal_embedding_lengths", [8.9, 4]), ("multimodal_positions", ["10", 40]),
    ("item_types", [True, False]), ("multimodal_lengths", [float("inf"), 4]),
    ("multimodal_run_lengths", [16, 16, float("nan")]), ("prompt_token_ids", "ids"),
])
def test_the_named_lies_are_refused(field, value):
    """The issue's cases: lengths admitted by count and sign only, offsets never compared, columns through
    int(); each refused by name."""
    layout = _video_request()
    fields = carrier_fields(layout)
    assert fields["encoder_token_lengths"] == [128, 16]  # t*h*w per item
    fields[field] = value
    exc = refused(lambda: _read(fields, QWEN, request_id="r2"))
    assert exc.field.startswith(f"multimodal_layout.{field}") and exc.request_id == "r2"


@pytest.mark.parametrize("value", [2**70, float("inf"), -1])
def test_an_id_or_a_length_out_of_range_is_a_typed_error_at_admission(value):
    """What raised OverflowError out of admission: an id of 2**70, an infinite length."""
    layout = _video_request()
    for field in ("prompt_token_ids", "multimodal_lengths", "multimodal_run_positions"):
        fields = carrier_fields(layout)
        fields[field] = [value, *list(fields[field])[1:]]
        refused(lambda fields=fields: check_upstream_layout(SimpleNamespace(**fields), QWEN, request_id="r3"),
                field=f"multimodal_layout.{field}")


@pytest.mark.parametrize("field", FIELDS)
def test_a_broadcast_view_is_refused_before_it_is_read(field):
    """A 8-byte view claiming 4,194,304 values: counted, then refused, allocating next to nothing."""
    fields = carrier_fields(_video_request())
    fields[field] = np.broadcast_to(np.int64(7), (BROADCAST,))
    tracemalloc.start()
    try:
        with pytest.raises(HandoffError) as info:
            _read(fields, QWEN)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.field.startswith(f"multimodal_layout.{field}") and len(str(info.value)) <= 1000
    assert peak < 2 << 20, f"{peak / 2**20:.1f} MiB"


def test_every_entry_reads_within_the_callers_limits():
    layout = _video_request()
    fields = carrier_fields(layout)
    n, items, runs = layout.prompt_len, len(layout.items), len(layout.run_positions)
    assert _same(_read(fields, QWEN, limits=Limits(max_prompt_len=n, max_items=items, max_runs=runs)), layout)
    refused(lambda: _read(fields, QWEN, limits=Limits(max_prompt_len=n - 1)),
            field="multimodal_layout.prompt_token_ids")
    refused(lambda: _read(fields, QWEN, limits=Limits(max_items=items - 1)), field="multimodal_layout.multimodal_")
    refused(lambda: _read(fields, QWEN, limits=Limits(max_runs=runs - 1)), field="multimodal_layout.multimodal_run")
    upstream = SimpleNamespace(**fields)
    assert _same(check_upstream_layout(upstream, QWEN, limits=Limits(max_prompt_len=n)), layout)
    refused(lambda: check_upstream_layout(upstream, QWEN, limits=Limits(max_prompt_len=n - 1)),
            field="multimodal_layout.prompt_token_ids")
    refused(lambda: check_upstream_layout(upstream, QWEN, limits=7), field="limits")


# ---------------------------------------------------------- a grid the runs spell, mRoPE ids as values
def _wide_image():
    """A (1, 4, 16) image: 16 pads, which the runs alone spell as (1, 8, 8)."""
    raw = [100, S.vision_start, S.image_pad, S.vision_end, 101]
    ids = QWEN.rebuild_token_ids(raw, image_grid_thw=[(1, 4, 16)])
    return QWEN.derive_layout(ids, image_grid_thw=[(1, 4, 16)], mrope=True)


def test_honest_mrope_values_are_not_refused_for_a_grid_the_runs_spell():
    """Without mm-handoff's grids only h*w is known: the mRoPE ids, handed over as values, are checked by their
    length (their values need h and w apart); with the encoder's grids carried, by value."""
    layout = _wide_image()
    upstream = SimpleNamespace(**carrier_fields(layout))
    honest = torch.from_numpy(np.array(layout.mrope_position_ids)).reshape(3, 1, -1)
    params = SimpleNamespace(multimodal_embedding_handles=None, mrope_position_ids_handle=None)
    accepted = check_upstream_layout(upstream, QWEN, disaggregated_params=params, mrope_position_ids=honest)
    assert accepted.token_ids.tolist() == layout.token_ids.tolist()
    refused(lambda: check_upstream_layout(upstream, QWEN, disaggregated_params=params,
                                          mrope_position_ids=honest[:, :, :-1]), field="mrope_position_ids")
    grids = [{"tensor_size": [16, QWEN.handle_row_width],
              GRIDS_KEY: {"image_grid_thw": [[1, 4, 16]], "video_grid_thw": []}}]
    carried = SimpleNamespace(multimodal_embedding_handles=grids, mrope_position_ids_handle=None)
    assert check_upstream_layout(upstream, QWEN, disaggregated_params=carried, mrope_position_ids=honest)
    swapped = honest[[0, 2, 1]]  # rows swapped: the right shape, the wrong values
    refused(lambda: check_upstream_layout(upstream, QWEN, disaggregated_params=carried, mrope_position_ids=swapped),
            field="mrope_position_ids")
