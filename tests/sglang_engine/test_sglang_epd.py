"""mm_handoff.sglang on SGLang 0.5.23's own EPD prefill code (``QwenVLImageProcessor.get_validated_mm_data``).

Every case is one request (an image and a video sampled every 12th frame of a 24 fps source) as the
encoder side sees it: the real HF processor's expanded ids, grids and video metadata, the family
adapter's layout, and embedding rows of the right shape. What SGLang's PD receiver hands its processor
(prompt, embeddings per modality, grids, ``video_timestamps``) is built by :func:`mm_handoff.sglang.epd_inputs`;
the timestamps are also computed the way SGLang's encoder computes them (``EncoderPreprocessor._calculate_timestamps``).
Each test runs once per family SGLang lists for EPD (conftest.py).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from sglang_engine.helpers import epd_request, layout_runs, no_timestamps, sglang_encoder_timestamps

import mm_handoff
import mm_handoff.sglang as glue
from mm_handoff.adapters.timestamps import format_timestamp
from mm_handoff.errors import EngineNotSupportedError, GridMismatchError, SkewError, TokenMismatchError
from mm_handoff.layout.spec import REPLACE_WRAPPER


def test_sglang_encoder_timestamps_print_as_hfs(sglang_processor):
    epd, _, metadata = epd_request(sglang_processor)
    ours = [[format_timestamp(t) for t in v] for v in epd.meta["video_timestamps"]]
    assert [[format_timestamp(t) for t in v] for v in sglang_encoder_timestamps(sglang_processor[0], metadata)] == ours


def test_carried_layout_checked_end_to_end(sglang_processor):
    """SGLang's own rebuild (its encoder's timestamps) under the installed check, with the layout carried."""
    proc = sglang_processor[0]
    epd, adapter, metadata = epd_request(sglang_processor)
    kwargs = {**epd.kwargs(carry_layout=True), "video_timestamps": sglang_encoder_timestamps(proc, metadata)}
    report = glue.install()
    assert report["installed"] and {h["state"] for h in report["hooks"]} == {"patched"}
    out = proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **kwargs)
    np.testing.assert_array_equal(out.input_ids, epd.layout.token_ids)
    assert glue.output_runs(out) == layout_runs(epd.layout)
    positions, delta = adapter.mrope_positions(epd.layout.token_ids, image_grid_thw=epd.meta["img_grid_thw"].tolist(),
                                               video_grid_thw=epd.meta["video_grid_thw"].tolist())
    np.testing.assert_array_equal(out.mrope_positions.numpy(), positions)
    assert int(out.mrope_position_delta.reshape(-1)[0]) == delta
    assert glue.check_mm_output(out, epd.layout.to_wire(), adapter, embeddings=epd.sglang_embeddings(),
                                img_grid_thw=epd.meta["img_grid_thw"],
                                video_grid_thw=epd.meta["video_grid_thw"]) == epd.layout


def test_silent_fallback_is_refused(sglang_processor):
    """A video without timestamps: SGLang builds one pad run (#20138's layout) and its own check passes."""
    proc = sglang_processor[0]
    epd, adapter, _ = epd_request(sglang_processor)
    silent = proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **no_timestamps(epd))
    stock = adapter.stock_token_ids(epd.prompt, image_grid_thw=epd.meta["img_grid_thw"].tolist(),
                                    video_grid_thw=epd.meta["video_grid_thw"].tolist())
    np.testing.assert_array_equal(silent.input_ids, stock)
    assert len(silent.input_ids) < epd.layout.prompt_len
    glue.install()
    with pytest.raises(GridMismatchError) as err:
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **no_timestamps(epd))
    assert err.value.field == "video_timestamps" and err.value.actual is None
    assert "one pad run" in str(err.value)
    with pytest.raises(TokenMismatchError) as err:  # with a carried layout: the ids differ at the first stamp
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(),
                                   **no_timestamps(epd, **{glue.LAYOUT_KWARG: epd.layout.to_wire()}))
    assert err.value.index == epd.layout.items[1].timestamp_spans[0][0]


