"""Around the accept step: what feeds it, what it is bound to after it has run, the settings.

One section per class of failure; each case ends in a typed HandoffError (named field, at most 1,000
characters) or a correct answer, within 100 MiB (``adversary.answer``).
"""

from __future__ import annotations

import numpy as np
import pytest
from adversary import answer, refused
from handoff_strategies import FAMILIES, prompts
from hypothesis import given
from hypothesis import strategies as st

import mm_handoff
from mm_handoff import HandoffError, HandoffLayout, Limits, _env
from mm_handoff.checks import check_placeholders, check_prompt_pads
from mm_handoff.layout.tokens import frozen
from mm_handoff.reading import limits_from_env, resolve_limits

QWEN = FAMILIES["qwen3_vl"]()
S = QWEN.spec


def _video_prompt(frames: int = 4):
    raw = [100, S.vision_start, S.video_pad, S.vision_end, 101]
    meta = [{"fps": 2.0, "frames_indices": list(range(frames))}]
    grid = [[-(-frames // 2), 4, 4]]
    return raw, grid, meta, QWEN.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=meta)


# --------------------------------------------------------------- what was checked cannot change afterwards
def _arrays(layout: HandoffLayout) -> list:
    """Every array a layout keeps or hands out (its own, its items', its derived views)."""
    out = [layout.token_ids, *layout.rle(), layout.vision_start_positions, layout.vision_end_positions]
    out += [a for a in (layout.mrope_position_ids,) if a is not None]
    for item in layout.items:
        out += [item.run_offsets, item.run_lengths]
        out += [a for a in (item.seconds, item.span_array) if a is not None]
    return out


def _chain(arr):
    while isinstance(arr, np.ndarray):
        yield arr
        arr = arr.base


def _unwritable(layout: HandoffLayout) -> None:
    for arr in _arrays(layout):
        assert frozen(arr)
        for link in _chain(arr):
            with pytest.raises(ValueError):
                link.flags.writeable = True


def _owned_read_only(values, dtype):
    """A caller's read-only array that owns its memory: its owner may set writeable back to True."""
    arr = np.array(values, dtype=dtype)
    arr.flags.writeable = False
    return arr


@given(prompts(max_items=3))
def test_no_array_of_an_accepted_layout_can_be_made_writable(case):
    """Derived from a caller's owning read-only arrays, then accepted (in-process and through the wire): the
    caller turns its arrays writable and writes; the layout, its fingerprint and its engine inputs stay."""
    adapter, raw, image_grids, video_grids, metas, expanded = case
    ids = _owned_read_only(expanded, np.int32)
    layout = adapter.derive_layout(ids, image_grid_thw=image_grids, video_grid_thw=video_grids, mrope=True)
    before = (layout.fingerprint(), layout.token_id_list(), layout.to_disagg_prefill_inputs())
    for accepted in (mm_handoff.accept_layout(layout, adapter, prompt_token_ids=ids),
                     mm_handoff.accept_layout(layout.to_wire(), adapter, prompt_token_ids=ids)):
        _unwritable(accepted)
    ids.flags.writeable = True  # the caller's own array: it may
    ids[:] = 4242
    _unwritable(layout)
    fresh = layout.without_mrope()  # a new object: its fingerprint is computed anew from the arrays
    assert (layout.fingerprint(), layout.token_id_list(), layout.to_disagg_prefill_inputs()) == before
    assert fresh.fingerprint() == before[0]  # recomputed from the arrays, not the memo
    mm_handoff.validate(layout, adapter, prompt_token_ids=expanded)


def test_an_items_run_columns_and_mrope_ids_are_copied_from_a_callers_owning_arrays():
    raw, grid, meta, expanded = _video_prompt()
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=True)
    item = layout.items[0]
    offsets, lengths = _owned_read_only(item.run_offsets, np.int64), _owned_read_only(item.run_lengths, np.int64)
    mrope = _owned_read_only(layout.mrope_position_ids, np.int64)
    rebuilt = HandoffLayout(layout.token_ids, [mm_handoff.MultimodalItem.from_arrays(
        "video", offsets, lengths, item.grid_thw, item.seconds, item.span_array)],
        S, family="qwen3_vl", convention=layout.convention, mrope_position_ids=mrope,
        mrope_position_delta=layout.mrope_position_delta, tokenizer_digest=layout.tokenizer_digest)
    for arr in (offsets, lengths, mrope):
        arr.flags.writeable = True
        arr[...] = 7
    _unwritable(rebuilt)
    assert rebuilt.fingerprint(include_mrope=True) == layout.fingerprint(include_mrope=True)


# ------------------------------------------------------------------------------- bounds before work
def _small_layout():
    raw, grid, meta, expanded = _video_prompt()
    return QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=False), expanded, grid, meta


def test_a_broadcast_view_of_every_array_argument_is_refused_before_it_is_read():
    """Views claiming far more than the limits allow cost nothing: counted, then refused."""
    layout, expanded, grid, meta = _small_layout()
    huge_ids = np.broadcast_to(np.int32(100), (1 << 27,))
    refused(lambda: mm_handoff.accept_layout(layout.to_wire(), QWEN, prompt_token_ids=huge_ids),
            field="prompt_token_ids")
    refused(lambda: mm_handoff.validate(layout, None, prompt_token_ids=huge_ids), field="prompt_token_ids")
    refused(lambda: mm_handoff.validate(layout, QWEN, embedding_rows=np.broadcast_to(np.int64(1), (10**7,))),
            field="embedding_rows")
    refused(lambda: QWEN.derive_layout(huge_ids), field="token_ids")
    refused(lambda: QWEN.mrope_positions(huge_ids), field="token_ids")
    refused(lambda: QWEN.rebuild_token_ids(huge_ids), field="prompt_token_ids")
    refused(lambda: check_prompt_pads(huge_ids, S, 1), field="prompt_token_ids")
    many_frames = [{"fps": 2.0, "frames_indices": np.broadcast_to(np.int64(0), (1 << 30,))}]
    refused(lambda: QWEN.video_timestamps(many_frames[0]), field="video_metadata[0].frames_indices")
    refused(lambda: mm_handoff.validate(layout, QWEN, video_metadata=many_frames), field="video_metadata[0]")


