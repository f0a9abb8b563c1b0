"""What reading upstream found, confirmed on upstream's code; each test failed on the glue before its fix."""

import dataclasses

import pytest
from upstream import flows

from mm_handoff.errors import EngineNotSupportedError, HandoffError

LAYOUT_KEY = "mm_handoff.layout"


def test_encoder_stamp_leaves_the_engine_handles_to_the_worker(upstream, model, glue):
    """The grids become one-use SharedTensorContainer handles in ``_preprocess``; the stamp must not
    consume them, so the worker (another process) still restores every one."""
    upstream.tree.require("tensorrt_llm.llmapi.llm", "tensorrt_llm.llmapi.mm_encoder",
                          "tensorrt_llm._torch.shared_tensor.shared_tensor", "tensorrt_llm.inputs.multimodal")
    glue.install(policy="raise")
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async(flows.video_inputs())
    assert LAYOUT_KEY in out.disaggregated_params.multimodal_embedding_handles[0]
    handles = flows.grid_handles(enc._executor.requests[0]["multimodal_params"])
    assert handles, "the engine's grids travel to the worker as handles"
    restored = flows.worker_restores(upstream.tree, handles)
    assert [state for state, _ in restored] == ["ok"] * len(handles), restored


def test_get_prompt_token_ids_era_is_out_of_the_gate(upstream, glue, monkeypatch):
    """That era returns (ids, lengths, offsets), rewrites pads out of vocabulary and takes images only;
    mm-handoff does not guess at it: install refuses, naming the hook."""
    proc = upstream.qwen3vl.Qwen3VLInputProcessorBase
    monkeypatch.delattr(proc, "build_disagg_prefill_multimodal_inputs")
    monkeypatch.setattr(proc, "get_prompt_token_ids", lambda self, inputs, mm_handles: None, raising=False)
    with pytest.raises(EngineNotSupportedError, match="build_disagg_prefill_multimodal_inputs"):
        glue.install()
    assert not glue.is_installed()


def _params_with(upstream, field: str):
    from tensorrt_llm.executor.params.disaggregation import DisaggregatedParams as Moved

    @dataclasses.dataclass(slots=True, kw_only=True)
    class DisaggregatedParams(Moved):
        pass

    DisaggregatedParams.__dataclass_fields__[field] = dataclasses.field(default=None)
    DisaggregatedParams.__dataclass_fields__[field].name = field
    return DisaggregatedParams


def test_the_mode_reads_the_params_class_llm_py_uses(upstream, glue, monkeypatch):
    """Recent upstream moved DisaggregatedParams to executor/params/disaggregation.py; the carrier check
    must read the class ``llm.py`` imports, not the old module: with upstream's carrier there, install
    goes to mode=validate (no prefill rewrite, everything else patched)."""
    moved = _params_with(upstream, "multimodal_layout")
    upstream.tree.require("tensorrt_llm.executor.params.disaggregation", "tensorrt_llm.llmapi.llm")
    monkeypatch.setattr(upstream.llm, "DisaggregatedParams", moved)
    report = glue.install()
    assert report["mode"] == "validate" and report["installed"] and not report["standing_down"]
    assert report["upstream_fix_fields"] == ["multimodal_layout"]


def test_upstream_runs_carrier_is_decided_and_shown(upstream, glue, monkeypatch):
    """``multimodal_item_runs`` carries runs, not the expanded prompt: mm-handoff stays installed and says so."""
    monkeypatch.setattr(upstream.llm, "DisaggregatedParams", _params_with(upstream, "multimodal_item_runs"))
    report = glue.install()
    assert report["installed"] and not report["standing_down"]
    assert report["upstream_carriers"]["multimodal_item_runs"].startswith("present")


def test_vanished_slice_hooks_are_shown_unavailable(upstream, glue):
    """Worker hooks whose module or method this tree lacks (a runner split out, a model engine whose slice
    moved to the runner) are ``unavailable``, with the reason; the ones upstream's code has are patched."""
    import importlib

    glue.install()
    rows = [row for row in glue.status()["hooks"] if row["process"] == "worker"]
    real = {name for name, (kind, _) in upstream.tree.report().items() if kind == "upstream"}

    def has(target):
        module, _, path = target.partition(":")
        if module not in real:
            return False
        owner = importlib.import_module(module)
        for part in path.split("."):
            owner = vars(owner).get(part) if isinstance(owner, type) else getattr(owner, part, None)
            if owner is None:
                return False
        return True

    absent = [row for row in rows if not has(row["target"])]
    present = [row for row in rows if has(row["target"])]
    assert absent and all(row["state"] == "unavailable" for row in absent), rows
    assert all("slice check unavailable on this version" in row["reason"] for row in absent)
    assert all(row["state"] == "patched" for row in present), present


