"""The handoff on TensorRT-LLM's own code: registration, #20138, and the PD side with mm-handoff installed."""

import numpy as np
import pytest
from upstream import flows
from upstream.flows import LLM_MODULES, PROCESSOR_MODULES

from mm_handoff import validate
from mm_handoff.errors import HandoffError


def test_registration_and_install_on_the_real_classes(upstream, glue):
    upstream.tree.require(*PROCESSOR_MODULES, *LLM_MODULES)
    table = upstream.registry.INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type
    proc = upstream.qwen3vl.Qwen3VLInputProcessorBase
    assert table[upstream.qwen3vl.Qwen3VLModel] is proc and proc.support_mm_disagg is True
    before = {name: vars(cls)[name] for cls, name in ((proc, "build_disagg_prefill_multimodal_inputs"),
                                                      (upstream.llm.BaseLLM, "_preprocess"),
                                                      (upstream.mm_encoder.MultimodalEncoder, "generate_async"))}
    report = glue.install()
    patched = {row["target"] for row in report["hooks"] if row["state"] == "patched"}
    assert {"tensorrt_llm._torch.models.modeling_qwen3vl:Qwen3VLInputProcessorBase."
            "build_disagg_prefill_multimodal_inputs", "tensorrt_llm.llmapi.llm:BaseLLM._preprocess",
            "tensorrt_llm.llmapi.mm_encoder:MultimodalEncoder.generate_async"} <= patched
    assert vars(proc)["build_disagg_prefill_multimodal_inputs"] is not before["build_disagg_prefill_multimodal_inputs"]
    glue.uninstall()
    after = {"build_disagg_prefill_multimodal_inputs": vars(proc)["build_disagg_prefill_multimodal_inputs"],
             "_preprocess": vars(upstream.llm.BaseLLM)["_preprocess"],
             "generate_async": vars(upstream.mm_encoder.MultimodalEncoder)["generate_async"]}
    assert after == before
    assert "_preprocess" not in vars(upstream.mm_encoder.MultimodalEncoder)


def _layout(model, ids, **clip_kw):
    """The aggregated layout of ``ids``, with the grids from upstream's own ``_preprocess`` (HF processor)."""
    from mm_handoff import get_adapter

    feature = model.processor._preprocess(flows.PROMPT, flows.video_inputs(**clip_kw)["multi_modal_data"], {})
    adapter = get_adapter(model.config, tokenizer=model.processor.tokenizer, config=model.config)
    return adapter.derive_layout(ids, video_grid_thw=feature["video_grid_thw"].tolist(), mrope=False)


def _encode(upstream, model, **clip_kw):
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async(flows.video_inputs(**clip_kw))
    return enc, out


def test_20138_on_upstream_code_and_the_validator_rejects_the_stock_handoff(upstream, model, glue):
    upstream.tree.require(*PROCESSOR_MODULES, *LLM_MODULES)
    _, out = _encode(upstream, model, fps=2.0)  # 2 fps: HF keeps all 8 frames (4 temporal groups)
    aggregated = out.prompt_token_ids
    pd = flows.pd_llm(upstream, model.processor, model.config)
    stock = pd._preprocess({"prompt": flows.PROMPT}, None, flows.pd_params(upstream, out))[0]
    assert (len(aggregated), len(stock)) == (70, 38)
    layout = _layout(model, aggregated, fps=2.0)
    with pytest.raises(HandoffError):
        validate(layout, prompt_token_ids=stock, mrope_position_ids=(3, 1, len(aggregated)))


def test_pd_side_with_install_uses_the_encoder_layout(upstream, models, glue, family):
    """Each Qwen3-VL-layout family the tree registers (``family`` is discovered from its model files):
    encoder -> PD on upstream code gives the aggregated prompt and layout."""
    upstream.tree.require(*PROCESSOR_MODULES, *LLM_MODULES)
    model = models(family)
    glue.install(policy="raise")
    _, out = _encode(upstream, model)
    pd = flows.pd_llm(upstream, model.processor, model.config)
    result = pd._preprocess({"prompt": flows.PROMPT}, None, flows.pd_params(upstream, out))
    ids, mm_params = result[0], flows.multimodal_params_of(result)
    assert ids == out.prompt_token_ids
    mm_input = mm_params.multimodal_input
    layout = _layout(model, ids)
    assert mm_input.multimodal_positions == layout.multimodal_positions
    assert mm_input.multimodal_lengths == layout.multimodal_lengths
    assert mm_params.multimodal_data["multimodal_embedding_lengths"] == [item.embedding_length
                                                                          for item in layout.items]
    pads = int(np.isin(np.asarray(ids), [model.config.image_token_id, model.config.video_token_id]).sum())
    assert sum(mm_params.multimodal_data["multimodal_embedding_lengths"]) == pads


def test_stock_pd_side_per_family_is_20138_or_an_upstream_failure(upstream, models, glue, family):
    """Without mm-handoff, per family on upstream code: the PD prompt is the short single-run one (#20138),
    or upstream's own prefill method fails for a family whose HF vision config has no deepstack indexes
    (Qwen3.5: ``build_disagg_prefill_multimodal_inputs`` reads ``vision_config.deepstack_visual_indexes``)."""
    model = models(family)
    _, out = _encode(upstream, model, fps=2.0)
    pd = flows.pd_llm(upstream, model.processor, model.config)
    if getattr(model.config.vision_config, "deepstack_visual_indexes", None) is None:
        with pytest.raises(AttributeError, match="deepstack_visual_indexes") as info:
            pd._preprocess({"prompt": flows.PROMPT}, None, flows.pd_params(upstream, out))
        assert any(str(entry.path).endswith("modeling_qwen3vl.py") for entry in info.traceback)
    else:
        stock = pd._preprocess({"prompt": flows.PROMPT}, None, flows.pd_params(upstream, out))[0]
        assert len(stock) < len(out.prompt_token_ids)


def test_every_registered_family_has_an_adapter_and_a_case(upstream):
    """The families this tree registers (its model files, read by AST) are the ones the live registry holds
    after import, and each resolves to an mm-handoff adapter (a family without one fails here)."""
    from upstream.families import registered_family

    from mm_handoff import get_adapter

    assert upstream.families, "no Qwen3-VL-layout family registered in this tree"
    for name, registration in upstream.families.items():
        _, processor_cls = registered_family(upstream.registry, registration)
        assert get_adapter(name) is not None
        assert getattr(processor_cls, "support_mm_disagg", False), registration