def test_from_rle_counts_the_ids_before_expanding_them():
    make = HandoffLayout.from_rle
    refused(lambda: make([5] * 32, [2**31 - 1] * 32, [], S, family="qwen3_vl", convention="pad_only"),
            field="rle.counts")
    refused(lambda: make(np.zeros(1 << 21, np.int32), np.ones(1 << 21, np.int32), [], S, family="qwen3_vl",
                         convention="pad_only"), field="rle")
    small = make([5, 6], [3, 2], [], S, family="qwen3_vl", convention="pad_only", limits=Limits(max_prompt_len=5))
    assert small.token_ids.tolist() == [5, 5, 5, 6, 6]
    refused(lambda: make([5, 6], [3, 3], [], S, family="qwen3_vl", convention="pad_only",
                         limits=Limits(max_prompt_len=5)), field="rle.counts")


@pytest.mark.parametrize("videos", [2, 256, 1024])
def test_frame_lists_are_bounded_per_request_not_only_per_video(videos):
    """One 32,768-frame list shared by many one-group videos: counted over the request, refused at once."""
    shared = {"fps": 2.0, "frames_indices": list(range(1 << 15))}
    raw = [100] + [S.vision_start, S.video_pad, S.vision_end] * videos
    refused(lambda: QWEN.rebuild_token_ids(raw, video_grid_thw=[[1, 4, 4]] * videos, video_metadata=[shared] * videos),
            field="video_metadata[1].frames_indices")
    honest = [{"fps": 2.0, "frames_indices": [0, 1]}] * videos
    layout = QWEN.derive_layout(QWEN.rebuild_token_ids(raw, video_grid_thw=[[1, 4, 4]] * videos, video_metadata=honest),
                                video_grid_thw=[[1, 4, 4]] * videos, mrope=False)
    refused(lambda: mm_handoff.validate(layout, QWEN, video_metadata=[shared] * videos),
            field="video_metadata[1].frames_indices")
    assert mm_handoff.validate(layout, QWEN, video_metadata=honest)


# ------------------------------------------------------- the caller's limits, at every engine's entry
def _sglang_output(layout):
    """SGLang's ``MultimodalProcessorOutput`` for ``layout``, as its own processor builds it."""
    return _sglang_output_with(layout, None)


def _sglang_output_with(layout, limits):
    from mm_handoff.sglang import engine_inputs

    inputs = engine_inputs(layout, QWEN, limits=limits)
    item = type("Item", (), {})
    items = []
    for modality, span in inputs.runs:
        items.append(item())
        items[-1].modality, items[-1].offsets = modality, [span]
    return type("Output", (), {"input_ids": inputs.input_ids, "mm_items": items,
                               "mrope_positions": inputs.mrope_positions,
                               "mrope_position_delta": inputs.mrope_position_delta})()


def _engine_entries():
    """``name: (call(limits), tight limits, the field they refuse)``: one sound video request per entry."""
    import torch

    from mm_handoff import sglang, vllm

    raw, grid, meta, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)
    n = len(expanded)
    rows = [torch.zeros(layout.num_pads, QWEN.handle_row_width)]
    output = _sglang_output(layout)
    request = type("RequestOutput", (), {"request_id": "r", "prompt_token_ids": expanded.tolist()})()
    short, few_frames, few_groups = Limits(max_prompt_len=n - 1), Limits(max_frames=3), Limits(max_runs=1)
    return {
        "vllm.check_expansion": (lambda lim: vllm.check_expansion(expanded, layout.to_wire(), QWEN, limits=lim),
                                 short, ""),
        "vllm.check_output": (lambda lim: vllm.check_output(request, layout.to_wire(), QWEN, limits=lim), short, ""),
        "vllm.check_raw_prompt": (lambda lim: vllm.check_raw_prompt(expanded[:n], QWEN, images=0, videos=1,
                                                                    limits=lim) if lim is short else
                                  vllm.check_raw_prompt(raw, QWEN, images=0, videos=1, limits=lim), short,
                                  "prompt_token_ids"),
        "vllm.embeds_request": (lambda lim: vllm.embeds_request(layout, rows, QWEN, video_metadata=meta, limits=lim),
                                few_frames, "video_metadata"),
        "sglang.epd_inputs": (lambda lim: sglang.epd_inputs(layout, rows, QWEN, video_metadata=meta, limits=lim),
                              few_frames, "video_metadata"),
        "sglang.check_mm_output": (lambda lim: sglang.check_mm_output(output, layout.to_wire(), QWEN,
                                                                      video_grid_thw=grid, limits=lim), short, ""),
        "sglang.check_derived": (lambda lim: sglang.check_derived(output, QWEN, video_grid_thw=torch.tensor(grid),
                                                                  limits=lim), short, "input_ids"),
        "sglang.check_stamped": (lambda lim: sglang.check_stamped("qwen3_vl", torch.tensor(grid), [[0.5, 1.5]],
                                                                  limits=lim), few_groups, "video_grid_thw"),
    }


