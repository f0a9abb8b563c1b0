"""Stand-in for ``tensorrt_llm/_torch/models/modeling_qwen2vl.py`` (input processor only).

Mirrors NVIDIA/TensorRT-LLM @ 002f3cc3d0554c4ebd530d1354f96e89666d93b8,
``Qwen2VLInputProcessorBase``:

* constructor ``(model_path, config, tokenizer, trust_remote_code=True, **kwargs)``;
* ``get_mm_token_ids()`` -> int32 array of ``image_token_id`` /
  ``vision_token_id`` / ``video_token_id`` (those present on the config);
  ``get_mm_special_token_ids()`` is inherited from the base (reads the HF
  processor's attribute; ``None`` for Qwen, so vision_start/end and
  timestamps count as text);
* ``get_vocab_size()`` -> ``config.text_config.vocab_size``;
* ``get_rope_index`` (the numpy traversal over vision_start / image / video
  tokens, per-grid block from ``_build_temporal_block``), ``get_mrope_config``
  -> ``{"mrope_position_ids": (3, 1, L), "mrope_position_deltas": (1, 1) int32}``;
* ``call_with_text_prompt``: text-only prompts are tokenized and carry no
  ``mrope_config``; otherwise the HF-expanded ids (the aggregated layout) and
  ``multimodal_data`` with image/video payload and ``mrope_config``;

Simplified: there is no HF ``AutoProcessor``. ``_preprocess`` calls the
pluggable hook ``self._hf_expand(text, mm_data)``, which must return an
HF-``BatchFeature``-like dict: ``input_ids`` (shape ``[1, L]``), and optionally
``video_grid_thw`` / ``image_grid_thw`` / ``pixel_values_videos`` /
``pixel_values`` / ``attention_mask`` / ``second_per_grid_ts``. Set it on an
instance (``proc._hf_expand = fn``) or on a class as a ``staticmethod``.
Image token counting skips HF ``smart_resize`` (plain ``H // patch_size``);
``_build_temporal_block`` is Qwen3-VL's plain lattice (no ``tokens_per_second``
scaling), as only Qwen3-VL-family processors run here.
"""

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ...inputs import BaseMultimodalDummyInputsBuilder, BaseMultimodalInputProcessor, TextPrompt
from ...sampling_params import SamplingParams


