"""E -> PD through the stand-in: the bug without mm-handoff, parity with it, and the admission check."""

import threading

import numpy as np
import pytest
from trtllm_helpers import IMAGE_PROMPT, PROMPT, video_request

import mm_handoff.trtllm as glue
from mm_handoff.errors import HandoffError, MropeLengthError


def _sp(n=4):
    from tensorrt_llm.sampling_params import SamplingParams

    return SamplingParams(max_tokens=n)


def _encode(dep, request=None):
    out = dep.encoder.generate_async(request or video_request()).result()
    out.disaggregated_params.request_type = "context_and_generation"
    return out


def _aggregated_reference(dep, request):
    """What the aggregated path builds: create_input_processor_with_hash on the same processor."""
    from tensorrt_llm.inputs import create_input_processor_with_hash

    ids, extra = create_input_processor_with_hash(dep.aggregated.input_processor)(request, _sp())
    return ids, extra["multimodal_input"], extra["multimodal_data"]["multimodal_embedding_lengths"]


def test_stock_engine_slices_the_longer_mrope_silently(deployment):
    """Without mm-handoff the PD prompt is 16 ids shorter, the mRoPE ids are cut, and tokens differ."""
    dep = deployment()
    enc = _encode(dep)
    out_pd = dep.pd.generate_async({"prompt": PROMPT}, sampling_params=_sp(),
                                   disaggregated_params=enc.disaggregated_params).result()
    out_agg = dep.aggregated.generate_async(video_request(), sampling_params=_sp()).result()
    assert len(enc.prompt_token_ids) - len(out_pd.prompt_token_ids) == 2 * 6 + 2 * 2  # 2 timestamps, 2 markers
    assert out_pd._stand_in_trace["context_position_ids"].shape[-1] == len(out_pd.prompt_token_ids)
    assert out_pd.outputs[0].token_ids != out_agg.outputs[0].token_ids


def test_installed_pd_prompt_and_layout_equal_the_aggregated_path(deployment):
    """Installed: PD prompt == encoder prompt, and the layout equals create_input_processor_with_hash's."""
    glue.install()
    dep = deployment()
    request = video_request()
    enc = _encode(dep, request)
    assert glue.LAYOUT_KEY in enc.disaggregated_params.multimodal_embedding_handles[0]

    ids, pd_prompt, _, pd_params, _ = dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)
    agg_ids, agg_input, agg_emb_lengths = _aggregated_reference(dep, request)
    assert ids == list(enc.prompt_token_ids) == list(agg_ids)
    pd_input = pd_params.multimodal_input
    for field in ("multimodal_positions", "multimodal_lengths", "multimodal_item_run_cu_offsets",
                  "multimodal_run_positions", "multimodal_run_lengths"):
        assert getattr(pd_input, field) == getattr(agg_input, field), field
    assert pd_params.multimodal_data["multimodal_embedding_lengths"] == agg_emb_lengths
    assert "special_token_offsets" not in pd_params.multimodal_data
    assert len(agg_input.multimodal_run_positions) == 2  # one run per temporal group


def test_installed_greedy_tokens_equal_aggregated(deployment):
    """End to end through the (in-process) worker: same prompt length, same tokens as aggregated."""
    glue.install()
    dep = deployment()
    enc = _encode(dep)
    out_pd = dep.pd.generate_async({"prompt": PROMPT}, sampling_params=_sp(),
                                   disaggregated_params=enc.disaggregated_params).result()
    out_agg = dep.aggregated.generate_async(video_request(), sampling_params=_sp()).result()
    assert len(out_pd.prompt_token_ids) == len(out_agg.prompt_token_ids)
    assert out_pd.outputs[0].token_ids == out_agg.outputs[0].token_ids


def test_prefill_request_uses_the_public_preprocessed_inputs_path(deployment):
    """prefill_request builds PreprocessedInputs + a copied DisaggregatedParams; tokens equal aggregated."""
    glue.install()
    dep = deployment()
    enc = _encode(dep)
    req = glue.prefill_request(enc, processor=dep.pd.input_processor)
    assert req.disaggregated_params is not enc.disaggregated_params
    assert req.disaggregated_params.request_type == "context_and_generation"
    assert req.inputs.prompt_token_ids == list(enc.prompt_token_ids)
    out = dep.pd.generate_async(req.inputs, sampling_params=_sp(),
                                disaggregated_params=req.disaggregated_params).result()
    out_agg = dep.aggregated.generate_async(video_request(), sampling_params=_sp()).result()
    assert out.outputs[0].token_ids == out_agg.outputs[0].token_ids


def test_prefill_request_rejects_an_unstamped_encoder_output(deployment):
    """Without the layout (encoder not installed) and without an adapter it names the missing key."""
    dep = deployment()
    enc = _encode(dep)
    with pytest.raises(HandoffError, match="mm_handoff.layout"):
        glue.prefill_request(enc)


