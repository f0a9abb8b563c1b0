"""The contract without an engine: the encoder derives a layout, it travels as JSON, the PD side accepts it.

Runs as it is with only `pip install <this checkout>` (attrs and numpy): `python examples/engine_free.py`.
"""

import json

import mm_handoff

# In a deployment: mm_handoff.get_adapter(hf_config, tokenizer=tokenizer), which reads the ids and sizes of the
# checkpoint (hidden size, deepstack levels) and settles text that touches a video's first timestamp
adapter = mm_handoff.get_adapter("qwen3_vl")

# What the PD side has of the request: its prompt before expansion (the Qwen3 tokenizer's ids of the chat
# template's "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n"
# + "<|im_start|>assistant\n"), the processor's video_grid_thw and the video metadata it returns with
# return_metadata=True
prompt_ids = [151644, 872, 198, 151652, 151656, 151653, 74785, 419, 2766, 13, 151645, 198, 151644, 77091, 198]
grid = [[20, 36, 66]]  # 40 frames of 720p
metadata = [{"fps": 24.0, "frames_indices": list(range(40)), "total_num_frames": 40}]

# Encoder side: the processor's expanded input_ids (here rebuilt from the prompt: the same ids HF gives)
encoder_ids = adapter.rebuild_token_ids(prompt_ids, video_grid_thw=grid, video_metadata=metadata)
layout = adapter.derive_layout(encoder_ids, video_grid_thw=grid)
payload = json.dumps(layout.to_wire())  # what travels with the embeddings
print(f"encoder: {layout.prompt_len} ids, {len(payload)} bytes on the wire")

# PD side: decoded, re-validated and checked against this side's own request in one step. One embedding per
# item: rows x (hidden x (1 + deepstack levels)), 11,880 x 16,384 for Qwen3-VL-8B
prefill = mm_handoff.accept_layout(payload, adapter, embedding_shapes=[(layout.num_pads, adapter.handle_row_width)],
                                   prompt_token_ids=prompt_ids, video_grid_thw=grid, video_metadata=metadata,
                                   request_id="req-1")
inputs = prefill.to_disagg_prefill_inputs()  # TensorRT-LLM's DisaggPrefillMultimodalInputs keyword arguments
print(f"PD side: accepted, {len(inputs['prompt_token_ids'])} ids, mRoPE delta {prefill.mrope_position_delta}")

# Today's stock PD prompt (one pad run per video, TensorRT-LLM #20138) is refused, typed, naming the request
stock_ids = adapter.stock_token_ids(prompt_ids, video_grid_thw=grid)
try:
    mm_handoff.accept_layout(payload, adapter, prompt_token_ids=stock_ids, request_id="req-2")
except mm_handoff.HandoffError as exc:
    print(f"stock prompt ({len(stock_ids)} ids): {type(exc).__name__}: {exc}"[:200])