@pytest.mark.parametrize("entry", ["vllm.check_expansion", "vllm.check_output", "vllm.check_raw_prompt",
                                   "vllm.embeds_request", "sglang.epd_inputs", "sglang.check_mm_output",
                                   "sglang.check_derived", "sglang.check_stamped"])
def test_every_engine_entry_bounds_by_the_callers_limits(entry):
    """The same sound request passes with the default limits and is refused, naming the field, under a
    caller's tighter ones (so the entry reads what it is given with the caller's bounds, not the process's)."""
    call, tight, field = _engine_entries()[entry]
    call(None)
    call(Limits())
    refused(lambda: call(tight), field=field)


def test_limits_above_the_default_admit_a_larger_request_at_every_entry():
    """A caller's roomier limits reach every step an entry takes (the mRoPE ids and delta recomputed from
    the accepted layout included): a request over the defaults passes with them, and is refused without."""
    import torch

    from mm_handoff import sglang, vllm

    n, roomy = 1100, Limits(max_items=2048)
    raw = [100] + [S.vision_start, S.image_pad, S.vision_end] * n
    grids = [[1, 2, 2]] * n
    layout = QWEN.derive_layout(QWEN.rebuild_token_ids(raw, image_grid_thw=grids, limits=roomy),
                                image_grid_thw=grids, limits=roomy)
    rows = [torch.zeros(1, QWEN.handle_row_width)] * n
    output = _sglang_output_with(layout, roomy)
    calls = {
        "accept_layout": lambda lim: mm_handoff.accept_layout(layout.to_wire(), QWEN, limits=lim),
        "validate (mRoPE ids held)": lambda lim: mm_handoff.validate(
            layout, QWEN, mrope_position_ids=layout.mrope_position_ids, limits=lim),
        "vllm.embeds_request": lambda lim: vllm.embeds_request(layout, rows, QWEN, limits=lim),
        "sglang.check_mm_output": lambda lim: sglang.check_mm_output(output, layout.to_wire(), QWEN,
                                                                     img_grid_thw=torch.tensor(grids), limits=lim),
        "sglang.check_derived": lambda lim: sglang.check_derived(output, QWEN, img_grid_thw=torch.tensor(grids),
                                                                 limits=lim),
    }
    for call in calls.values():
        call(roomy)
        refused(lambda call=call: call(None))


def test_engine_video_metadata_is_bounded_over_the_request_before_it_is_read():
    """One frame list far over the limits, shared by the request's videos: counted, then refused, at the
    vLLM and SGLang carriers as at the accept step."""
    import torch

    from mm_handoff import sglang, vllm

    _, grid, _, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)
    rows = [torch.zeros(layout.num_pads, QWEN.handle_row_width)]
    huge = [{"fps": 2.0, "frames_indices": np.broadcast_to(np.int64(0), (1 << 30,))}]
    refused(lambda: vllm.embeds_request(layout, rows, QWEN, video_metadata=huge), field="video_metadata[0]")
    refused(lambda: sglang.epd_inputs(layout, rows, QWEN, video_metadata=huge), field="video_metadata[0]")
    refused(lambda: vllm.embeds_request(layout, rows, QWEN, video_metadata=iter(huge)), field="video_metadata")
    # many videos sharing one list, each list within the bound: counted over the request first
    videos = 64
    raw = [100] + [S.vision_start, S.video_pad, S.vision_end] * videos
    honest = [{"fps": 2.0, "frames_indices": [0, 1]}] * videos
    grids = [[1, 4, 4]] * videos
    layout = QWEN.derive_layout(QWEN.rebuild_token_ids(raw, video_grid_thw=grids, video_metadata=honest),
                                video_grid_thw=grids)
    rows = [torch.zeros(item.embedding_length, QWEN.handle_row_width) for item in layout.items]
    shared = [{"fps": 2.0, "frames_indices": list(range(1 << 15))}] * videos
    for entry in (vllm.embeds_request, sglang.epd_inputs):
        entry(layout, rows, QWEN, video_metadata=honest)
        refused(lambda entry=entry: entry(layout, rows, QWEN, video_metadata=shared),
                field="video_metadata[1].frames_indices")


def test_a_grid_array_of_another_shape_is_refused_before_it_is_read():
    refused(lambda: QWEN.derive_layout([1, 2], video_grid_thw=np.broadcast_to(np.int64(2), (1, 1 << 28))),
            field="video_grid_thw")
    import torch

    for grid in (np.broadcast_to(np.int64(2), (1 << 26,)), torch.zeros(1).expand(1 << 26), np.array(5)):
        refused(lambda grid=grid: QWEN.derive_layout([1, 2], video_grid_thw=[grid]), field="video_grid_thw[0]")
        refused(lambda grid=grid: mm_handoff.validate(QWEN.derive_layout([1, 2]), QWEN, video_grid_thw=[grid]),
                field="video_grid_thw[0]")


class _Lying(list):
    """A list whose length, iteration and indexing lie: what it stores is what counts."""

    def __len__(self):
        return 1

    def __iter__(self):
        import itertools

        return itertools.repeat(self._item, 1 << 40)

    def __getitem__(self, index):
        raise RuntimeError("lying getitem")


def _lying(values, item):
    out = _Lying(values)
    out._item = item
    return out


