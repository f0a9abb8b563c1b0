"""Real processors on synthetic clips, and the tiny random models of each family (mm_handoff.hf.*)."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torchvision")
torch = pytest.importorskip("torch")

from mm_handoff.hf import processors as P  # noqa: E402
from mm_handoff.hf import tiny  # noqa: E402
from mm_handoff.hf.tokenizers import load_tokenizer, resolve_vocab  # noqa: E402

pytestmark = pytest.mark.hf

_PROCS: dict[str, object] = {}


def processor_for(family: str):
    """One processor per family per session (Qwen-layout families of one vocab share one)."""
    key = family if family == "cosmos3_edge" else P.tokenizer_vocab_for(family)
    if key not in _PROCS:
        tok = load_tokenizer(P.tokenizer_vocab_for(family), shared=True)
        _PROCS[key] = P.build_processor(family, tok)
    return _PROCS[key]


def ids_of(family: str) -> dict[str, int]:
    return resolve_vocab(P.tokenizer_vocab_for(family)).special_ids()


@pytest.fixture(scope="module")
def small_clip():
    return P.synthetic_clip(16, 224, 224, fps=24.0, seed=0)


def test_synthetic_clip_shape_and_metadata():
    video, meta = P.synthetic_clip(5, 32, 48, fps=30.0, seed=3)
    assert video.shape == (5, 32, 48, 3) and video.dtype.name == "uint8"
    assert all((video[i] != video[i + 1]).any() for i in range(4))  # patterned per frame
    v2, _ = P.synthetic_clip(5, 32, 48, fps=30.0, seed=3)
    assert (video == v2).all()
    assert meta.total_num_frames == 5 and meta.fps == 30.0 and meta.frames_indices == [0, 1, 2, 3, 4]
    assert (meta.width, meta.height) == (48, 32) and meta.duration == pytest.approx(5 / 30)
    _, m12 = P.synthetic_clip(4, 32, 32, frames_indices=range(0, 48, 12))
    assert m12.frames_indices == [0, 12, 24, 36] and m12.total_num_frames == 37
    img = P.synthetic_image(20, 30)
    assert img.shape == (20, 30, 3)


@pytest.mark.parametrize("family", ["qwen3_vl", "qwen3_5"])
def test_small_clip_official_size(family, small_clip):
    """16x224x224 at the official size: grid [8,14,14], 8 groups x 49 pads, 470 tokens (pad_only convention)."""
    proc = processor_for(family)
    assert proc.video_processor.size["longest_edge"] == 25165824
    assert proc.video_processor.size["shortest_edge"] == 4096
    video, meta = small_clip
    out = P.run_processor(proc, P.video_messages(), videos=video, video_metadata=meta)
    assert out["video_grid_thw"].tolist() == [[8, 14, 14]]
    assert tuple(out["pixel_values_videos"].shape) == (8 * 14 * 14, 1536)
    ids = out["input_ids"][0].tolist()
    sp = ids_of(family)
    assert len(ids) == 470
    assert ids.count(sp["<|video_pad|>"]) == 392
    assert ids.count(sp["<|vision_start|>"]) == 9 and ids.count(sp["<|vision_end|>"]) == 9  # outer pair kept
    assert ids[3] == sp["<|vision_start|>"]
    # first timestamp: <0.0 seconds> right after the outer vision_start
    sec = 6486 if P.tokenizer_vocab_for(family) == "qwen3" else 6283
    assert ids[4:10] == [27, 15, 13, 15, sec, 29]
    assert out["mm_token_type_ids"][0].tolist().count(2) == 392
    assert meta.frames_indices == list(range(16)) and meta.fps == 24.0


def test_run_processor_does_not_mutate_metadata():
    proc = processor_for("qwen3_vl")
    video, meta = P.synthetic_clip(3, 64, 64, fps=None)
    before = copy.deepcopy(meta)
    out = P.run_processor(proc, P.video_messages(), videos=video, video_metadata=meta)
    assert out["video_grid_thw"].tolist()[0][0] == 2
    assert meta.frames_indices == [0, 1, 2] and meta.fps is None
    assert dict(meta) == dict(before)


def test_image_prompt():
    proc = processor_for("qwen3_vl")
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe this image."}]}]
    raw = len(proc.tokenizer(proc.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)).input_ids)
    out = P.run_processor(proc, msgs, images=P.synthetic_image(480, 640))
    assert out["image_grid_thw"].tolist() == [[1, 30, 40]]
    ids = out["input_ids"][0].tolist()
    assert ids.count(ids_of("qwen3_vl")["<|image_pad|>"]) == 300
    assert len(ids) == raw - 1 + 300


def test_edge_processor_layout(small_clip):
    """Cosmos3-Edge: one group per frame, no outer wrapper; Qwen3 tokenizer as stand-in (ids 15165x)."""
    proc = processor_for("cosmos3_edge")
    assert type(proc).__name__ == "Cosmos3EdgeProcessor"
    assert proc.video_processor.temporal_patch_size == 1
    video, meta = small_clip
    out = P.run_processor(proc, P.video_messages(), videos=video, video_metadata=meta)
    assert out["video_grid_thw"].tolist() == [[16, 14, 14]]
    ids = out["input_ids"][0].tolist()
    sp = ids_of("cosmos3_edge")
    assert ids.count(sp["<|video_pad|>"]) == 16 * 49
    assert ids.count(sp["<|vision_start|>"]) == 16 and ids.count(sp["<|vision_end|>"]) == 16
    assert ids[3:9] == [27, 15, 13, 15, 6486, 29]  # <0.0 seconds> replaces the whole wrapper
    assert len(ids) == 15 - 3 + 16 * 6 + 2 * 16 + 16 * 49
    assert "mm_token_type_ids" in out


@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_tiny_model_forward(family, small_clip):
    proc = processor_for(family)
    video, meta = small_clip
    inputs = P.run_processor(proc, P.video_messages(), videos=video, video_metadata=meta)
    inputs.pop("video_metadata", None)
    model = tiny.build_tiny_model(family, seed=0)
    assert type(model).__name__ == tiny.model_class_name(family)
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    cfg = model.config
    assert tiny.has_deepstack(model) == tiny.has_deepstack(family) == (family in tiny.DEEPSTACK_FAMILIES)
    if family != "cosmos3_edge":
        assert cfg.vision_config.patch_size == 16 and cfg.vision_config.temporal_patch_size == 2
        assert cfg.vision_config.spatial_merge_size == 2
    if tiny.has_deepstack(family):
        assert list(cfg.vision_config.deepstack_visual_indexes) == [0, 1, 2]
    if family.endswith("_moe"):
        assert cfg.text_config.num_experts == 4 and cfg.text_config.num_experts_per_tok == 2
    sp = ids_of(family)
    assert cfg.video_token_id == sp["<|video_pad|>"] and cfg.vision_start_token_id == sp["<|vision_start|>"]
    assert cfg.text_config.vocab_size > max(sp.values())

    with torch.no_grad():
        out = model(**inputs, logits_to_keep=1)
    assert tuple(out.logits.shape) == (1, 1, cfg.text_config.vocab_size)
    assert torch.isfinite(out.logits).all()
    assert 0.3 < float(out.logits.std()) < 10


def test_tiny_seed_determinism():
    a = tiny.build_tiny_model("qwen3_vl", seed=0)
    state = torch.random.get_rng_state()
    b = tiny.build_tiny_model("qwen3_vl", seed=0)
    assert torch.equal(state, torch.random.get_rng_state())  # caller's RNG untouched
    c = tiny.build_tiny_model("qwen3_vl", seed=1)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_unknown_family():
    with pytest.raises(ValueError):
        tiny.build_tiny_model("llava")
    with pytest.raises(ValueError):
        P.build_processor("llava")
