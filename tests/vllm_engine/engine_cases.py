"""mm_handoff.vllm on the real vLLM engine: aggregated vs the embeds-path E/PD built by the glue.

Every case runs one request twice through the same engine: aggregated (pixels; vLLM's processor and
vision tower) and E/PD (the project's HF encoder -> ``embeds_request`` -> vLLM's embeds path). Both
must expand to the encoder's ids exactly and give the same greedy tokens. Then the mistakes: the
already-expanded prompt (silent in vLLM, caught here), wrong timestamps, and a vLLM whose expansion
drops the template's outer markers (the other processor convention).

Greedy tokens are compared in full on the float32 engine (Qwen3-VL). vLLM's CPU build runs Qwen3.5
in bfloat16 only, where its own vision tower (aggregated) and HF's (E/PD) round differently; there
the ids must still be equal and the first greedy token (measured: the image case parts at the 4th
of 6 tokens, the video cases agree on all 6).
"""

import numpy as np
import pytest

import mm_handoff.vllm as glue
from mm_handoff.errors import HandoffError, TokenMismatchError
from mm_handoff.hf.encode import encode
from mm_handoff.hf.processors import synthetic_clip, synthetic_image, video_messages
from mm_handoff.vllm.demo import ENGINE_DTYPES

MAX_TOKENS = 6


def _clip(frames, *, seed=0, step=1, fps=24.0, size=(64, 96)):
    indices = list(range(0, step * frames, step))
    return synthetic_clip(frames, *size, fps=fps, seed=seed, frames_indices=indices,
                          total_num_frames=indices[-1] + 1)


def _case(name):
    """``(images, clips)`` of one case of the parity suite that fits the engine."""
    return {
        "image": ([synthetic_image(64, 96)], []),
        "video": ([], [_clip(8)]),
        "image+video": ([synthetic_image(64, 64, seed=3)], [_clip(6, seed=1)]),
        "two videos": ([], [_clip(4, seed=1), _clip(6, seed=2, size=(96, 64))]),
        "odd frames": ([], [_clip(7, seed=4)]),
        "sampled frames": ([], [_clip(8, seed=5, step=12)]),  # every 12th frame of a 24 fps source
    }[name]


def _vllm_video(clip):
    frames, meta = clip
    return frames, {"fps": meta.fps, "frames_indices": list(meta.frames_indices), "duration": meta.duration,
                    "total_num_frames": meta.total_num_frames, "width": meta.width, "height": meta.height,
                    "do_sample_frames": False}


def _run(llm, prompt):
    from vllm import SamplingParams

    (out,) = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS), use_tqdm=False)
    return out


def _raised_in_engine(llm, prompt, error_type):
    """The typed error the installed check raises for ``prompt`` (installed for this request only; ``prompt`` a
    dict, or a function that builds it once the check is installed: a carried layout needs the check)."""
    glue.install()
    try:
        with pytest.raises(error_type) as err:
            _run(llm, prompt() if callable(prompt) else prompt)
    finally:
        glue.uninstall()
    return err.value


def _encode(engine, name):
    llm, model, processor, adapter, family = engine
    images, clips = _case(name)
    enc = encode(model, processor, adapter, messages=video_messages(n_videos=len(clips), n_images=len(images)),
                 images=images or None, videos=[c[0] for c in clips] or None,
                 video_metadata=[c[1] for c in clips] or None, request_id=name)
    request = glue.embeds_request(enc.layout, glue.item_embeddings(enc.embeddings, enc.deepstack, enc.item_rows),
                                  adapter, video_metadata=enc.video_metadata, request_id=name)
    return enc, request, images, clips


def _aggregated(enc, images, clips):
    data = {}
    if images:
        data["image"] = images
    if clips:
        data["video"] = [_vllm_video(c) for c in clips]
    return {"prompt_token_ids": enc.raw_prompt_ids.tolist(), "multi_modal_data": data}


@pytest.mark.parametrize("name", ["image", "video", "image+video", "two videos", "odd frames", "sampled frames"])
def test_embeds_path_equals_aggregated(engine, name):
    llm, adapter, family = engine[0], engine[3], engine[4]
    enc, request, images, clips = _encode(engine, name)
    np.testing.assert_array_equal(request.prompt_token_ids, enc.raw_prompt_ids)
    aggregated = _run(llm, _aggregated(enc, images, clips))
    epd = _run(llm, request.prompt())
    np.testing.assert_array_equal(aggregated.prompt_token_ids, enc.layout.token_ids)
    np.testing.assert_array_equal(epd.prompt_token_ids, enc.layout.token_ids)
    assert glue.check_output(epd, enc.layout.to_wire(), adapter) == enc.layout
    compared = MAX_TOKENS if ENGINE_DTYPES[family] == "float32" else 1
    assert list(epd.outputs[0].token_ids)[:compared] == list(aggregated.outputs[0].token_ids)[:compared]


