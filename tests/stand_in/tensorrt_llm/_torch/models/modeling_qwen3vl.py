"""Stand-in for ``tensorrt_llm/_torch/models/modeling_qwen3vl.py``.

Mirrors NVIDIA/TensorRT-LLM @ 002f3cc3d0554c4ebd530d1354f96e89666d93b8:

* module-level ``_expand_prompt_token_ids_for_mm_handoff(input_ids, mm_handles,
  *, image_token_id, video_token_id, vision_start_token_id)`` -- the STOCK
  single-run rebuild: every image/video placeholder becomes
  ``tensor_size[0]`` copies of the same in-vocab pad in ONE contiguous run; a
  preceding ``<|vision_start|>`` is counted into the item (run starts one
  token earlier, length N+1, its flat offset goes to ``special_token_offsets``);
  ``item_types`` is 0 for image, 1 for video; no timestamps and no
  per-frame-group markers are inserted. Placeholder/handle count mismatch
  raises ``ValueError("Number of multimodal placeholders must match number of
  mm_handles: placeholders=P, mm_handles=H")``.
* ``Qwen3VLInputProcessorBase(Qwen2VLInputProcessorBase)`` with
  ``build_disagg_prefill_multimodal_inputs(self, inputs, mm_handles)``:
  requires ``inputs["prompt"]`` (``ValueError``), a list of handles
  (``TypeError``), checks each ``tensor_size[1] == text_config.hidden_size *
  (1 + len(vision_config.deepstack_visual_indexes))`` (``RuntimeError``), then
  RE-TOKENIZES the text prompt with ``self.tokenizer(prompt,
  return_tensors="pt").input_ids[0]`` and calls the function above.
  Also ``get_rope_index`` (one (1, h, w) block per frame group) and
  ``get_num_tokens_per_video`` (``sum t*(h/m)*(w/m)`` from ``video_grid_thw``).
* ``Qwen3VLModelBase`` / ``Qwen3VLModel`` registered for ``qwen3_vl`` with
  ``@support_multimodal_disaggregated``.

Simplified: model classes are empty shells (no torch modules); the HF
processor call is the ``_hf_expand`` hook of ``Qwen2VLInputProcessorBase``.
"""

from typing import Any, Dict, List

import numpy as np

from ...inputs import (
    ContentFormat,
    MultimodalPlaceholderMetadata,
    MultimodalPlaceholderPlacement,
    TextPrompt,
    register_input_processor,
    support_multimodal_disaggregated,
)
from ...inputs.multimodal import DisaggPrefillMultimodalInputs
from .modeling_multimodal_utils import _is_mm_disagg
from .modeling_qwen2vl import Qwen2VLInputProcessorBase
from .modeling_utils import register_auto_model, register_vision_encoder


def _expand_prompt_token_ids_for_mm_handoff(
    input_ids: Any,
    mm_handles: List[Dict[str, Any]],
    *,
    image_token_id: int,
    video_token_id: int,
    vision_start_token_id: int,
) -> DisaggPrefillMultimodalInputs:
    """Expand each coarse image/video placeholder to its handle's row count (one run per item)."""
    tokens = [int(t) for t in np.asarray(input_ids).reshape(-1).tolist()]
    mm_ids = (image_token_id, video_token_id)
    placeholder_at = [i for i, t in enumerate(tokens) if t in mm_ids]
    if len(placeholder_at) != len(mm_handles):
        raise ValueError(
            "Number of multimodal placeholders must match number of mm_handles: "
            f"placeholders={len(placeholder_at)}, mm_handles={len(mm_handles)}"
        )
    total_rows = sum(int(h["tensor_size"][0]) for h in mm_handles)
    final_length = len(tokens) - len(placeholder_at) + total_rows

    out: List[int] = []
    lengths: List[int] = []
    positions: List[int] = []
    types: List[int] = []
    cu_offsets: List[int] = [0]
    run_positions: List[int] = []
    run_lengths: List[int] = []
    emb_lengths: List[int] = []
    specials: List[int] = []
    flat_offset = 0
    item = 0
    for read_pos, tok in enumerate(tokens):
        if tok not in mm_ids:
            out.append(tok)
            continue
        rows = int(mm_handles[item]["tensor_size"][0])
        starts_with_vs = read_pos > 0 and tokens[read_pos - 1] == vision_start_token_id
        start = len(out) - 1 if starts_with_vs else len(out)
        span = rows + int(starts_with_vs)
        out.extend([tok] * rows)
        positions.append(start)
        lengths.append(span)
        emb_lengths.append(rows)
        types.append(0 if tok == image_token_id else 1)
        run_positions.append(start)
        run_lengths.append(span)
        cu_offsets.append(len(run_positions))
        if starts_with_vs:
            specials.append(flat_offset)
        flat_offset += span
        item += 1
    if len(out) != final_length:
        raise RuntimeError(f"Write position mismatch: {len(out)} != {final_length}")
    return DisaggPrefillMultimodalInputs(
        prompt_token_ids=[int(np.int32(t)) for t in out],
        multimodal_lengths=lengths,
        multimodal_positions=positions,
        multimodal_embedding_lengths=emb_lengths,
        multimodal_item_run_cu_offsets=cu_offsets,
        multimodal_run_positions=run_positions,
        multimodal_run_lengths=run_lengths,
        special_token_offsets=specials,
        item_types=types,
    )


