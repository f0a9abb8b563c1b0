"""Real Hugging Face processors for each family, built offline, plus synthetic clips and images.

``build_processor(family)`` returns (transformers 5.23.0):

* qwen3_vl, qwen3_vl_moe, qwen3_5, qwen3_5_moe, cosmos3_omni: a real ``Qwen3VLProcessor`` with
  ``Qwen3VLVideoProcessor(size=OFFICIAL_VIDEO_SIZE, do_sample_frames=False, cap_pixels_per_frame=False)`` and
  ``Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2)``. The class default video size
  is *not* the checkpoints' (15 instead of 594 pads per group on a 40-frame 720p clip), so the official
  size is passed explicitly. Cosmos3-Omni has no AutoProcessor entry; ``Qwen3VLProcessor`` gives exactly the
  Qwen3-VL layout.
* cosmos3_edge: a real ``Cosmos3EdgeProcessor`` (temporal patch 1, one group per frame, no outer wrapper).
  The Edge tokenizer is not available offline, so the **Qwen3 tokenizer stands in**: the Edge processor then
  emits the Qwen3 ids for its marker strings (video 151656, image 151655, vision_start 151652, vision_end
  151653) instead of the Edge config's 18 / 19 / 20 / 21, and timestamp texts are tokenized with the Qwen3
  vocab (the real Edge timestamp token counts are unknown). ``mm_handoff.hf.tiny.build_tiny_model(
  "cosmos3_edge")`` is configured for these stand-in ids. The Edge processor needs ``return_metadata=True``
  (without it the call fails with ``KeyError: 'video_metadata'``); ``run_processor`` passes it.

The tokenizer is the rebuilt real one (``mm_handoff.hf.tokenizers.load_tokenizer``): Qwen3 for
qwen3_vl / qwen3_vl_moe / cosmos3_omni / cosmos3_edge, Qwen3.5 for qwen3_5 / qwen3_5_moe.

numpy is imported at module level; transformers / torch inside functions.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..adapters.families import HF_FAMILIES
from .families import normalize_family

#: The Qwen3-VL checkpoints' video size (24 * 1024 * 1024 pixel budget for the whole video).
OFFICIAL_VIDEO_SIZE = {"shortest_edge": 4096, "longest_edge": 25165824}

QWEN_LAYOUT_FAMILIES: tuple[str, ...] = tuple(name for name, row in HF_FAMILIES.items() if row.qwen_processor)
PROCESSOR_FAMILIES: tuple[str, ...] = tuple(HF_FAMILIES)

def _norm(family: str) -> str:
    return normalize_family(family, PROCESSOR_FAMILIES)


def tokenizer_vocab_for(family: str) -> str:
    """``"qwen3"`` or ``"qwen3_5"``: the rebuilt vocab a family's processor uses (Edge: the Qwen3 stand-in)."""
    return HF_FAMILIES[_norm(family)].tokenizer


def build_processor(
    family: str,
    tokenizer: Any = None,
    *,
    video_size: dict | None = None,
    image_size: dict | None = None,
    do_sample_frames: bool = False,
    cap_pixels_per_frame: bool | None = False,
    video_kwargs: dict | None = None,
    image_kwargs: dict | None = None,
) -> Any:
    """A real HF processor for ``family`` (see the module docstring).

    ``tokenizer``: an HF tokenizer; default ``load_tokenizer(tokenizer_vocab_for(family))``.
    ``video_size``: defaults to ``OFFICIAL_VIDEO_SIZE``; raise ``longest_edge`` for long/high-res clips
    (the official size budgets the whole video: at most 12,288 pads per video).
    ``image_size``: passed to the image processor as ``size`` when given (class default otherwise).
    ``cap_pixels_per_frame``: Qwen-layout families only (``None`` keeps the class default and its warning).
    ``video_kwargs`` / ``image_kwargs``: extra constructor arguments for the video / image processor.
    """
    fam = _norm(family)
    if tokenizer is None:
        from .tokenizers import load_tokenizer

        tokenizer = load_tokenizer(tokenizer_vocab_for(fam))
    vkw: dict[str, Any] = {"size": dict(video_size if video_size is not None else OFFICIAL_VIDEO_SIZE),
                           "do_sample_frames": do_sample_frames}
    ikw: dict[str, Any] = {} if image_size is None else {"size": dict(image_size)}
    proc_cls: type
    image_cls: type
    video_cls: type
    if not HF_FAMILIES[fam].qwen_processor:  # Cosmos3-Edge
        from transformers import Cosmos3EdgeProcessor
        from transformers.models.cosmos3_edge.image_processing_cosmos3_edge import Cosmos3EdgeImageProcessor
        from transformers.models.cosmos3_edge.video_processing_cosmos3_edge import Cosmos3EdgeVideoProcessor

        proc_cls, image_cls, video_cls = Cosmos3EdgeProcessor, Cosmos3EdgeImageProcessor, Cosmos3EdgeVideoProcessor
    else:
        from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

        proc_cls, image_cls, video_cls = Qwen3VLProcessor, Qwen2VLImageProcessor, Qwen3VLVideoProcessor

        ikw = {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2, **ikw}
        if cap_pixels_per_frame is not None:
            vkw["cap_pixels_per_frame"] = cap_pixels_per_frame
    return proc_cls(image_processor=image_cls(**{**ikw, **(image_kwargs or {})}), tokenizer=tokenizer,
                    video_processor=video_cls(**{**vkw, **(video_kwargs or {})}),
                    chat_template=getattr(tokenizer, "chat_template", None))