def test_a_list_is_read_as_it_is_stored_whatever_its_len_and_iter_say():
    """Bounds count what a list stores and the readers read that (a subclass's ``__len__``/``__iter__`` are
    never asked): the answer is the plain list's, in bounded work, or the plain list's refusal."""
    raw, grid, meta, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)
    ids = expanded.tolist()
    cases = [
        (lambda x: QWEN.derive_layout(x, video_grid_thw=grid).token_id_list(), ids, 5),
        (lambda x: QWEN.derive_layout(expanded, video_grid_thw=x).token_id_list(), [tuple(grid[0])], (1, 2, 2)),
        (lambda x: QWEN.derive_layout(expanded, video_grid_thw=[x]).token_id_list(), list(grid[0]), 2),
        (lambda x: QWEN.video_timestamps({"fps": 2.0, "frames_indices": x}, limits=Limits(max_frames=4)),
         [0, 1, 2, 3], 0),
        (lambda x: mm_handoff.validate(layout, QWEN, video_metadata=x).prompt_len, meta, meta[0]),
        (lambda x: mm_handoff.accept_layout(layout.to_wire(), QWEN, embedding_shapes=x).prompt_len,
         [(layout.num_pads, QWEN.handle_row_width)], (1, 1)),
    ]
    for call, stored, item in cases:
        plain, plain_error = answer(lambda call=call, stored=stored: call(list(stored)))
        lying, lying_error = answer(lambda call=call, stored=stored, item=item: call(_lying(stored, item)))
        assert plain_error is None, plain_error
        assert lying_error is None and lying == plain, (lying_error, lying, plain)
    refused(lambda: QWEN.video_timestamps({"fps": 2.0, "frames_indices": _lying(range(8), 0)},
                                          limits=Limits(max_frames=4)), field="video_metadata[0].frames_indices")


def test_sglang_outputs_are_read_exactly_and_within_the_layouts_size():
    """SGLang's delta is one integer value, read as it is (never truncated, never a copy of a wide
    tensor); its items are read up to one run past the layout's."""
    import torch

    from mm_handoff import sglang

    _, grid, _, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)
    delta = layout.mrope_position_delta
    for good in (delta, np.int64(delta), torch.tensor([[delta]]), np.array([delta], dtype=np.int32)):
        output = _sglang_output(layout)
        output.mrope_position_delta = good
        sglang.check_mm_output(output, layout.to_wire(), QWEN, video_grid_thw=grid)
    for bad in (torch.tensor([delta - 0.5]), str(delta), [delta, 999], complex(delta, 5), True,
                torch.full((8192,), delta).expand(8192, 8192), torch.tensor([[delta, delta]]), None):
        output = _sglang_output(layout)
        output.mrope_position_delta = bad
        refused(lambda output=output: sglang.check_mm_output(output, layout.to_wire(), QWEN, video_grid_thw=grid),
                field="mrope_position_delta")
    output = _sglang_output(layout)
    item = output.mm_items[0]

    def many():
        for _ in range(1 << 40):
            yield item

    output.mm_items = many()
    refused(lambda: sglang.check_mm_output(output, layout.to_wire(), QWEN, video_grid_thw=grid),
            field="mm_items offsets")


def test_carriers_take_float_tensors_only_and_end_typed():
    """vLLM's and SGLang's carriers pass on the embeddings themselves: a shape, a handle or an array of
    objects or ints is refused by name (its shape alone would pass the accept step), never converted."""
    import torch

    from mm_handoff import sglang, vllm

    _, grid, meta, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)
    n, width = layout.num_pads, QWEN.handle_row_width
    for entry in (vllm.embeds_request, sglang.epd_inputs):
        entry(layout, [torch.zeros(n, width, dtype=torch.bfloat16)], QWEN)
        entry(layout, [np.zeros((n, width), dtype=np.float32)], QWEN)
        for bad in ((n, width), torch.Size([n, width]), {"tensor_size": [n, width]}, np.empty((n, width), object),
                    torch.zeros(n, width, dtype=torch.int64)):
            refused(lambda entry=entry, bad=bad: entry(layout, [bad], QWEN, request_id="r"), field="embeddings")


def test_every_glue_helper_ends_typed_and_reads_strictly():
    """The engines' helper functions: an odd request, output or count is a typed error naming it (nothing
    stored, nothing truncated or parsed)."""
    import torch

    from mm_handoff import sglang, vllm

    _, grid, _, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)
    rows = torch.zeros(layout.num_pads, 8)

    class Raising:
        @property
        def mm_processor_kwargs(self):
            raise RuntimeError("hostile")

    odd_offsets = _sglang_output(layout)
    odd_offsets.mm_items[0].offsets = [(9.7, 12.7)]
    tensor_offsets = _sglang_output(layout)
    tensor_offsets.mm_items[0].offsets = torch.tensor([[2, 3], [4, 5]])
    for call, field in (
        (lambda: sglang.output_runs(object()), "mm_items offsets"),
        (lambda: sglang.output_runs(odd_offsets), "mm_items[0].offsets"),
        (lambda: sglang.check_mm_output(odd_offsets, layout.to_wire(), QWEN, video_grid_thw=grid), "mm_items"),
        (lambda: sglang.attach_layout(None, layout), "request"),
        (lambda: sglang.attach_layout((), layout), "request"),
        (lambda: sglang.attach_layout({"mm_processor_kwargs": [1, 2]}, layout), "request.mm_processor_kwargs"),
        (lambda: sglang.attach_layout({}, 5), "layout"),
        (lambda: sglang.carried_layout(Raising()), "request.mm_processor_kwargs"),
        (lambda: vllm.item_embeddings(rows, item_rows=[5]), "item_rows"),
        (lambda: vllm.item_embeddings(None), "embeddings"),
        (lambda: vllm.item_embeddings(rows, item_rows=[1.5, layout.num_pads - 1.5]), "item_rows[0]"),
        (lambda: vllm.item_embeddings(rows, item_rows=[-1, layout.num_pads + 1]), "item_rows[0]"),
        (lambda: vllm.item_embeddings(rows, item_rows=torch.ones(2, 2, dtype=torch.int64)), "item_rows"),
    ):
        refused(call, field=field)
    assert sglang.output_runs(tensor_offsets)[:2] == [("video", 2, 4), ("video", 4, 6)]
    request = sglang.attach_layout({}, layout)
    assert sglang.carried_layout(request) == layout.to_wire()
    n = layout.num_pads
    for sizes in ([2, n - 2], (2, n - 2), torch.tensor([2, n - 2]), np.array([2, n - 2]), [torch.tensor(2),
                  torch.tensor(n - 2)], [2.0, float(n - 2)], iter([2, n - 2]), range(2, n - 1, n - 4)):
        assert [len(e) for e in vllm.item_embeddings(rows, item_rows=sizes)] == [2, n - 2], sizes


