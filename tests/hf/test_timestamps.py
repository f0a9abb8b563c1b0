"""Timestamps: HF's expression to the bit, its formatting, no mutation of the caller's metadata."""

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mm_handoff import get_adapter
from mm_handoff.adapters.timestamps import calculate_timestamps, format_timestamp, sample_frame_indices

processing = pytest.importorskip("transformers.models.qwen3_vl.processing_qwen3_vl")
video_utils = pytest.importorskip("transformers.video_utils")


@given(st.lists(st.integers(0, 100_000), min_size=1, max_size=40),
       st.one_of(st.sampled_from([24.0, 25.0, 29.97, 30.0, 23.976, 59.94, 2.0, 1.0, 7.5]),
                 st.floats(0.5, 240.0, allow_nan=False)),
       st.sampled_from([1, 2]))
def test_equals_hf_calculate_timestamps(indices, fps, merge):
    """Bitwise equal floats and identical strings, incl. the half-to-even cases and odd-length padding."""
    hf = processing.Qwen3VLProcessor._calculate_timestamps(None, list(indices), fps, merge)
    ours = calculate_timestamps(indices, fps, merge)
    assert ours == hf
    assert [format_timestamp(t) for t in ours] == [f"<{t:.1f} seconds>" for t in hf]


def test_half_to_even_examples():
    assert [format_timestamp(t) for t in calculate_timestamps([0, 12, 24, 36], 24.0, 2)] == \
        ["<0.2 seconds>", "<1.2 seconds>"]


@pytest.mark.parametrize("total, fps, want", [(240, 24.0, 2), (60, 24.0, 2), (10, None, 2), (3000, 30.0, 1)])
def test_sampling_equals_hf(total, fps, want):
    vp = pytest.importorskip("transformers.models.qwen3_vl.video_processing_qwen3_vl").Qwen3VLVideoProcessor
    meta = video_utils.VideoMetadata(total_num_frames=total, fps=fps)
    proc = vp.__new__(vp)
    proc.fps, proc.min_frames, proc.max_frames, proc.num_frames = want, 4, 768, None
    hf = proc.sample_frames(copy.deepcopy(meta), fps=want)
    assert sample_frame_indices(total, fps, fps=want) == list(hf.tolist() if hasattr(hf, "tolist") else hf)


def test_rebuild_does_not_mutate_metadata():
    """HF extends an odd frames_indices list in place and writes fps=24; the adapter copies."""
    a = get_adapter("qwen3_vl")
    s = a.spec
    raw = [1, s.vision_start, s.video_pad, s.vision_end, 2]
    dict_meta = {"fps": None, "frames_indices": [0, 1, 2], "total_num_frames": 3}
    obj_meta = video_utils.VideoMetadata(total_num_frames=3, fps=None, frames_indices=[0, 1, 2])
    before = (copy.deepcopy(dict_meta), list(obj_meta.frames_indices), obj_meta.fps)
    ids_a = a.rebuild_token_ids(raw, video_grid_thw=[[2, 2, 2]], video_metadata=[dict_meta])
    ids_b = a.rebuild_token_ids(raw, video_grid_thw=[[2, 2, 2]], video_metadata=[obj_meta])
    assert dict_meta == before[0] and obj_meta.frames_indices == before[1] and obj_meta.fps is None
    assert ids_a.tolist() == ids_b.tolist()
