"""Aggregated vs E/PD on one GPU with real TensorRT-LLM: the reproduction of TensorRT-LLM #20138, fixed.

Skipped unless the real ``tensorrt_llm`` (not the stand-in), CUDA and a Qwen3-VL checkpoint
(``MM_HANDOFF_QWEN3VL_CKPT``: a local path or hub id) are all present. It mirrors the bug report's
script: a synthetic 10 s / 24 fps clip, 40 uniformly spaced frames with metadata, ``do_sample_frames``
off, greedy decoding; the encoder (``MultimodalEncoder``) and the PD ``LLM`` share the GPU and the
process (``TLLM_WORKER_USE_SINGLE_PROCESS=1``, so the worker-side checks run too). With mm-handoff
installed, the PD prompt has the aggregated length and the greedy tokens are identical.

Frame size defaults to 448x252 to keep the run short; ``MM_HANDOFF_PARITY_HW=720x1280`` gives the
report's 20 x 36 x 66 grid (11,880 visual tokens).
"""

import os

import numpy as np
import pytest

CKPT = os.environ.get("MM_HANDOFF_QWEN3VL_CKPT")


def _real_engine():
    try:
        import tensorrt_llm
    except Exception:
        return None
    return None if getattr(tensorrt_llm, "_STAND_IN", False) else tensorrt_llm


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


pytestmark = [
    pytest.mark.skipif(not CKPT, reason="set MM_HANDOFF_QWEN3VL_CKPT to a Qwen3-VL checkpoint"),
    pytest.mark.skipif(_real_engine() is None, reason="needs the real tensorrt_llm"),
    pytest.mark.skipif(not _cuda(), reason="needs CUDA"),
]


def _clip(n_frames=40, fps=24.0, seconds=10.0):
    import torch
    from tensorrt_llm.inputs.multimodal_data import VideoData

    h, w = (int(x) for x in os.environ.get("MM_HANDOFF_PARITY_HW", "252x448").split("x"))
    total = int(fps * seconds)
    idx = np.linspace(0, total - 1, n_frames).astype(int)
    yy, xx = np.mgrid[0:h, 0:w]
    frames = []
    for i in idx:  # a moving gradient with a frame-dependent square: content changes over time
        img = np.stack([(xx + 3 * i) % 256, (yy + 2 * i) % 256, np.full_like(xx, (5 * i) % 256)], -1)
        y0, x0 = (7 * i) % (h - 32), (11 * i) % (w - 32)
        img[y0:y0 + 32, x0:x0 + 32] = 255
        frames.append(torch.from_numpy(img.astype(np.uint8)).permute(2, 0, 1).float() / 255)
    return VideoData(frames=frames, metadata={"fps": fps, "total_num_frames": total, "duration": seconds,
                                              "frames_indices": idx.tolist()})


@pytest.fixture(scope="module")
def parity_run():
    from tensorrt_llm import LLM, MultimodalEncoder, SamplingParams
    from tensorrt_llm.llmapi import KvCacheConfig
    from transformers import AutoTokenizer

    import mm_handoff.trtllm as glue

    os.environ["TLLM_WORKER_USE_SINGLE_PROCESS"] = "1"
    glue.install()
    tok = AutoTokenizer.from_pretrained(CKPT)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text":
          'List the events as JSON {"events": [{"start_s", "end_s", "description"}]}.'}]}],
        tokenize=False, add_generation_prompt=True)
    mm = {"prompt": prompt, "multi_modal_data": {"video": [_clip()]},
          "mm_processor_kwargs": {"do_sample_frames": False}}
    sp = SamplingParams(temperature=0, top_k=1, max_tokens=64)
    kw = dict(model=CKPT, max_num_tokens=16384, max_seq_len=32768, disable_overlap_scheduler=True,
              kv_cache_config=KvCacheConfig(free_gpu_memory_fraction=0.4))
    try:
        llm = LLM(**kw)
        out_a = llm.generate(mm, sp)
        llm.shutdown()

        os.environ["TLLM_MULTIMODAL_DISAGGREGATED"] = "1"
        llm = LLM(**kw)
        enc = MultimodalEncoder(model=CKPT, max_num_tokens=65536)
        enc_out = enc.generate_async(mm).result()
        dp = enc_out.disaggregated_params
        dp.request_type = "context_and_generation"
        out_b = llm.generate_async({"prompt": prompt}, sampling_params=sp, disaggregated_params=dp).result()
        req = glue.prefill_request(enc_out, processor=llm.input_processor)
        out_c = llm.generate_async(req.inputs, sampling_params=sp,
                                   disaggregated_params=req.disaggregated_params).result()
        enc.shutdown()
        llm.shutdown()
    finally:
        os.environ.pop("TLLM_MULTIMODAL_DISAGGREGATED", None)
        glue.uninstall()
    return out_a, enc_out, out_b, out_c


def test_prompt_lengths_equal(parity_run):
    """Aggregated, encoder and PD prompts have one length (the report: 12,069 vs 11,911 stock)."""
    out_a, enc_out, out_b, out_c = parity_run
    assert len(out_a.prompt_token_ids) == len(enc_out.prompt_token_ids) == len(out_b.prompt_token_ids)
    assert list(out_b.prompt_token_ids) == list(out_a.prompt_token_ids)


def test_greedy_video_tokens_equal(parity_run):
    """Greedy output of E/PD (patched path and the public prefill_request path) equals aggregated."""
    out_a, _, out_b, out_c = parity_run
    assert list(out_b.outputs[0].token_ids) == list(out_a.outputs[0].token_ids)
    assert list(out_c.outputs[0].token_ids) == list(out_a.outputs[0].token_ids)