def test_sglang_embedding_rows_and_delta_are_read_strictly():
    import torch

    from mm_handoff import sglang

    _, grid, _, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)

    class Shaped:
        def __init__(self, shape):
            self.shape = shape

    for shape in ((layout.num_pads + 0.5, 8), (str(layout.num_pads), 8), (layout.num_pads,)):
        refused(lambda shape=shape: sglang.check_mm_output(_sglang_output(layout), layout.to_wire(), QWEN,
                                                           video_grid_thw=grid, embeddings={"video": Shaped(shape)}),
                field="embeddings[video]")
    sglang.check_mm_output(_sglang_output(layout), layout.to_wire(), QWEN, video_grid_thw=grid,
                           embeddings={"video": torch.zeros(layout.num_pads, 8)})

    class Lying(int):
        def __int__(self):
            return layout.mrope_position_delta

    output = _sglang_output(layout)
    output.mrope_position_delta = Lying(999)
    refused(lambda: sglang.check_mm_output(output, layout.to_wire(), QWEN, video_grid_thw=grid),
            field="mrope_position_delta")


def test_carriers_take_float_arrays_in_any_byte_order_and_stride():
    from mm_handoff import sglang, vllm

    _, grid, _, expanded = _video_prompt(frames=4)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid)
    n, width = layout.num_pads, QWEN.handle_row_width
    base = np.arange(n * width, dtype=np.float32).reshape(n, width)
    for arr in (np.flip(base, axis=0), base.astype(">f4"), base[:, ::-1], np.asfortranarray(base)):
        for entry in (vllm.embeds_request, sglang.epd_inputs):
            built = entry(layout, [arr], QWEN)
            data = built.multi_modal_data["video"]["video_embeds"] if entry is vllm.embeds_request \
                else built.embeddings["video"]
            assert np.array_equal(data.numpy(), np.asarray(arr, dtype=np.float32))


def test_messages_stay_within_their_bound_whatever_their_parts():
    from mm_handoff import sglang

    exc = refused(lambda: sglang.check_stamped("qwen3_vl", [[1, 2, 2]] * 200, None, request_id="x" * 5000))
    assert len(str(exc)) <= 1000
    assert "<unprintable" not in str(HandoffError("fps", "a number", np.array(2.5)))


def test_an_error_whose_values_cannot_be_pickled_crosses_processes_printed():
    import pickle

    class Local:
        def __repr__(self):
            return "Local()"

    exc = HandoffError("fps", "a number", Local(), request_id="r", hint="h")
    back = pickle.loads(pickle.dumps(exc))
    assert (back.field, back.expected, back.actual, back.request_id, back.hint) == ("fps", "a number", "Local()",
                                                                                     "r", "h")


def test_a_raw_prompt_holds_exactly_one_placeholder_per_item():
    from mm_handoff import vllm

    raw, _, _, _ = _video_prompt()
    vllm.check_raw_prompt(raw, QWEN, images=0, videos=1)
    refused(lambda: vllm.check_raw_prompt([3, 4], QWEN, images=0, videos=1), field="prompt_token_ids")
    refused(lambda: vllm.check_raw_prompt(raw, QWEN, images=5, videos=1), field="prompt_token_ids")
    refused(lambda: vllm.check_raw_prompt(raw + raw, QWEN, images=0, videos=1), field="prompt_token_ids")


def test_any_sized_sequence_of_ids_is_counted_before_it_is_converted():
    """An ``array.array``, a ``deque`` or a ``range`` claims its length like a list: over the caller's bound,
    refused before conversion; an object whose length lies is checked again once converted."""
    import array
    from collections import deque

    tight = Limits(max_prompt_len=10)

    for ids in (array.array("i", [100] * 200_000), deque([100] * 200_000), range(3 * 10**7)):
        refused(lambda ids=ids: QWEN.derive_layout(ids, mrope=False, limits=tight), field="token_ids")
        refused(lambda ids=ids: check_placeholders(ids, S, images=0, videos=0, limits=tight),
                field="prompt_token_ids")
        refused(lambda ids=ids: QWEN.mrope_positions(ids, limits=tight), field="token_ids")
    refused(lambda: HandoffLayout.from_rle(range(3 * 10**7), range(3 * 10**7), [], S, family="qwen3_vl",
                                           convention="pad_only", limits=tight), field="rle")
    assert QWEN.derive_layout(array.array("i", [100] * 10), mrope=False, limits=tight).prompt_len == 10
    refused(lambda: HandoffLayout(range(3 * 10**7), [], S, family="qwen3_vl", convention="pad_only"),
            field="token_ids")
    refused(lambda: HandoffLayout([100] * 11, [], S, family="qwen3_vl", convention="pad_only", limits=tight),
            field="token_ids")
    assert HandoffLayout([100] * 10, [], S, family="qwen3_vl", convention="pad_only", limits=tight).prompt_len == 10