def test_tampered_handoff_is_rejected_at_admission_and_a_concurrent_good_one_is_not(deployment):
    """A shortened mRoPE handle fails admission naming the request; a concurrent good request passes."""
    glue.install()
    dep = deployment()
    bad, good = _encode(dep), _encode(dep)
    bad.disaggregated_params.disagg_request_id = 4242
    size = bad.disaggregated_params.mrope_position_ids_handle["tensor_size"]
    bad.disaggregated_params.mrope_position_ids_handle["tensor_size"] = [3, 1, size[-1] - 3]
    results = {}
    barrier = threading.Barrier(2)

    def run(name, enc):
        barrier.wait()
        try:
            results[name] = dep.pd.preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)
        except Exception as exc:  # collected and asserted below
            results[name] = exc

    threads = [threading.Thread(target=run, args=(n, e)) for n, e in (("bad", bad), ("good", good))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    error = results["bad"]
    assert isinstance(error, MropeLengthError) and isinstance(error, ValueError)
    assert error.request_id == 4242 and "request 4242" in str(error)
    assert error.field == "mrope_position_ids.shape[-1]" and error.actual == size[-1] - 3
    assert results["good"].prompt_token_ids == list(good.prompt_token_ids)


def test_tampered_layout_payload_fails_its_checksum(deployment):
    """An altered wire payload is refused at the prefill point (WireFormatError, a ValueError)."""
    glue.install()
    dep = deployment()
    enc = _encode(dep)
    wire = enc.disaggregated_params.multimodal_embedding_handles[0][glue.LAYOUT_KEY]
    wire["mrope_position_delta"] = (wire["mrope_position_delta"] or 0) + 1
    with pytest.raises(ValueError, match="checksum"):
        dep.pd.generate_async({"prompt": PROMPT}, sampling_params=_sp(),
                              disaggregated_params=enc.disaggregated_params)


def test_images_keep_working_with_and_without_a_carried_layout(deployment):
    """An image request matches aggregated when stamped, and the stock result stands when nothing is carried."""
    glue.install()
    dep = deployment()
    image = np.zeros((64, 64, 3), dtype=np.uint8)
    request = {"prompt": IMAGE_PROMPT, "multi_modal_data": {"image": [image]}}
    out_agg = dep.aggregated.generate_async(request, sampling_params=_sp()).result()
    for strip in (False, True):
        enc = dep.encoder.generate_async(request).result()
        dp = enc.disaggregated_params
        dp.request_type = "context_and_generation"
        if strip:
            for key in (glue.LAYOUT_KEY, glue.GRIDS_KEY, glue.VIDEO_METADATA_KEY):
                dp.multimodal_embedding_handles[0].pop(key)
        out = dep.pd.generate_async({"prompt": IMAGE_PROMPT}, sampling_params=_sp(), disaggregated_params=dp).result()
        assert out.prompt_token_ids == out_agg.prompt_token_ids
        assert out.outputs[0].token_ids == out_agg.outputs[0].token_ids


def test_cosmos3_override_is_wrapped_too(deployment, monkeypatch):
    """issue-20138's Cosmos3InputProcessor (own override, no super()) is found in the registry and wrapped."""
    monkeypatch.setenv("TLLM_STAND_IN_COSMOS3_VARIANT", "issue-20138")
    report = glue.install()
    key = "tensorrt_llm._torch.models.modeling_cosmos3:Cosmos3InputProcessor.build_disagg_prefill_multimodal_inputs"
    assert {h["target"]: h["state"] for h in report["hooks"]}[key] == "patched"
    dep = deployment("stand-in/cosmos3", model_type="cosmos3", architecture="Cosmos3ForConditionalGeneration")
    assert type(dep.pd.input_processor).__name__ == "Cosmos3InputProcessor"
    enc = _encode(dep)
    ids = dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)[0]
    assert ids == list(enc.prompt_token_ids)


def test_handles_of_another_request_are_rejected(deployment):
    """A PD request whose own prompt is not the one the encoder expanded (mixed-up handoffs) fails loudly."""
    from mm_handoff.errors import TokenMismatchError

    glue.install()
    dep = deployment()
    enc = _encode(dep)
    other = PROMPT.replace("Describe.", "Summarise.")
    with pytest.raises(TokenMismatchError) as info:
        dep.pd._preprocess({"prompt": other}, _sp(), enc.disaggregated_params)
    assert info.value.field.startswith("prompt text") and isinstance(info.value, ValueError)
    ids = dep.pd._preprocess({"prompt": PROMPT}, _sp(), enc.disaggregated_params)[0]
    assert ids == list(enc.prompt_token_ids)
