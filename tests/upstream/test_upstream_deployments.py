"""Deployments on TensorRT-LLM's own code: does the stamp survive the way a deployment moves the handoff?

NVIDIA Dynamo's TensorRT-LLM backend (ai-dynamo 1.6.1, ``dynamo/trtllm/``) moves the encoder's
``DisaggregatedParams`` to the prefill worker like this, modelled step by step below:

1. the encode worker sends ``{"prompt_token_ids": <the frontend's ids, chat template applied, one
   placeholder per item>, "multi_modal_data": ...}`` with no text prompt to ``MultimodalEncoder``
   (``encode_helper.py``, ``_process_full_epd_flow``);
2. it ships ``dataclasses.asdict(params)`` through its request plane as a generic map (msgpack, or JSON
   as the fallback codec; JSON is the stricter of the two and is what runs here);
3. the prefill worker rebuilds ``DisaggregatedParams(**params_dict)``, sets ``request_type`` to
   ``"context_only"`` (``multimodal/embedding_fetcher.py``, ``request_handlers/handler_base.py``) and
   calls ``LLM.generate_async`` with ``{"prompt": tokenizer.decode(ids, skip_special_tokens=False),
   "prompt_token_ids": ids}`` (``multimodal_processor.py``, ``process_openai_request``).
"""

import dataclasses
import json

from upstream import flows
from upstream.flows import LLM_MODULES, PROCESSOR_MODULES


def _dynamo_flow(upstream, model):
    """Encoder on ids without text -> asdict -> JSON -> DisaggregatedParams(**d), context-only -> PD
    ``_preprocess`` with the decoded text and the same ids; returns (encoder output, carried params, PD ids)."""
    tokenizer = model.processor.tokenizer
    raw_ids = tokenizer(flows.PROMPT).input_ids  # what the frontend tokenizes: placeholders not expanded
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async({"prompt_token_ids": raw_ids,
                              "multi_modal_data": flows.video_inputs()["multi_modal_data"]})
    params = flows.params_class(upstream)(**json.loads(json.dumps(dataclasses.asdict(out.disaggregated_params))))
    params.request_type = "context_only"
    pd = flows.pd_llm(upstream, model.processor, model.config)
    inputs = {"prompt": tokenizer.decode(raw_ids, skip_special_tokens=False), "prompt_token_ids": raw_ids}
    return out, params, pd._preprocess(inputs, None, params)[0]


def test_dynamo_transport_keeps_the_stamp_and_the_pd_prompt_is_the_aggregated_one(upstream, model, glue):
    upstream.tree.require(*PROCESSOR_MODULES, *LLM_MODULES)
    glue.install(policy="raise")
    out, params, ids = _dynamo_flow(upstream, model)
    sent = out.disaggregated_params.multimodal_embedding_handles[0]
    assert glue.LAYOUT_KEY in sent and params.multimodal_embedding_handles[0] == sent
    assert ids == out.prompt_token_ids


def test_dynamo_transport_without_mm_handoff_gives_the_short_prompt(upstream, model, glue):
    """The same transport on stock code: the PD prompt is the single-run one (the stamp is what changes it)."""
    upstream.tree.require(*PROCESSOR_MODULES, *LLM_MODULES)
    out, _, ids = _dynamo_flow(upstream, model)
    assert len(ids) < len(out.prompt_token_ids)