def test_a_request_that_skips_the_stamp_is_named(upstream, model, glue):
    """``preprocess()`` then ``generate_async(PreprocessedInputs)`` bypasses the encoder's ``_preprocess``."""
    glue.install(policy="raise")
    enc = flows.encoder(upstream, model.processor, model.config)
    pre = enc.preprocess(flows.video_inputs())
    with pytest.raises(HandoffError, match="PreprocessedInputs"):
        enc.generate_async(pre)


@pytest.mark.parametrize("fps, hf_keeps_all", [(24.0, False), (2.0, True)])
def test_rebuild_metadata_is_the_frames_hf_used(upstream, model, glue, fps, hf_keeps_all):
    """HF samples frames by default (2 fps): from 8 frames at 24 fps it keeps 4, at 2 fps all 8. A rebuild
    from the carried metadata must give the encoder's ids, or be refused naming the metadata (never
    silently different ids)."""
    glue.install(policy="rebuild")
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async(flows.video_inputs(fps=fps))
    params = flows.pd_params(upstream, out)
    params.multimodal_embedding_handles[0].pop(LAYOUT_KEY)
    pd = flows.pd_llm(upstream, model.processor, model.config)
    if hf_keeps_all:
        assert pd._preprocess({"prompt": flows.PROMPT}, None, params)[0] == out.prompt_token_ids
    else:
        with pytest.raises(HandoffError, match="mm_handoff.video_metadata"):
            pd._preprocess({"prompt": flows.PROMPT}, None, params)


def test_version_gate_is_what_the_conformance_runs_verified(upstream, glue):
    from mm_handoff.trtllm._lifecycle import version_supported

    assert version_supported(upstream.tree.version)
    assert not version_supported("1.2.0rc0")  # the get_prompt_token_ids era


def test_qwen3_5_wrapper_of_the_get_prompt_token_ids_era_is_refused(upstream, glue):
    """The older modeling_qwen3_5.py (87,053 chars) registers its own ``Qwen3_5InputProcessorBase`` with
    ``get_prompt_token_ids`` (images only, pads rewritten to ``vocab_size + 1``) and no prefill hook. A class
    of that name and shape, registered through upstream's own ``register_input_processor``, makes install
    refuse, naming the class and the era; nothing is patched."""
    registry = upstream.registry
    base = registry.BaseMultimodalInputProcessor
    wrapper = type("Qwen3_5InputProcessorBase", (base,), {
        "__module__": "tensorrt_llm._torch.models.modeling_qwen3_5",
        "get_prompt_token_ids": lambda self, inputs, mm_handles: None})
    model_cls = type("Qwen3_5VLModel", (), {"__module__": "tensorrt_llm._torch.models.modeling_qwen3_5"})
    meta = registry.MultimodalPlaceholderMetadata(placeholder_map={"image": "<|image_pad|>"})
    registry.register_input_processor(wrapper, model_type="qwen3_5_era_probe", placeholder_metadata=meta)(model_cls)
    table = registry.INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type
    try:
        with pytest.raises(EngineNotSupportedError, match="Qwen3_5InputProcessorBase.*get_prompt_token_ids"):
            glue.install()
        assert not glue.is_installed()
    finally:
        del table[model_cls]
        registry.MULTIMODAL_PLACEHOLDER_REGISTRY._multimodal_placeholder_by_model_type.pop("qwen3_5_era_probe", None)


def test_upstreams_own_carrier_producer_without_its_consumer(upstream, model, glue, monkeypatch):
    """The newer mm_encoder.py builds ``DisaggregatedParams(multimodal_layout=...)`` from the encoder's expanded
    ids (``MultimodalEncoder.build_prefill_disaggregated_params``). In a tree whose params class has no such
    field, install stays (upstream cannot carry the layout), and upstream's own producer fails on this tree's
    ``DisaggPrefillMultimodalInputs`` (no ``encoder_token_lengths``): producer read, consumer not. Given a
    params class with the field, install goes to mode=validate."""
    build = getattr(upstream.mm_encoder.MultimodalEncoder, "build_prefill_disaggregated_params", None)
    if build is None:
        pytest.skip("not applicable: this tree's mm_encoder.py has no build_prefill_disaggregated_params")
    if "multimodal_layout" in getattr(flows.params_class(upstream), "__dataclass_fields__", {}):
        pytest.skip("not applicable: this tree has the consumer too (its DisaggregatedParams carries "
                    "multimodal_layout; test_upstream_carrier.py runs that flow)")
    report = glue.install()
    assert report["installed"] and not report["standing_down"]
    assert "multimodal_layout" not in report["upstream_carriers"]
    enc = flows.encoder(upstream, model.processor, model.config)
    pre = enc.preprocess(flows.video_inputs())  # upstream's own preprocess: the encoder's expanded ids
    with pytest.raises(TypeError, match="encoder_token_lengths|multimodal_layout"):
        build(pre)
    glue.uninstall()
    monkeypatch.setattr(upstream.llm, "DisaggregatedParams", _params_with(upstream, "multimodal_layout"))
    report = glue.install()
    assert report["mode"] == "validate" and report["upstream_fix_fields"] == ["multimodal_layout"]