class Qwen3VLInputProcessorBase(Qwen2VLInputProcessorBase):
    """Qwen3-VL input processor (shared by every Qwen3-VL-family model class)."""

    @classmethod
    def get_rope_index(cls, config, input_ids=None, image_grid_thw=None, video_grid_thw=None, attention_mask=None, second_per_grid_ts=None):
        # One (1, h, w) block per temporal group, as the prompt has one span per group.
        if video_grid_thw is not None:
            grid = np.asarray(video_grid_thw)
            grid = np.repeat(grid, grid[:, 0], axis=0).copy()
            grid[:, 0] = 1
            video_grid_thw = grid
        return super().get_rope_index(
            config, input_ids, image_grid_thw, video_grid_thw, attention_mask, second_per_grid_ts
        )

    def get_num_tokens_per_video(self, *, video, video_grid_thw=None, **kwargs) -> int:
        merge = self.config.vision_config.spatial_merge_size
        if video_grid_thw is not None:
            grid = np.asarray(video_grid_thw)
            if grid.ndim == 1:
                t, h, w = (int(x) for x in grid)
                return t * (h // merge) * (w // merge)
            return int(np.sum(grid[:, 0] * (grid[:, 1] // merge) * (grid[:, 2] // merge)))
        raise ValueError("stand-in: the video token count comes from video_grid_thw")

    def build_disagg_prefill_multimodal_inputs(self, inputs: TextPrompt, mm_handles: List[Dict[str, Any]]) -> DisaggPrefillMultimodalInputs:
        """Rebuild the PD prompt from the raw text prompt and the handles' row counts."""
        text_prompt = inputs.get("prompt")
        if not text_prompt:
            raise ValueError("Text prompt is required but not provided")
        if not isinstance(mm_handles, list):
            raise TypeError("mm_handles must be a list")
        levels = len(self.config.vision_config.deepstack_visual_indexes)
        expected = self.config.text_config.hidden_size * (1 + levels)
        for i, handle in enumerate(mm_handles):
            got = handle["tensor_size"][1]
            if got != expected:
                raise RuntimeError(f"Expected multimodal embedding {i} to have hidden size {expected}, got {got}.")
        input_ids = self.tokenizer(text_prompt, return_tensors="pt").input_ids[0]
        return _expand_prompt_token_ids_for_mm_handoff(
            input_ids,
            mm_handles,
            image_token_id=self.config.image_token_id,
            video_token_id=self.config.video_token_id,
            vision_start_token_id=self.config.vision_start_token_id,
        )


QWEN3_VL_PLACEHOLDER_METADATA = MultimodalPlaceholderMetadata(
    placeholder_map={
        "image": "<|vision_start|><|image_pad|><|vision_end|>",
        "video": "<|vision_start|><|video_pad|><|vision_end|>",
    },
    placeholder_placement=MultimodalPlaceholderPlacement.BEFORE_TEXT,
    placeholders_separator="",
    content_format=ContentFormat.STRING,
)


class Qwen3VisionModelBase:
    """Shell standing in for the vision tower wrapper."""


class Qwen3VisionModel:
    """Shell standing in for the Qwen3 ViT."""


class Qwen3VLModelBase:
    """Shell of the VLM wrapper; only what the handoff path reads."""

    def __init__(self, model_config: Any = None, *args, **kwargs):
        self.model_config = model_config
        self.mm_encoder = None if _is_mm_disagg() else object()

    def select_multimodal_params(self, multimodal_params, num_context_requests):
        params = [p for p in multimodal_params[:num_context_requests] if p.has_content()]
        raw = any(
            (p.multimodal_data.get("image") or {}).get("pixel_values") is not None
            or (p.multimodal_data.get("video") or {}).get("pixel_values_videos") is not None
            for p in params
        )
        if params and not raw and not getattr(self, "support_mm_disagg", False):
            raise NotImplementedError(
                f"{type(self)} does not support disaggregated inference yet. Please unset "
                "the TLLM_MULTIMODAL_DISAGGREGATED environment variable, or set it to '0'."
            )
        return params


@support_multimodal_disaggregated
@register_vision_encoder(Qwen3VisionModelBase, vlm_base_model=Qwen3VisionModel)
@register_auto_model("Qwen3VLForConditionalGeneration")
@register_input_processor(
    Qwen3VLInputProcessorBase,
    model_type="qwen3_vl",
    placeholder_metadata=QWEN3_VL_PLACEHOLDER_METADATA,
)
class Qwen3VLModel(Qwen3VLModelBase):
    supports_encoder_cache = True

    @property
    def multimodal_data_device_paths(self) -> List[str]:
        return [
            "image.pixel_values",
            "video.pixel_values_videos",
            "multimodal_embedding",
            "mrope_config.mrope_position_ids",
            "mrope_config.mrope_position_deltas",
        ]