def test_mrope_ids_of_another_length_are_refused_before_they_are_copied():
    import torch

    _, grid, _, expanded = _video_prompt(frames=4)
    for claim in (np.broadcast_to(np.int32(0), (3, 10**7)), torch.zeros(3, 1).expand(3, 10**7)):
        refused(lambda claim=claim: HandoffLayout(expanded, QWEN.derive_layout(expanded, video_grid_thw=grid).items,
                                                  S, family="qwen3_vl", convention="pad_only",
                                                  mrope_position_ids=claim), field="mrope_position_ids")
        refused(lambda claim=claim: HandoffLayout.from_rle([100], [5], [], S, family="qwen3_vl",
                                                           convention="pad_only", mrope_position_ids=claim),
                field="mrope_position_ids")


class _Flip(dict):
    """Video metadata whose ``get`` answers one short list at first and the longest one afterwards."""

    def get(self, key, default=None):
        calls = dict.get(self, "_calls", 0)
        dict.__setitem__(self, "_calls", calls + 1)
        if key == "frames_indices":
            return [0] if calls < 3 else list(range(1 << 15))
        return dict.get(self, key, default)


def test_video_metadata_is_read_once_so_what_was_counted_is_what_is_used():
    videos = 64
    raw = [100] + [S.vision_start, S.video_pad, S.vision_end] * videos
    grids = [[1, 2, 2]] * videos
    honest = [{"fps": 2.0, "frames_indices": [0]}] * videos
    layout = QWEN.derive_layout(QWEN.rebuild_token_ids(raw, video_grid_thw=grids, video_metadata=honest),
                                video_grid_thw=grids)
    for call in (lambda m: QWEN.rebuild_token_ids(raw, video_grid_thw=grids, video_metadata=m).tolist(),
                 lambda m: mm_handoff.validate(layout, QWEN, video_metadata=m).prompt_len):
        flips = [_Flip(fps=2.0) for _ in range(videos)]
        assert answer(lambda call=call, flips=flips: call(flips))[0] == call(honest)


def test_an_adapter_reads_a_videos_metadata_as_the_caller_gave_it():
    """What an adapter is handed is the metadata read once: every field of it (``duration`` too), by key or
    by attribute, and its own copy of the frame list."""
    from transformers.video_utils import VideoMetadata

    seen = []

    class Reading(type(QWEN)):
        def video_timestamps(self, metadata, index=0, *, limits=None, request_id=None):
            seen.append((metadata.fps, metadata["duration"], metadata.get("total_num_frames")))
            return super().video_timestamps(metadata, index, limits=limits, request_id=request_id)

    adapter = Reading()
    raw, grid, _, expanded = _video_prompt(frames=4)
    meta = [VideoMetadata(total_num_frames=16, fps=2.0, duration=8.0, frames_indices=np.array([0, 1, 2, 3]))]
    assert adapter.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=meta).tolist() == expanded.tolist()
    layout = adapter.derive_layout(expanded, video_grid_thw=grid)
    assert mm_handoff.validate(layout, adapter, video_metadata=meta)
    assert seen == [(2.0, 8.0, 16)] * 2


def test_a_counted_frame_list_cannot_change_afterwards():
    """A later video's metadata that rewrites an earlier video's list after it was read changes nothing: what
    was read is a copy."""
    first = {"fps": 2.0, "frames_indices": [0, 1, 2, 3]}

    class Rewriting(dict):
        def get(self, key, default=None):
            if key == "frames_indices":
                first["frames_indices"][2:] = [6, 7]
            return dict.get(self, key, default)

    raw = [100] + [S.vision_start, S.video_pad, S.vision_end] * 2
    grids = [[2, 2, 2]] * 2
    honest = [{"fps": 2.0, "frames_indices": [0, 1, 2, 3]}] * 2
    expected = QWEN.rebuild_token_ids(raw, video_grid_thw=grids, video_metadata=honest).tolist()
    rewriting = Rewriting(fps=2.0, frames_indices=[0, 1, 2, 3])
    assert QWEN.rebuild_token_ids(raw, video_grid_thw=grids, video_metadata=[first, rewriting]).tolist() == expected


def test_frame_indices_in_an_array_without_a_shape_are_refused_unread():
    import array

    refused(lambda: QWEN.video_timestamps({"fps": 2.0, "frames_indices": array.array("q", bytes(8 << 22))}),
            field="video_metadata[0].frames_indices")




def test_frame_limits_above_the_default_admit_a_longer_video():
    """``limits.max_frames`` is the one bound on frame lists: a caller who raises it gets a longer video."""
    frames = (1 << 15) + 2
    raw = [100, S.vision_start, S.video_pad, S.vision_end, 101]
    meta = [{"fps": 2.0, "frames_indices": list(range(frames))}]
    grid = [[2, 2, 2]]  # (the metadata may list more frames than the grid's groups take)
    refused(lambda: QWEN.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=meta),
            field="video_metadata[0].frames_indices")
    roomy = Limits(max_frames=1 << 16)
    ids = QWEN.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=meta, limits=roomy)
    layout = QWEN.derive_layout(ids, video_grid_thw=grid, mrope=False, limits=roomy)
    assert mm_handoff.validate(layout, QWEN, video_metadata=meta, limits=roomy)


# ------------------------------------------------------------------------------- untyped escapes
class _Hostile:
    """Every attribute read, length, iteration, index and conversion raises something untyped."""

    def __getattr__(self, name):
        raise RuntimeError(f"hostile .{name}")

    def __len__(self):
        raise RuntimeError("hostile len")

    def __iter__(self):
        raise RuntimeError("hostile iter")

    def __index__(self):
        raise RuntimeError("hostile index")

    def __array__(self, *a, **k):
        raise RuntimeError("hostile array")


