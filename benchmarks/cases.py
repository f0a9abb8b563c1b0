"""Benchmark prompts, built without pixels through the adapter (checked equal to HF's processor ids
for these grids in the parity tests): the 40-frame 720p clip, 768 frames at the official size, and a
768-frame 720p clip with the pixel budget lifted (~341k ids)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

RAW_TEXT = ("<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n"
            "<|im_start|>assistant\n")
#: the same 15 ids with the Qwen3 tokenizer
RAW_IDS = [151644, 872, 198, 151652, 151656, 151653, 74785, 419, 2766, 13, 151645, 198, 151644, 77091, 198]
#: Qwen3-VL-8B: hidden 4096, 3 deepstack levels, bf16
HIDDEN, DEEPSTACK, BYTES = 4096, 3, 2


@dataclass(frozen=True)
class Case:
    name: str
    grid: tuple
    frames: int
    fps: float = 24.0

    @property
    def metadata(self) -> dict:
        return {"fps": self.fps, "frames_indices": list(range(self.frames)), "total_num_frames": self.frames}


CASES = {
    "720p40": Case("720p40", (20, 36, 66), 40),
    "768f-official": Case("768f-official", (384, 8, 14), 768),
    "768f-720p": Case("768f-720p", (384, 44, 80), 768),
}
ROUNDS = {"720p40": 200, "768f-official": 100, "768f-720p": 10}


@functools.cache
def expanded(name: str, family: str = "qwen3_vl"):
    """(adapter, aggregated ids, layout with mRoPE) for a case."""
    from mm_handoff import get_adapter

    case = CASES[name]
    adapter = get_adapter(family)
    ids = adapter.rebuild_token_ids(RAW_IDS, video_grid_thw=[case.grid], video_metadata=[case.metadata])
    return adapter, ids, adapter.derive_layout(ids, video_grid_thw=[case.grid])


def payload_bytes(layout) -> int:
    """Embedding payload a Qwen3-VL-8B encoder ships for this prompt: rows x hidden x (1 + deepstack) x 2."""
    return layout.num_pads * HIDDEN * (1 + DEEPSTACK) * BYTES


def hf_rope_index():
    """HF ``Qwen3VLModel.get_rope_index`` bound to a namespace holding what it reads (no model)."""
    import types

    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    ns = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=2)))
    ns.get_vision_position_ids = Qwen3VLModel.get_vision_position_ids.__get__(ns)
    return Qwen3VLModel.get_rope_index.__get__(ns)