def test_pre_expanded_prompt_is_silent_in_vllm_and_caught(engine):
    llm, adapter = engine[0], engine[3]
    enc, request, _, _ = _encode(engine, "video")
    wrong = {"prompt_token_ids": enc.layout.token_ids.tolist(), "multi_modal_data": request.multi_modal_data}
    out = _run(llm, wrong)  # vLLM accepts it and expands the first pad again
    assert len(out.prompt_token_ids) > enc.layout.prompt_len
    with pytest.raises(TokenMismatchError) as err:
        glue.check_output(out, enc.layout.to_wire(), adapter)
    assert err.value.index == enc.layout.items[0].runs[0].offset
    glue.install()
    try:
        with pytest.raises(TokenMismatchError) as err:
            _run(llm, wrong)
        assert err.value.index == enc.layout.items[0].runs[0].offset + 1  # the second pad of the raw prompt
        assert len(_run(llm, request.prompt(carry_layout=True)).prompt_token_ids) == enc.layout.prompt_len
    finally:
        glue.uninstall()


def test_wrong_timestamps_caught_in_engine(engine):
    llm = engine[0]
    enc, request, _, _ = _encode(engine, "video")
    shifted = {**request.multi_modal_data["video"], "timestamps": [[t + 1.0 for t in request.multi_modal_data[
        "video"]["timestamps"][0]]]}
    error = _raised_in_engine(
        llm, lambda: {**request.prompt(carry_layout=True), "multi_modal_data": {"video": shifted}}, TokenMismatchError)
    assert error.index == enc.layout.items[0].timestamp_spans[0][0] + 1  # "<0.x" -> "<1.x"


def test_convention_drift_caught(engine, monkeypatch):
    """A vLLM that replaces the whole vision trio (transformers <= 5.9's convention) under a newer HF."""
    from vllm.model_executor.models.qwen3_vl import Qwen3VLMultiModalProcessor

    llm, processor, adapter = engine[0], engine[2], engine[3]
    assert glue.vllm_convention(processor) == adapter.convention == "pad_only"
    enc, request, _, _ = _encode(engine, "odd frames")
    monkeypatch.setattr(Qwen3VLMultiModalProcessor, "_expands_only_video_token", staticmethod(lambda proc: False))
    out = _run(llm, request.prompt())
    with pytest.raises(TokenMismatchError) as err:
        glue.check_output(out, enc.layout, adapter)
    assert err.value.index == enc.layout.items[0].timestamp_spans[0][0] - 1  # the outer <|vision_start|> is gone


def test_refuses_wrong_embedding_width(engine):
    enc, request, _, _ = _encode(engine, "image")
    narrow = [enc.embeddings[:, :8]]
    with pytest.raises(HandoffError):
        glue.embeds_request(enc.layout, narrow, engine[3])


def test_convention_skew_between_encoder_and_pd_is_named(engine):
    """An encoder on transformers <= 5.9 (``replace_wrapper``) and this PD (>= 5.10: ``pad_only``): the carried
    layout is refused in the engine with a typed error naming the convention, before any token is compared."""
    import mm_handoff
    from mm_handoff.errors import SkewError
    from mm_handoff.layout.spec import REPLACE_WRAPPER

    llm, processor, adapter, family = engine[0], engine[2], engine[3], engine[4]
    enc, request, _, clips = _encode(engine, "sampled frames")
    old = mm_handoff.get_adapter(family, tokenizer=processor.tokenizer, convention=REPLACE_WRAPPER)
    grids = [list(i.grid_thw) for i in enc.layout.items]
    meta = [{"fps": m.fps, "frames_indices": list(m.frames_indices)} for _, m in clips]
    old_layout = old.derive_layout(old.rebuild_token_ids(request.prompt_token_ids, video_grid_thw=grids,
                                                         video_metadata=meta), video_grid_thw=grids)
    prompt = {**request.prompt(), "mm_processor_kwargs": {glue.LAYOUT_KWARG: old_layout.to_wire()}}
    error = _raised_in_engine(llm, prompt, SkewError)
    assert error.field == "convention" and error.actual == "replace_wrapper (encoder)"
    with pytest.raises(SkewError):  # after the fact too
        glue.check_output(_run(llm, request.prompt()), old_layout, adapter)