class Qwen2VLInputProcessorBase(BaseMultimodalInputProcessor, BaseMultimodalDummyInputsBuilder):
    # Stand-in hook replacing the HF processor call (see module docstring).
    _hf_expand: Optional[Callable[[str, Dict[str, Any]], Dict[str, Any]]] = None

    def __init__(self, model_path: str, config: Any, tokenizer: Any, trust_remote_code: bool = True, **kwargs):
        super().__init__(
            model_path=model_path, config=config, tokenizer=tokenizer, trust_remote_code=trust_remote_code, **kwargs
        )
        if tokenizer is None:
            raise ValueError("stand-in: a tokenizer object is required (no AutoTokenizer here)")
        self._tokenizer = tokenizer
        self._model_path = model_path
        self._processor = None  # no HF AutoProcessor in the stand-in
        self.temporal_patch_size = getattr(self.config.vision_config, "temporal_patch_size", 1)

    def get_vocab_size(self) -> int:
        return self.config.text_config.vocab_size

    @property
    def config(self) -> Any:
        return self._config

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def processor(self) -> Any:
        return self._processor

    @property
    def spatial_merge_unit(self) -> int:
        m = self.config.vision_config.spatial_merge_size
        return m * m

    def get_num_tokens_per_image(self, *, image, **kwargs) -> int:
        arr = np.asarray(image)
        h, w = int(arr.shape[0]), int(arr.shape[1])  # HWC
        p = self.config.vision_config.patch_size
        return (h // p) * (w // p) // self.spatial_merge_unit

    # -- mRoPE ---------------------------------------------------------------
    @classmethod
    def _build_temporal_block(cls, config, llm_grid_t: int, llm_grid_h: int, llm_grid_w: int, second_per_grid_t: float) -> np.ndarray:
        # Qwen3-VL's plain lattice (its timestamps are separate tokens); Qwen2-VL's tokens_per_second
        # scaling is not modelled: only Qwen3-VL-family processors run on the stand-in.
        return np.indices((llm_grid_t, llm_grid_h, llm_grid_w)).reshape(3, -1)

    @classmethod
    def get_rope_index(cls, config, input_ids=None, image_grid_thw=None, video_grid_thw=None, attention_mask=None, second_per_grid_ts=None) -> Tuple[np.ndarray, np.ndarray]:
        """3-D rope positions ``(3, B, S)`` and deltas ``(B, 1)`` for a batch of ids."""
        ids = np.asarray(input_ids)
        if ids.ndim == 1:
            ids = ids[None, :]
        batch, seq = ids.shape
        if image_grid_thw is None and video_grid_thw is None:
            pos = np.broadcast_to(np.arange(seq), (3, batch, seq)).copy()
            return pos, np.zeros((batch, 1), dtype=ids.dtype)

        merge = config.vision_config.spatial_merge_size
        img_id, vid_id, vs_id = config.image_token_id, config.video_token_id, config.vision_start_token_id
        attn = np.ones_like(ids) if attention_mask is None else np.asarray(attention_mask)
        img_grid = None if image_grid_thw is None else np.asarray(image_grid_thw)
        vid_grid = None if video_grid_thw is None else np.asarray(video_grid_thw)
        spg = None if second_per_grid_ts is None else np.asarray(second_per_grid_ts)

        positions = np.ones((3, batch, seq), dtype=ids.dtype)
        deltas = []
        i_img = i_vid = 0
        for b in range(batch):
            keep = attn[b] == 1
            tokens = ids[b][keep].tolist()
            starts = [i for i, t in enumerate(tokens) if t == vs_id]
            after = [tokens[i + 1] for i in starts if i + 1 < len(tokens)]
            n_img, n_vid = after.count(img_id), after.count(vid_id)
            pieces: List[np.ndarray] = []
            cursor = 0
            left_img, left_vid = n_img, n_vid

            def next_pos() -> int:
                return int(pieces[-1].max()) + 1 if pieces else 0

            for _ in range(n_img + n_vid):
                at_img = tokens.index(img_id, cursor) if left_img > 0 and img_id in tokens[cursor:] else len(tokens) + 1
                at_vid = tokens.index(vid_id, cursor) if left_vid > 0 and vid_id in tokens[cursor:] else len(tokens) + 1
                if at_img < at_vid:
                    t, h, w = (int(x) for x in img_grid[i_img])
                    sec = 0.0
                    i_img += 1
                    left_img -= 1
                    at = at_img
                else:
                    t, h, w = (int(x) for x in vid_grid[i_vid])
                    sec = float(spg[i_vid]) if spg is not None else 1.0
                    i_vid += 1
                    left_vid -= 1
                    at = at_vid
                gh, gw = h // merge, w // merge
                text_len = at - cursor
                base = next_pos()
                if text_len > 0:
                    pieces.append(np.broadcast_to(np.arange(text_len), (3, text_len)) + base)
                pieces.append(cls._build_temporal_block(config, t, gh, gw, sec) + text_len + base)
                cursor = at + t * gh * gw
            if cursor < len(tokens):
                base = next_pos()
                tail = len(tokens) - cursor
                pieces.append(np.broadcast_to(np.arange(tail), (3, tail)) + base)
            flat = np.concatenate(pieces, axis=1).reshape(3, -1)
            positions[:, b, keep] = flat
            deltas.append(int(flat.max()) + 1 - int(ids[b].shape[0]))
        return positions, np.asarray(deltas, dtype=np.int64)[:, None]

    def get_mrope_config(self, input_ids, image_grid_thw, video_grid_thw, attention_mask, second_per_grid_ts=None) -> Dict[str, np.ndarray]:
        pos, deltas = type(self).get_rope_index(
            self.config, input_ids, image_grid_thw, video_grid_thw, attention_mask, second_per_grid_ts
        )
        return {
            "mrope_position_ids": np.array(pos, copy=True),
            "mrope_position_deltas": np.asarray(deltas, dtype=np.int32).copy(),
        }

    # -- token ids -----------------------------------------------------------
    def _postprocess(self, input_ids):
        # Placeholders stay in-vocab (no OOV remap at this commit).
        return input_ids

    def get_mm_token_ids(self) -> Optional[np.ndarray]:
        ids = [
            t
            for t in (
                getattr(self.config, "image_token_id", None),
                getattr(self.config, "vision_token_id", None),
                getattr(self.config, "video_token_id", None),
            )
            if t is not None
        ]
        return np.asarray(ids, dtype=np.int32) if ids else None

    def _preprocess(self, text: str, mm_data: Dict[str, Any], mm_processor_kwargs: Dict[str, Any]) -> Dict[str, Any]:
        hook = self._hf_expand
        if hook is None:
            raise NotImplementedError(
                "stand-in: no HF processor; set `<processor>._hf_expand = fn(text, mm_data)` returning "
                "{'input_ids': [[...]], 'video_grid_thw': ..., ...}"
            )
        return hook(text, mm_data)

    def call_with_text_prompt(self, inputs: TextPrompt, sampling_params: SamplingParams):
        text = inputs.get("prompt")
        mm_data = inputs.get("multi_modal_data", {})
        kwargs = inputs.get("mm_processor_kwargs", {})
        if not mm_data:
            ids = np.asarray(self.tokenizer(text, return_tensors="pt").input_ids[0])
            return [int(x) for x in ids.astype(np.int32)], None

        processed = self._preprocess(text, mm_data, kwargs)
        multimodal_data: Dict[str, Any] = {}
        if processed.get("pixel_values") is not None:
            multimodal_data["image"] = {
                "pixel_values": processed["pixel_values"],
                "image_grid_thw": processed.get("image_grid_thw"),
            }
        if processed.get("pixel_values_videos") is not None or processed.get("video_grid_thw") is not None:
            multimodal_data["video"] = {
                "pixel_values_videos": processed.get("pixel_values_videos"),
                "video_grid_thw": processed.get("video_grid_thw"),
            }
        input_ids = np.asarray(processed["input_ids"])
        if input_ids.ndim == 1:
            input_ids = input_ids[None, :]
        multimodal_data["mrope_config"] = self.get_mrope_config(
            input_ids,
            processed.get("image_grid_thw"),
            processed.get("video_grid_thw"),
            processed.get("attention_mask"),
            processed.get("second_per_grid_ts"),
        )
        fused = self._postprocess(input_ids[0])
        return [int(x) for x in np.asarray(fused).astype(np.int32)], {"multimodal_data": multimodal_data}
