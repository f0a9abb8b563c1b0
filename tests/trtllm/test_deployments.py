"""How deployments move the handoff: the stamp must survive the transport between encoder and PD workers.

NVIDIA Dynamo's TensorRT-LLM backend (ai-dynamo 1.6.1, ``dynamo/trtllm/``) ships the encoder's
``DisaggregatedParams`` as ``dataclasses.asdict(params)`` through its request plane (msgpack, or JSON as the
fallback codec), rebuilds ``DisaggregatedParams(**params_dict)`` on the prefill worker, sets
``request_type = "context_only"`` and passes ``{"prompt": <decoded text>, "prompt_token_ids": <the
frontend's unexpanded ids>}`` to ``LLM.generate_async``. The upstream conformance suite runs Dynamo's own
handlers on TensorRT-LLM's own code (``tests/upstream/test_upstream_dynamo.py``), including the encoder input
without a text prompt, which the stand-in does not model.
"""

import dataclasses
import json

import pytest
from trtllm_helpers import PROMPT, video_request

import mm_handoff.trtllm as glue


def _sp(n=4):
    from tensorrt_llm.sampling_params import SamplingParams

    return SamplingParams(max_tokens=n)


def _dynamo_transport(params, request_type="context_only"):
    """asdict -> the request plane's JSON codec -> DisaggregatedParams(**d)."""
    from tensorrt_llm.disaggregated_params import DisaggregatedParams

    rebuilt = DisaggregatedParams(**json.loads(json.dumps(dataclasses.asdict(params))))
    rebuilt.request_type = request_type
    return rebuilt


def test_dynamo_transport_keeps_the_stamp_and_tokens_equal_aggregated(deployment):
    glue.install(policy="raise")
    dep = deployment()
    enc = dep.encoder.generate_async(video_request()).result()
    params = _dynamo_transport(enc.disaggregated_params, "context_and_generation")  # Dynamo's E + PD mode
    assert params.multimodal_embedding_handles[0][glue.LAYOUT_KEY] == \
        enc.disaggregated_params.multimodal_embedding_handles[0][glue.LAYOUT_KEY]
    inputs = {"prompt": PROMPT, "prompt_token_ids": dep.tokenizer.encode(PROMPT)}
    out_pd = dep.pd.generate_async(inputs, sampling_params=_sp(), disaggregated_params=params).result()
    out_agg = dep.aggregated.generate_async(video_request(), sampling_params=_sp()).result()
    assert out_pd.prompt_token_ids == list(enc.prompt_token_ids) == out_agg.prompt_token_ids
    assert out_pd.outputs[0].token_ids == out_agg.outputs[0].token_ids


def test_a_transport_that_drops_the_handle_keys_is_refused_by_name(deployment):
    """Dynamo's embedding-cache path turns the handles into tensors and sends fresh params: nothing is carried.
    A transport that rebuilds the handles with their engine fields only loses the stamp the same way."""
    from mm_handoff.errors import HandoffError

    glue.install(policy="raise")
    dep = deployment()
    enc = dep.encoder.generate_async(video_request()).result()
    params = _dynamo_transport(enc.disaggregated_params)
    params.multimodal_embedding_handles = [{k: v for k, v in h.items() if not k.startswith("mm_handoff.")}
                                           for h in params.multimodal_embedding_handles]
    with pytest.raises(HandoffError) as info:
        dep.pd._preprocess({"prompt": PROMPT}, _sp(), params)
    assert "multimodal_embedding_handles" in info.value.field