def test_policy_rebuild_answers_with_the_layout_and_fallback_warns(sglang_processor, caplog):
    proc = sglang_processor[0]
    epd, adapter, _ = epd_request(sglang_processor)
    exact = proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **epd.kwargs())
    glue.install(policy="rebuild")
    rebuilt = proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(),
                                         **no_timestamps(epd, **{glue.LAYOUT_KWARG: epd.layout.to_wire()}))
    assert type(rebuilt) is type(exact) and rebuilt.input_ids == exact.input_ids
    assert glue.output_runs(rebuilt) == glue.output_runs(exact)
    np.testing.assert_array_equal(rebuilt.mrope_positions.numpy(), exact.mrope_positions.numpy())
    assert rebuilt.mrope_positions.dtype == exact.mrope_positions.dtype
    assert rebuilt.mrope_position_delta.dtype == exact.mrope_position_delta.dtype
    assert rebuilt.mrope_position_delta.shape == exact.mrope_position_delta.shape
    np.testing.assert_array_equal(rebuilt.mrope_position_delta.numpy(), exact.mrope_position_delta.numpy())
    for ours, theirs in zip(rebuilt.mm_items, exact.mm_items, strict=True):
        assert ours.modality == theirs.modality and ours.offsets == theirs.offsets
        assert ours.precomputed_embeddings.equal(theirs.precomputed_embeddings)
    with pytest.raises(GridMismatchError):  # nothing carried: nothing to rebuild from
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **no_timestamps(epd))
    glue.uninstall()
    glue.install(policy="fallback")
    with caplog.at_level(logging.WARNING, logger="mm_handoff"):
        kept = proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **no_timestamps(epd))
    assert len(kept.input_ids) < epd.layout.prompt_len
    events = [r.mm_handoff_event for r in caplog.records if hasattr(r, "mm_handoff_event")]
    assert any(e["field"] == "video_timestamps" and e["policy"] == "fallback" and e["outcome"] == "fallback"
               and e["engine"] == "sglang" and e["check_point"] == "admission" for e in events)


@pytest.mark.parametrize("policy", ["raise", "rebuild", "fallback"])
def test_another_requests_layout_is_caught(sglang_processor, policy):
    """The layout of the same clip at 30 fps carried with this request: its timestamps are not this request's
    (SGLang's own ``video_timestamps``), so it is refused under every policy, never rebuilt from or passed on."""
    proc = sglang_processor[0]
    epd, _, _ = epd_request(sglang_processor)
    other, _, _ = epd_request(sglang_processor, fps=30.0)
    glue.install(policy=policy)
    with pytest.raises(GridMismatchError) as err:
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(),
                                   **{**epd.kwargs(), glue.LAYOUT_KWARG: other.layout.to_wire()})
    assert err.value.field == "items[1].timestamps"  # "<0.x" agrees at 0 s; the second stamp differs
    assert err.value.actual == other.layout.items[1].timestamps


def test_convention_skew_is_named(sglang_processor):
    """An encoder on transformers <= 5.9 (``replace_wrapper``): SGLang rebuilds ``pad_only`` whatever it runs."""
    proc, hf, config, _ = sglang_processor
    epd, _, metadata = epd_request(sglang_processor)
    old = mm_handoff.get_adapter(config, tokenizer=hf.tokenizer, convention=REPLACE_WRAPPER)
    grids = {"image_grid_thw": epd.meta["img_grid_thw"].tolist(), "video_grid_thw": epd.meta["video_grid_thw"].tolist()}
    old_layout = old.derive_layout(old.rebuild_token_ids(epd.prompt, video_metadata=metadata, **grids), **grids)
    glue.install()
    with pytest.raises(SkewError) as err:
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(),
                                   **{**epd.kwargs(), glue.LAYOUT_KWARG: old_layout.to_wire()})
    assert err.value.field == "convention" and err.value.actual == "replace_wrapper (encoder)"
    with pytest.raises(SkewError):
        glue.epd_inputs(old_layout, [np.zeros((i.embedding_length, old.handle_row_width)) for i in old_layout.items],
                        old)