HOSTILE = [_Hostile(), np.array(5), np.array([[1, 2]]), -1, True, 2**70, float("nan"), "4", b"\x00", None, {"a": 1},
           [_Hostile()], (_Hostile(), 1, 1), np.array([2**63], dtype=np.uint64)]


def _entries(layout, value):
    return {
        "accept_layout(embedding_rows)": lambda: mm_handoff.accept_layout(layout.to_wire(), QWEN, embedding_rows=value),
        "validate(embedding_shapes)": lambda: mm_handoff.validate(layout, QWEN, embedding_shapes=value),
        "validate(prompt_token_ids)": lambda: mm_handoff.validate(layout, QWEN, prompt_token_ids=value),
        "validate(video_grid_thw)": lambda: mm_handoff.validate(layout, QWEN, video_grid_thw=value),
        "validate(video_metadata)": lambda: mm_handoff.validate(layout, QWEN, video_metadata=value),
        "validate(mrope_position_ids)": lambda: mm_handoff.validate(layout, QWEN, mrope_position_ids=value),
        "check_mrope_slice": lambda: mm_handoff.check_mrope_slice(value, 5),
        "check_placeholders(images)": lambda: check_placeholders([1, 2, 3], S, images=value, videos=0),
        "check_prompt_pads(rows)": lambda: check_prompt_pads([1, 2, 3], S, value),
        "derive_layout(video_grid_thw)": lambda: QWEN.derive_layout(layout.token_ids, video_grid_thw=value),
        "mrope_positions(video_grid_thw)": lambda: QWEN.mrope_positions(layout.token_ids, video_grid_thw=value),
        "rebuild_token_ids(video_metadata)": lambda: QWEN.rebuild_token_ids(
            [100, S.video_pad], video_grid_thw=[[1, 4, 4]], video_metadata=value),
        "from_wire": lambda: HandoffLayout.from_wire(value),
        "from_rle": lambda: HandoffLayout.from_rle(value, value, [], S, family="qwen3_vl", convention="pad_only"),
        "HandoffLayout(mrope)": lambda: HandoffLayout(layout.token_ids, layout.items, S, family="qwen3_vl",
                                                      convention=layout.convention, mrope_position_ids=value),
    }


@given(st.sampled_from(range(len(HOSTILE))), st.sampled_from(sorted(_entries(None, None))))
def test_odd_values_at_every_entry_end_typed_or_answered(which, entry):
    layout = _small_layout()[0]
    result, exc = answer(_entries(layout, HOSTILE[which])[entry])
    assert exc is None or (exc.field and len(str(exc)) <= 1000)


def test_the_named_escapes():
    layout = _small_layout()[0]
    refused(lambda: mm_handoff.validate(layout, QWEN, embedding_rows=np.array(5)), field="embedding_rows")
    assert mm_handoff.validate(layout, QWEN, embedding_rows=np.array(layout.num_pads)) is layout  # a 0-d total
    refused(lambda: check_placeholders([1, 2, 3], S, images=-1, videos=0), field="images")
    refused(lambda: check_placeholders([1, 2, 3], S, images=True, videos=0), field="images")
    refused(lambda: QWEN.mrope_positions(layout.token_ids, video_grid_thw=_Hostile()), field="video_grid_thw")


# --------------------------------------------------------------------------- claims required and checked
def test_an_unstamped_one_group_video_is_the_stock_shape_and_refused():
    """1-2 frames, one run, no <t seconds>: #20138 for short clips. The stamping families refuse it with this
    request's grids, embedding shapes and an mRoPE slice of its own length."""
    for family in ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "cosmos3", "cosmos3_omni"):
        adapter = FAMILIES[family]()
        s = adapter.spec
        stock = [100, s.vision_start, *[s.video_pad] * 4, s.vision_end, 101]
        layout = adapter.derive_layout(stock, video_grid_thw=[[1, 4, 4]], mrope=False)
        mrope, _ = adapter.mrope_positions(stock, video_grid_thw=[[1, 4, 4]])
        refused(lambda a=adapter, lay=layout, m=mrope: mm_handoff.validate(
            lay, a, video_grid_thw=[[1, 4, 4]], embedding_shapes=[(4, a.handle_row_width or 8)],
            mrope_position_ids=m), field="items[0].timestamps")
        refused(lambda a=adapter, lay=layout: mm_handoff.accept_layout(lay.to_wire(), a), field="items[0].timestamps")


@pytest.mark.parametrize("change", ["rows swapped", "one id shifted", "h and w swapped"])
def test_in_process_mrope_ids_are_checked_value_by_value(change):
    raw, grid, meta, expanded = _video_prompt(frames=6)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=True)
    good = np.array(layout.mrope_position_ids)
    bad = good.copy()
    if change == "rows swapped":
        bad = good[[1, 0, 2]]
    elif change == "one id shifted":
        bad[0, 3] += 1
    else:
        bad = good[[0, 2, 1]]
    assert not np.array_equal(bad, good) and bad.max() == good.max()  # shape and maximum as before
    refused(lambda: mm_handoff.validate(layout, QWEN, mrope_position_ids=bad, prompt_token_ids=expanded,
                                        video_grid_thw=grid, video_metadata=meta), field="mrope_position_ids")
    forged = layout.with_mrope(bad, layout.mrope_position_delta)
    refused(lambda: mm_handoff.validate(forged, QWEN, prompt_token_ids=expanded, video_grid_thw=grid,
                                        video_metadata=meta), field="layout.mrope_position_ids")
    assert mm_handoff.validate(layout, QWEN, mrope_position_ids=good, prompt_token_ids=expanded) is layout


