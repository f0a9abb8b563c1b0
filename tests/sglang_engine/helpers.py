"""The request every SGLang test runs (one image + one sampled video through the real HF processor)."""

from __future__ import annotations

import mm_handoff
import mm_handoff.sglang as glue
from mm_handoff.hf.encode import grid_list, ids_array, process_request
from mm_handoff.hf.processors import synthetic_clip, synthetic_image, video_messages


def epd_request(sglang_processor, *, fps=24.0, seed=0):
    """``(EPDInputs, adapter, video metadata)`` for one image + one sampled video."""
    import torch

    _, hf, config, _ = sglang_processor
    indices = list(range(0, 12 * 8, 12))
    clip = synthetic_clip(8, 64, 96, fps=fps, seed=seed, frames_indices=indices, total_num_frames=indices[-1] + 1)
    _, inputs = process_request(hf, messages=video_messages(n_videos=1, n_images=1),
                                images=[synthetic_image(64, 64, seed=3)], videos=[clip[0]], video_metadata=[clip[1]])
    adapter = mm_handoff.get_adapter(config, tokenizer=hf.tokenizer)
    images, videos = grid_list(inputs.get("image_grid_thw")), grid_list(inputs.get("video_grid_thw"))
    layout = adapter.derive_layout(ids_array(inputs["input_ids"]), image_grid_thw=images, video_grid_thw=videos)
    gen = torch.Generator().manual_seed(seed)
    embeddings = [torch.randn(item.embedding_length, adapter.handle_row_width, generator=gen) for item in layout.items]
    metadata = list(inputs["video_metadata"])
    return glue.epd_inputs(layout, embeddings, adapter, video_metadata=metadata), adapter, metadata


def sglang_encoder_timestamps(proc, metadata) -> list:
    """What SGLang's encoder ships (``EncoderPreprocessor._calculate_timestamps``, fps defaulting to 24)."""
    from sglang.srt.disaggregation.encoder.preprocessor import EncoderPreprocessor

    merge = proc.spatial_merge_size
    return [EncoderPreprocessor._calculate_timestamps(None, list(m.frames_indices), m.fps or 24, merge)
            for m in metadata]


def layout_runs(layout):
    return [(i.modality, int(s), int(s + n)) for i in layout.items for s, n in zip(i.run_offsets, i.run_lengths,
                                                                                     strict=True)]


def no_timestamps(epd, **extra):
    kwargs = {**epd.kwargs(), **extra}
    del kwargs["video_timestamps"]
    return kwargs