def test_without_a_layout_timestamps_must_match_the_groups(sglang_processor):
    proc = sglang_processor[0]
    epd, _, _ = epd_request(sglang_processor)
    glue.install()
    ok = proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **epd.kwargs())  # checked by derivation
    np.testing.assert_array_equal(ok.input_ids, epd.layout.token_ids)
    short = {**epd.kwargs(), "video_timestamps": [epd.meta["video_timestamps"][0][:-1]]}
    with pytest.raises((GridMismatchError, IndexError)):  # SGLang indexes past the end before the check runs
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **short)
    longer = {**epd.kwargs(), "video_timestamps": [[*epd.meta["video_timestamps"][0], 99.0]]}
    with pytest.raises(GridMismatchError) as err:  # SGLang ignores the extra one
        proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **longer)
    assert err.value.field == "video_timestamps"


def test_lifecycle_and_version_gate(sglang_processor, monkeypatch):
    import sglang
    from sglang.srt.disaggregation.encoder.receiver import MMReceiverBase
    from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor
    from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor

    original = BaseMultimodalProcessor.get_validated_mm_data
    receive = MMReceiverBase.recv_mm_data
    monkeypatch.setattr(sglang, "__version__", "0.5.24")
    with pytest.raises(EngineNotSupportedError):
        glue.install()
    assert "get_validated_mm_data" not in vars(QwenVLImageProcessor) and not glue.is_installed()
    monkeypatch.setattr(sglang, "__version__", "0.5.23")
    report = glue.install()
    assert [h["target"] for h in report["hooks"]] == [
        "sglang.srt.multimodal.processors.qwen_vl:QwenVLImageProcessor.get_validated_mm_data",
        "sglang.srt.disaggregation.encoder.receiver:MMReceiverBase.recv_mm_data"]
    assert glue.install() == glue.status()  # idempotent
    assert QwenVLImageProcessor.get_validated_mm_data is not original
    assert BaseMultimodalProcessor.get_validated_mm_data is original  # other models' processors untouched
    glue.uninstall()
    assert "get_validated_mm_data" not in vars(QwenVLImageProcessor)  # inherited: deleted, not shadowed
    assert QwenVLImageProcessor.get_validated_mm_data is original and MMReceiverBase.recv_mm_data is receive


def test_stamping_types_follow_sglangs_list():
    """``qwen4_exp`` is on the PD side's list but not the encoder's: refused without timestamps, no adapter needed."""
    import inspect

    from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor

    source = inspect.getsource(QwenVLImageProcessor.get_mm_data)
    for model_type in glue.STAMPING_MODEL_TYPES:
        assert f'"{model_type}"' in source, model_type
    with pytest.raises(GridMismatchError):
        glue.check_stamped("qwen4_exp", [[4, 8, 10]], None)
    glue.check_stamped("qwen2_5_vl", [[4, 8, 10]], None)  # stamps nothing: nothing to refuse


def test_items_and_mrope_are_checked_not_only_the_ids(sglang_processor):
    """SGLang's output with its ids intact and one other part off (what a drifted SGLang would produce)."""
    import copy

    proc = sglang_processor[0]
    epd, adapter, _ = epd_request(sglang_processor)
    out = proc.get_validated_mm_data(epd.prompt, epd.sglang_embeddings(), **epd.kwargs())
    args = {"img_grid_thw": epd.meta["img_grid_thw"], "video_grid_thw": epd.meta["video_grid_thw"]}
    assert glue.check_mm_output(out, epd.layout, adapter, **args) == epd.layout
    moved = copy.deepcopy(out)
    (start, end), = moved.mm_items[2].offsets
    moved.mm_items[2].offsets = [(start + 1, end)]
    with pytest.raises(GridMismatchError) as err:
        glue.check_mm_output(moved, epd.layout, adapter, **args)
    assert err.value.field == "mm_items offsets (run 2)"
    with pytest.raises(GridMismatchError):  # and without a layout, by derivation
        glue.check_derived(moved, adapter, **args)
    shifted = copy.deepcopy(out)
    shifted.mrope_positions[:, -1] += 1
    with pytest.raises(GridMismatchError) as err:
        glue.check_mm_output(shifted, epd.layout, adapter, **args)
    assert err.value.field == f"mrope_positions[:, {epd.layout.prompt_len - 1}]"
    delta = copy.deepcopy(out)
    delta.mrope_position_delta = delta.mrope_position_delta + 1
    with pytest.raises(GridMismatchError) as err:
        glue.check_derived(delta, adapter, **args)
    assert err.value.field == "mrope_position_delta"