def test_uint64_mrope_ids_are_refused_not_wrapped():
    raw, grid, meta, expanded = _video_prompt()
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=True)
    huge = np.array(layout.mrope_position_ids, dtype=np.uint64)
    huge[0, 0] = 2**63
    refused(lambda: HandoffLayout(layout.token_ids, layout.items, S, family="qwen3_vl", convention=layout.convention,
                                  mrope_position_ids=huge), field="mrope_position_ids")


# --------------------------------------------------------------------------------------- settings
@given(st.text(max_size=12))
def test_a_switch_is_on_off_or_an_error_never_a_guess(value):
    env = {_env.AUTOINSTALL: value}
    word = value.strip().lower()
    if word in _env.TRUTHY or word in _env.FALSY:
        assert _env.env_flag(_env.AUTOINSTALL, env) is (word in _env.TRUTHY)
    else:
        with pytest.raises(HandoffError) as info:
            _env.env_flag(_env.AUTOINSTALL, env)
        assert info.value.field == _env.AUTOINSTALL and len(str(info.value)) <= 1000


@given(st.text(max_size=40))
def test_limits_from_the_environment_parse_or_name_the_variable(value):
    try:
        limits = limits_from_env({_env.LIMITS: value})
    except HandoffError as exc:
        assert exc.field == _env.LIMITS and len(str(exc)) <= 1000
    else:
        assert isinstance(limits, Limits)


def test_a_bad_limits_setting_is_an_error_where_it_is_used(monkeypatch):
    monkeypatch.setenv(_env.LIMITS, "max_runs=0")
    refused(lambda: resolve_limits(None), field=_env.LIMITS)
    refused(lambda: QWEN.derive_layout([1, 2, 3]), field=_env.LIMITS)
    monkeypatch.setenv(_env.LIMITS, "max_prompt_len=2")
    refused(lambda: QWEN.derive_layout([1, 2, 3]), field="token_ids")
    monkeypatch.delenv(_env.LIMITS)
    assert resolve_limits(None) == Limits()


def test_memoised_views_are_immutable():
    """What a layout memoises and hands out cannot be edited (a list could be, and the checks read it)."""
    raw, grid, meta, expanded = _video_prompt()
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=False)
    firsts, ends = layout.item_pad_bounds()
    assert type(firsts) is tuple and type(ends) is tuple
    positions = layout.multimodal_positions
    positions[0] += 1  # a copy: the layout's own stays
    assert layout.multimodal_positions == list(firsts) and layout.to_disagg_prefill_inputs()["multimodal_positions"] \
        == list(firsts)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, object, bool])
def test_mrope_ids_that_are_not_integers_are_refused(dtype):
    raw, grid, meta, expanded = _video_prompt(frames=6)
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=True)
    ids = np.array(layout.mrope_position_ids).astype(dtype)
    refused(lambda: mm_handoff.validate(layout, QWEN, mrope_position_ids=ids, prompt_token_ids=expanded),
            field="mrope_position_ids")


class _Raising(float):
    def __float__(self):
        raise KeyError("fps")


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no text")


class _BadMeta:
    @property
    def fps(self):
        raise _Unprintable()


class _BadList(list):
    def __len__(self):
        raise KeyError("len")


def test_every_adapter_entry_is_typed_whatever_its_input_raises():
    raw, grid, meta, expanded = _video_prompt()
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=False)
    for call in (lambda: QWEN.video_timestamps({"fps": _Raising(2.0), "frames_indices": [0, 1]}),
                 lambda: QWEN.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=[{"fps": _Raising(2.0),
                                                                                           "frames_indices": [0, 1]}]),
                 lambda: QWEN.video_timestamps(_BadMeta()),
                 lambda: QWEN.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=[_BadMeta()]),
                 lambda: QWEN.check_video_metadata(layout, [_BadMeta()]),
                 lambda: QWEN.check_prompt(object(), raw),
                 lambda: QWEN.check_video_metadata(object(), meta),
                 lambda: QWEN.layout_mrope_delta(object()),
                 lambda: QWEN.expansion_span(layout, -5),
                 lambda: QWEN.expansion_span(layout, 10**30)):
        refused(call)
    # a list whose own methods raise is read as it is stored
    assert QWEN.video_timestamps({"fps": 2.0, "frames_indices": _BadList([0, 1])}) == [0.25]
    assert QWEN.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=_BadList([meta[0]])).tolist() == \
        expanded.tolist()


def test_limits_are_bounded_above_too():
    refused(lambda: Limits(max_payload_chars=10**26), field="limits.max_payload_chars")
    refused(lambda: limits_from_env({_env.LIMITS: "max_payload_chars=99999999999999999999999999"}), field=_env.LIMITS)


def test_vllm_check_output_names_a_missing_field():
    """The vLLM glue's after-the-fact check imports no vLLM: an output without request_id is a typed error."""
    from types import SimpleNamespace

    from mm_handoff.vllm import check_output

    raw, grid, meta, expanded = _video_prompt()
    layout = QWEN.derive_layout(expanded, video_grid_thw=grid, mrope=False)
    refused(lambda: check_output(SimpleNamespace(prompt_token_ids=expanded.tolist()), layout.to_wire(), QWEN),
            field="output.request_id")
    refused(lambda: check_output(object(), layout.to_wire(), QWEN), field="output.request_id")
    ok = SimpleNamespace(prompt_token_ids=expanded.tolist(), request_id="r1")
    assert check_output(ok, layout.to_wire(), QWEN) == layout