def synthetic_clip(
    frames: int,
    height: int,
    width: int,
    fps: float | None = 24.0,
    seed: int = 0,
    *,
    frames_indices: Sequence[int] | None = None,
    total_num_frames: int | None = None,
) -> tuple[np.ndarray, Any]:
    """A deterministic patterned clip and its ``VideoMetadata``.

    Returns ``(video, metadata)``: ``video`` is uint8 ``(frames, height, width, 3)``, each frame a different
    pattern (gradients shifted by the frame index plus seeded noise), and ``metadata`` a
    ``transformers.video_utils.VideoMetadata`` with ``total_num_frames``, ``fps`` (the *source* fps),
    ``frames_indices`` (default ``0..frames-1``; pass e.g. ``range(0, 12 * frames, 12)`` for frames sampled
    from a longer source, in which case ``total_num_frames`` defaults to ``max(index) + 1``), ``width``,
    ``height`` and ``duration = total_num_frames / fps``.
    """
    if frames < 1 or height < 1 or width < 1:
        raise ValueError("frames, height and width must be positive")
    idx = list(range(frames)) if frames_indices is None else [int(i) for i in frames_indices]
    if len(idx) != frames:
        raise ValueError(f"{len(idx)} frames_indices for {frames} frames")
    total = int(total_num_frames) if total_num_frames is not None else max(max(idx) + 1, frames)

    rng = np.random.default_rng(seed)
    yy = np.arange(height, dtype=np.int64)[:, None]
    xx = np.arange(width, dtype=np.int64)[None, :]
    noise = rng.integers(0, 32, size=(height, width, 3), dtype=np.int64)
    video = np.empty((frames, height, width, 3), dtype=np.uint8)
    for f in range(frames):
        k = 7 * f + 13 * seed
        video[f, :, :, 0] = ((xx * 255) // max(width - 1, 1) + k) % 256
        video[f, :, :, 1] = ((yy * 255) // max(height - 1, 1) + 3 * k) % 256
        video[f, :, :, 2] = (((xx // 16 + yy // 16 + f) % 2) * 160 + k) % 256
        video[f] = ((video[f].astype(np.int64) + noise) % 256).astype(np.uint8)

    from transformers.video_utils import VideoMetadata

    meta = VideoMetadata(
        total_num_frames=total,
        fps=fps,
        width=width,
        height=height,
        duration=(total / fps) if fps else None,
        frames_indices=idx,
    )
    return video, meta


def synthetic_image(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A deterministic patterned uint8 ``(h, w, 3)`` RGB image."""
    video, _ = synthetic_clip(1, h, w, seed=seed)
    return video[0]


def video_messages(text: str = "Describe this video.", n_videos: int = 1, n_images: int = 0) -> list[dict]:
    """One user turn: ``n_images`` image parts, ``n_videos`` video parts, then ``text``.

    One video and the default text render to 15 Qwen3 ids before expansion.
    """
    parts: list[dict] = [{"type": "image"} for _ in range(n_images)]
    parts += [{"type": "video"} for _ in range(n_videos)]
    parts.append({"type": "text", "text": text})
    return [{"role": "user", "content": parts}]


def _is_edge(processor: Any) -> bool:
    return type(processor).__name__ == "Cosmos3EdgeProcessor"


def run_processor(
    processor: Any,
    messages_or_prompt: Any,
    images: Any = None,
    videos: Any = None,
    video_metadata: Any = None,
    **kw: Any,
) -> Any:
    """Call ``processor`` on one prompt and return its ``BatchFeature`` (``return_tensors="pt"`` by default).

    ``messages_or_prompt``: a rendered prompt string, or chat messages (a list of ``{"role", "content"}``
    dicts) rendered with the processor's chat template and ``add_generation_prompt=True``.
    ``images`` / ``videos``: one item or a list of items (arrays); ``video_metadata``: one ``VideoMetadata``
    (or dict) or a list, **deep-copied** before the call because the processor mutates it (``fps=None``
    becomes 24 and an odd-length ``frames_indices`` list is extended in place).
    Defaults added unless given in ``kw``: ``return_tensors="pt"``, ``do_sample_frames=False`` (when videos are
    passed) and, for Cosmos3-Edge, ``return_metadata=True`` (see the module docstring) and
    ``return_mm_token_type_ids=True``
    (the Edge processor does not return ``mm_token_type_ids`` by default, and the Edge model needs them).
    """
    if isinstance(messages_or_prompt, str):
        prompt = messages_or_prompt
    else:
        prompt = processor.apply_chat_template(messages_or_prompt, tokenize=False, add_generation_prompt=True)
        if isinstance(prompt, list):  # batched rendering
            prompt = prompt[0]

    def as_list(x: Any) -> list | None:
        if x is None:
            return None
        if isinstance(x, (list, tuple)):
            return list(x)
        return [x]

    call: dict[str, Any] = {"text": [prompt], "return_tensors": "pt"}
    imgs = as_list(images)
    vids = as_list(videos)
    if imgs is not None:
        call["images"] = imgs
    if vids is not None:
        call["videos"] = vids
        call["do_sample_frames"] = False
        if _is_edge(processor):
            call["return_metadata"] = True
    if _is_edge(processor):
        # Qwen3VLProcessor defaults this to True; the Edge processor does not, and the Edge model's forward
        # raises without mm_token_type_ids when a grid is passed.
        call["return_mm_token_type_ids"] = True
    if video_metadata is not None:
        metas = video_metadata if isinstance(video_metadata, (list, tuple)) else [video_metadata]
        call["video_metadata"] = [copy.deepcopy(m) for m in metas]
    call.update(kw)
    return processor(**call)
