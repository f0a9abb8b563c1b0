"""E/PD parity on tiny random models with the real processors and tokenizers (the HF reference engine).

Per family and per case:

(i)   layout: ``adapter.derive_layout`` matches what the processor's ids say, ``adapter.rebuild_token_ids``
      reproduces the processor's ids exactly, and ``adapter.mrope_positions`` equals HF
      ``model.model.get_rope_index`` bitwise (values, int64, delta);
(ii)  model: the hidden states of ``epd`` and ``epd-rebuild`` equal ``aggregated`` bitwise, and so do the
      last-position logits and the greedy tokens (aggregated tokens come from ``model.generate``);
(iii) ``epd-stock`` (TensorRT-LLM's current prefill) raises ``MropeLengthError`` with the validator on, and
      gives different outputs with it off (video cases; an image-only prompt has the same ids both ways).

Cosmos3-Edge is covered at layout level (its processor with the Qwen3 stand-in tokenizer, its model class's
``get_rope_index``). Each family's tokenizer, processor and model are built once per module; every case runs
once and its results are shared by the tests that check them. The 720p40 clip is ``@pytest.mark.slow``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("torchvision")
torch = pytest.importorskip("torch")

from oracles import derive_layout_naive  # noqa: E402

import mm_handoff  # noqa: E402
from mm_handoff import MropeLengthError  # noqa: E402
from mm_handoff.adapters import FAMILIES as ADAPTERS  # noqa: E402
from mm_handoff.hf import processors as P  # noqa: E402
from mm_handoff.hf import tiny  # noqa: E402
from mm_handoff.hf.aggregated import aggregated  # noqa: E402
from mm_handoff.hf.encode import (  # noqa: E402
    encode,
    grid_list,  # noqa: E402
    handoff,
)
from mm_handoff.hf.prefill import pad_mask, pd_from_encoder, prefill_and_decode, prefill_decode  # noqa: E402  # noqa: E402
from mm_handoff.hf.report import run_three_modes  # noqa: E402
from mm_handoff.hf.tokenizers import load_tokenizer  # noqa: E402
from mm_handoff.layout.tokens import first_difference  # noqa: E402

pytestmark = pytest.mark.hf

MODEL_FAMILIES = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "cosmos3_omni")
MAX_NEW_TOKENS = 4
TEXT = "Describe this."


# ---------------------------------------------------------------------------------------------- cases
def _messages(parts):
    content = [{"type": p} for p in parts] + [{"type": "text", "text": TEXT}]
    return [{"role": "user", "content": content}]


def _case(name: str) -> dict:
    """One request: messages, media, metadata and processor kwargs. Small clips at sizes the official video
    size keeps as they are (grids printed in the comments)."""
    if name == "image":  # grid [1,4,6]: 6 pads
        return {"messages": _messages(["image"]), "images": [P.synthetic_image(64, 96, seed=1)]}
    if name == "video":  # 6 frames 64x96 at 24 fps: grid [3,4,6], 3 groups x 6 pads
        v, m = P.synthetic_clip(6, 64, 96, fps=24.0, seed=2)
        return {"messages": _messages(["video"]), "videos": [v], "video_metadata": [m]}
    if name == "image+video":
        v, m = P.synthetic_clip(4, 64, 96, fps=30.0, seed=3)
        return {"messages": _messages(["image", "video"]), "images": [P.synthetic_image(64, 64, seed=4)],
                "videos": [v], "video_metadata": [m]}
    if name == "video+image":  # video first: the rows must follow sequence order, not modality order
        v, m = P.synthetic_clip(4, 64, 64, fps=24.0, seed=5, frames_indices=range(0, 48, 12))
        return {"messages": _messages(["video", "image"]), "images": [P.synthetic_image(64, 96, seed=6)],
                "videos": [v], "video_metadata": [m]}
    if name == "two_videos":  # [2,4,4] at 30 fps and [3,4,6] at 29.97 fps
        v1, m1 = P.synthetic_clip(4, 64, 64, fps=30.0, seed=7)
        v2, m2 = P.synthetic_clip(6, 64, 96, fps=29.97, seed=8, frames_indices=range(3, 63, 10))
        return {"messages": _messages(["video", "video"]), "videos": [v1, v2], "video_metadata": [m1, m2]}
    if name == "odd_frames":  # 5 frames -> padded to 6, grid [3,4,4]; HF extends frames_indices in place
        v, m = P.synthetic_clip(5, 64, 64, fps=24.0, seed=9)
        return {"messages": _messages(["video"]), "videos": [v], "video_metadata": [m]}
    if name == "sampled":  # 60 source frames at 24 fps, sampled at 2 fps -> [0, 15, 30, 44, 59], grid [3,4,4]
        v, m = P.synthetic_clip(60, 64, 64, fps=24.0, seed=10)
        m.frames_indices = None
        return {"messages": _messages(["video"]), "videos": [v], "video_metadata": [m],
                "proc_kw": {"do_sample_frames": True, "fps": 2}}
    if name == "long":  # 64 frames 64x64: grid [32,4,4], 32 groups
        v, m = P.synthetic_clip(64, 64, 64, fps=24.0, seed=11)
        return {"messages": _messages(["video"]), "videos": [v], "video_metadata": [m]}
    if name == "720p40":  # the reference clip: grid [20,36,66], 12,054 tokens
        v, m = P.synthetic_clip(40, 720, 1280, fps=24.0, seed=0)
        return {"messages": P.video_messages(), "videos": [v], "video_metadata": [m]}  # "Describe this video."
    raise KeyError(name)


CASES = ("image", "video", "image+video", "video+image", "two_videos", "odd_frames", "sampled", "long")
VIDEO_CASES = tuple(c for c in CASES if c != "image")


class FamilyEnv:
    """One family's tokenizer, processor, tiny model and adapter, plus memoised per-case runs."""

    def __init__(self, family: str):
        self.family = family
        self.tok = load_tokenizer(P.tokenizer_vocab_for(family), shared=True)
        self.proc = P.build_processor(family, self.tok)
        self.model = tiny.build_tiny_model(family, seed=0)
        self.adapter = ADAPTERS[family](tokenizer=self.tok, config=self.model.config)
        self._runs: dict = {}

    def run(self, case: str) -> dict:
        if case in self._runs:
            return self._runs[case]
        req = _case(case)
        kw = dict(messages=req["messages"], images=req.get("images"), videos=req.get("videos"),
                  **req.get("proc_kw", {}))
        meta = req.get("video_metadata")
        agg = aggregated(self.model, self.proc, video_metadata=copy.deepcopy(meta),
                                max_new_tokens=MAX_NEW_TOKENS, **kw)
        enc = encode(self.model, self.proc, self.adapter, video_metadata=copy.deepcopy(meta),
                            request_id=f"{self.family}/{case}", **kw)
        out = {"request": req, "agg": agg, "enc": enc}
        for mode in ("epd", "epd-rebuild"):
            out[mode] = pd_from_encoder(self.model, self.adapter, enc, mode=mode, max_new_tokens=MAX_NEW_TOKENS)
        try:
            pd_from_encoder(self.model, self.adapter, enc, mode="epd-stock", max_new_tokens=MAX_NEW_TOKENS,
                                   validate=True)
            out["stock_error"] = None
        except mm_handoff.HandoffError as exc:
            out["stock_error"] = exc
        out["stock"] = pd_from_encoder(self.model, self.adapter, enc, mode="epd-stock",
                                              max_new_tokens=MAX_NEW_TOKENS, validate=False)
        # the processor's own outputs, for the layout checks
        out["inputs"] = P.run_processor(self.proc, req["messages"], images=req.get("images"),
                                        videos=req.get("videos"), video_metadata=copy.deepcopy(meta),
                                        **({"return_metadata": True} if req.get("videos") else {}),
                                        **req.get("proc_kw", {}))
        self._runs[case] = out
        return out


@pytest.fixture(scope="module", params=MODEL_FAMILIES)
def env(request):
    e = FamilyEnv(request.param)
    yield e
    e._runs.clear()


# ---------------------------------------------------------------------------------------------- (i) layout
def _hf_rope(model, inputs):
    with torch.no_grad():
        pos, delta = model.model.get_rope_index(inputs["input_ids"], inputs["mm_token_type_ids"],
                                                image_grid_thw=inputs.get("image_grid_thw"),
                                                video_grid_thw=inputs.get("video_grid_thw"))
    return pos, delta


def _check_layout_against_ids(adapter, layout, ids, image_grid, video_grid, metas, proc):
    spec = adapter.spec
    assert np.array_equal(layout.token_ids, ids)
    # pads: exactly the runs, in order, per modality
    covered = np.zeros(ids.shape[0], dtype=bool)
    for run in layout.runs:
        covered[run.offset:run.end] = True
    assert np.array_equal(covered, (ids == spec.image_pad) | (ids == spec.video_pad))
    kinds = [i.modality for i in layout.items]
    assert kinds.count("image") == len(image_grid or []) and kinds.count("video") == len(video_grid or [])
    assert [list(i.grid_thw) for i in layout.items if i.modality == "image"] == (image_grid or [])
    assert [list(i.grid_thw) for i in layout.items if i.modality == "video"] == (video_grid or [])
    starts = [i.runs[0].offset for i in layout.items]
    assert starts == sorted(starts)
    m2 = spec.merge_size ** 2
    for item in layout.items:
        t, h, w = item.grid_thw
        assert item.embedding_length == t * h * w // m2
        if item.modality == "video":
            assert [r.length for r in item.runs] == [h * w // m2] * t
            for r in item.runs:  # every group is <ts> vs pads ve
                assert ids[r.offset - 1] == spec.vision_start and ids[r.end] == spec.vision_end
        else:
            assert len(item.runs) == 1
    # timestamps parsed from the ids are HF's, group by group
    for k, item in enumerate(i for i in layout.items if i.modality == "video"):
        meta = metas[k]
        idx = meta.frames_indices
        idx = list(idx.tolist() if hasattr(idx, "tolist") else idx)
        hf = proc._calculate_timestamps(idx, meta.fps, proc.video_processor.temporal_patch_size)
        assert list(item.timestamps) == [float(f"{t:.1f}") for t in hf[: item.grid_thw[0]]]
    # the plain-Python reference derivation agrees
    naive = derive_layout_naive(ids, spec, image_grid_thw=image_grid, video_grid_thw=video_grid,
                                family=layout.family, convention=layout.convention,
                                tokenizer_digest=layout.tokenizer_digest)
    assert naive == layout.with_mrope(None, None)  # the oracle derives no mRoPE (and so no delta)
    mm_handoff.validate(layout, prompt_token_ids=ids, embedding_rows=layout.multimodal_embedding_lengths,
                        mrope_position_ids=layout.mrope_position_ids)


@pytest.mark.parametrize("case", CASES)
def test_layout_rebuild_and_mrope(env, case):
    r = env.run(case)
    inputs, enc = r["inputs"], r["enc"]
    ids = inputs["input_ids"][0].numpy().astype(np.int32)
    image_grid = grid_list(inputs.get("image_grid_thw"))
    video_grid = grid_list(inputs.get("video_grid_thw"))
    metas = inputs.get("video_metadata")
    assert np.array_equal(enc.input_ids, ids)
    assert enc.image_grid_thw == image_grid and enc.video_grid_thw == video_grid

    layout = env.adapter.derive_layout(ids, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=True)
    assert layout == enc.layout
    _check_layout_against_ids(env.adapter, layout, ids, image_grid, video_grid, metas, env.proc)

    # the PD-side rebuild from the raw prompt + grids + the processor's returned metadata is exact
    rebuilt = env.adapter.rebuild_token_ids(enc.raw_prompt_ids, image_grid_thw=image_grid, video_grid_thw=video_grid,
                                            video_metadata=copy.deepcopy(metas))
    assert rebuilt.dtype == np.int32 and np.array_equal(rebuilt, ids), first_difference(rebuilt, ids)

    # mRoPE: bitwise equal to HF get_rope_index (values, int64, delta)
    pos_hf, delta_hf = _hf_rope(env.model, inputs)
    pos, delta = env.adapter.mrope_positions(ids, image_grid_thw=image_grid, video_grid_thw=video_grid)
    assert pos_hf.dtype == torch.int64 and pos.dtype == np.int64
    assert pos.shape == (3, ids.shape[0]) and tuple(pos_hf.shape) == (3, 1, ids.shape[0])
    assert np.array_equal(pos, pos_hf[:, 0, :].numpy())
    assert isinstance(delta, int) and delta == int(delta_hf.reshape(-1)[0])
    assert np.array_equal(layout.mrope_position_ids, pos) and layout.mrope_position_delta == delta
    # the wire form survives JSON and decodes to the same layout (mRoPE recomputed, delta carried)
    wire, tensors = handoff(enc)
    decoded = mm_handoff.HandoffLayout.from_wire(wire)
    assert decoded.mrope_position_ids is None and decoded.mrope_position_delta == delta
    assert decoded == layout.with_mrope(None, delta)
    assert tensors["embeddings"].shape[0] == layout.num_pads
    assert tensors["item_rows"] == layout.multimodal_embedding_lengths  # the vision tower's split per item
    assert len(tensors["deepstack"]) == env.adapter.deepstack_levels == (3 if tiny.has_deepstack(env.family) else 0)


def test_sampled_frames_use_returned_indices(env):
    """do_sample_frames=True, fps=2: the PD rebuild uses the processor's sampled frames_indices."""
    r = env.run("sampled")
    meta = r["enc"].video_metadata[0]
    idx = list(meta.frames_indices.tolist() if hasattr(meta.frames_indices, "tolist") else meta.frames_indices)
    assert idx[:5] == [0, 15, 30, 44, 59]
    assert r["enc"].video_grid_thw == [[3, 4, 4]]
    assert [i.timestamps for i in r["enc"].layout.items] == [(0.3, 1.5, 2.5)]
    # the source metadata (no frames_indices) cannot rebuild the prompt; the returned one can
    src = r["request"]["video_metadata"]
    with pytest.raises(mm_handoff.HandoffError):
        env.adapter.rebuild_token_ids(r["enc"].raw_prompt_ids, video_grid_thw=r["enc"].video_grid_thw,
                                      video_metadata=src)


# ---------------------------------------------------------------------------------------------- (ii) model
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["epd", "epd-rebuild"])
def test_epd_bitwise_equals_aggregated(env, case, mode):
    r = env.run(case)
    agg, res = r["agg"], r[mode]
    assert res.validated
    assert np.array_equal(res.prompt_ids, agg.prompt_ids)
    assert np.array_equal(res.mrope_position_ids, agg.mrope_position_ids)
    assert res.mrope_position_delta == agg.mrope_position_delta
    assert res.hidden_states.shape == agg.hidden_states.shape
    assert torch.equal(res.hidden_states, agg.hidden_states)
    assert torch.equal(res.last_logits, agg.last_logits)
    assert len(agg.tokens) == MAX_NEW_TOKENS
    assert res.tokens == agg.tokens


# ---------------------------------------------------------------------------------------------- (iii) stock
@pytest.mark.parametrize("case", VIDEO_CASES)
def test_stock_prefill_is_caught_and_wrong(env, case):
    r = env.run(case)
    agg, stock, err = r["agg"], r["stock"], r["stock_error"]
    assert isinstance(err, MropeLengthError), err
    assert err.actual == agg.prompt_len
    n_videos = len(r["enc"].video_grid_thw)
    groups = sum(t for t, _, _ in r["enc"].video_grid_thw)
    ts_tokens = sum(e - s for item in r["enc"].layout.items if item.modality == "video"
                    for s, e in item.timestamp_spans)
    # pad_only: aggregated - stock = timestamp tokens + the 2 inner markers of every group
    assert agg.prompt_len - stock.prompt_len == ts_tokens + 2 * groups
    assert len(stock.layout.runs) == len(r["enc"].layout.items) and n_videos >= 1
    assert not stock.validated
    assert stock.hidden_states.shape[0] < agg.hidden_states.shape[0]
    assert not torch.equal(stock.last_logits, agg.last_logits)
    assert float((stock.last_logits - agg.last_logits).abs().max()) > 1e-3


def test_stock_image_only_is_exact(env):
    """An image-only prompt expands the same way on both paths: the validator passes and the outputs match."""
    r = env.run("image")
    assert r["stock_error"] is None
    assert np.array_equal(r["stock"].prompt_ids, r["agg"].prompt_ids)
    assert torch.equal(r["stock"].hidden_states, r["agg"].hidden_states)
    assert r["stock"].tokens == r["agg"].tokens


def test_mixed_rows_follow_sequence_order(env):
    """Video before image: the encoder's rows (and deepstack rows) are in prompt order, not modality order."""
    r = env.run("video+image")
    enc = r["enc"]
    assert [i.modality for i in enc.layout.items] == ["video", "image"]
    inputs = r["inputs"]
    with torch.no_grad():
        img = env.model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"], return_dict=True)
        vid = env.model.model.get_video_features(inputs["pixel_values_videos"], inputs["video_grid_thw"],
                                                 return_dict=True)
    assert torch.equal(enc.embeddings, torch.cat([*vid.pooler_output, *img.pooler_output]))
    for k, level in enumerate(enc.deepstack):
        assert torch.equal(level, torch.cat([*vid.deepstack_features[k], *img.deepstack_features[k]]))


def test_pd_rejects_wrong_row_count(env):
    """The accept step compares the rows per item with the layout's pads; the prefill compares the tensor
    it scatters with the pads."""
    r = env.run("video")
    wire, tensors = handoff(r["enc"])
    short = dict(embeddings=tensors["embeddings"][:-1], deepstack=[d[:-1] for d in tensors["deepstack"]])
    with pytest.raises(mm_handoff.EmbeddingCountError) as info:
        prefill_decode(env.model, env.adapter, mode="epd", wire=wire, max_new_tokens=1,
                              item_rows=[n - 1 for n in tensors["item_rows"]], **short)
    assert info.value.field == "embedding_rows"
    with pytest.raises(mm_handoff.EmbeddingCountError) as info:
        prefill_decode(env.model, env.adapter, mode="epd", wire=wire, max_new_tokens=1,
                              item_rows=tensors["item_rows"], **short)
    assert info.value.field == "embedding rows"


def test_pd_rejects_another_requests_handoff(env):
    """The carried layout must be the one this request's own prompt expands to: the video handoff with the
    two-video request's prompt is refused before any prefill."""
    one, two = env.run("video")["enc"], env.run("two_videos")["enc"]
    wire, tensors = handoff(one)
    with pytest.raises(mm_handoff.HandoffError) as info:
        prefill_decode(env.model, env.adapter, mode="epd", wire=wire, embeddings=tensors["embeddings"],
                              deepstack=tensors["deepstack"], item_rows=tensors["item_rows"],
                              raw_prompt_ids=two.raw_prompt_ids, max_new_tokens=1)
    assert "prompt" in info.value.field


def _prefill_layout(env, layout, embeddings, deepstack, max_new_tokens):
    return prefill_and_decode(env.model, np.asarray(layout.token_ids), layout.mrope_position_ids,
                              layout.mrope_position_delta, pad_mask(layout), embeddings, deepstack,
                              max_new_tokens, None)


def test_deepstack_is_required(env):
    """Deepstack families: the PD side refuses a handoff without the deepstack rows (the row width is
    hidden x (1 + levels)), and prefilling without them is not exact (max |logit diff| 2.4-3.0 on these
    tiny models)."""
    if not tiny.has_deepstack(env.family):
        pytest.skip("no deepstack in this family")
    r = env.run("video")
    enc = r["enc"]
    wire, tensors = handoff(enc)
    with pytest.raises(mm_handoff.EmbeddingCountError) as info:
        prefill_decode(env.model, env.adapter, mode="epd", wire=wire, embeddings=tensors["embeddings"],
                              deepstack=[], item_rows=tensors["item_rows"], max_new_tokens=1)
    assert info.value.field == "embeddings[0].shape[1]"
    core = _prefill_layout(env, enc.layout, tensors["embeddings"], [], 1)
    assert not torch.equal(core["hidden"], r["agg"].hidden_states)


def test_decode_carries_recurrent_state(env):
    """The decode loop carries the prefill's cache object forward: for Qwen3.5 it holds the linear-attention
    conv and recurrent state next to the K/V of the full-attention layers."""
    r = env.run("video")
    layout = r["enc"].layout
    wire, tensors = handoff(r["enc"])
    core = _prefill_layout(env, layout, tensors["embeddings"], tensors["deepstack"], MAX_NEW_TOKENS)
    assert core["tokens"] == r["agg"].tokens
    cache = core["cache"]
    assert cache.get_seq_length() == layout.prompt_len + MAX_NEW_TOKENS - 1
    kinds = [type(layer).__name__ for layer in cache.layers]
    if env.family.startswith("qwen3_5"):
        assert kinds.count("LinearAttentionLayer") == 2 and kinds.count("DynamicLayer") == 2
        for layer in cache.layers:
            if type(layer).__name__ == "LinearAttentionLayer":
                assert layer.is_recurrent_states_initialized and layer.is_conv_states_initialized
    else:
        assert set(kinds) == {"DynamicLayer"}


# ---------------------------------------------------------------------------------------------- the demo driver
def test_run_three_modes_report():
    seen = []
    rep = run_three_modes("qwen3_vl", max_new_tokens=3, progress=lambda stage, info: seen.append(stage))
    assert rep["hidden_bitwise_equal"] == {"epd": True, "epd-rebuild": True, "epd-stock": False}
    assert rep["max_abs_logit_diff"]["epd"] == 0.0 and rep["max_abs_logit_diff"]["epd-stock"] > 0
    assert rep["validator"]["epd"] == "ok"
    assert rep["validator"]["epd-stock (validator on)"].startswith("MropeLengthError")
    assert rep["stock_error"]["type"] == "MropeLengthError"
    assert rep["tokens"]["epd"] == rep["tokens"]["aggregated"] and rep["tokens_equal"]["epd"]
    assert rep["lengths"]["aggregated"] - rep["lengths"]["epd-stock"] == rep["lengths"]["aggregated_minus_stock"] > 0
    assert rep["first_difference"] == 4  # right after the outer vision_start: the first timestamp
    assert rep["mrope"]["epd_equals_hf_get_rope_index"]
    agg_layout, stock_layout = rep["layouts"]["aggregated"], rep["layouts"]["stock"]  # inspect's summary
    video = agg_layout["items"][0]
    assert len(video["runs"]) == video["grid_thw"][0]  # one pad run per temporal group
    assert stock_layout["trtllm"]["multimodal_run_lengths"] == [video["embedding_length"]]  # one run of all pads
    assert seen[0] == "load" and seen[-1] == "done" and "epd-stock/validate" in seen
    import json
    json.dumps(rep)


# ---------------------------------------------------------------------------------------------- Cosmos3-Edge
@pytest.fixture(scope="module")
def edge():
    tok = load_tokenizer("qwen3", shared=True)  # stand-in for the unavailable Edge tokenizer
    proc = P.build_processor("cosmos3_edge", tok)
    model = tiny.build_tiny_model("cosmos3_edge", seed=0)
    adapter = ADAPTERS["cosmos3_edge"](tokenizer=tok, config=model.config)
    return tok, proc, model, adapter


@pytest.mark.parametrize("case", ["video", "image+video", "two_videos", "odd_frames", "sampled"])
def test_cosmos3_edge_layout(edge, case):
    tok, proc, model, adapter = edge
    assert adapter.convention == "replace_wrapper" and adapter.spec.temporal_patch_size == 1
    req = _case(case)
    inputs = P.run_processor(proc, req["messages"], images=req.get("images"), videos=req.get("videos"),
                             video_metadata=copy.deepcopy(req.get("video_metadata")), return_metadata=True,
                             **req.get("proc_kw", {}))
    ids = inputs["input_ids"][0].numpy().astype(np.int32)
    image_grid = grid_list(inputs.get("image_grid_thw"))
    video_grid = grid_list(inputs.get("video_grid_thw"))
    metas = inputs["video_metadata"]
    raw = tok(proc.apply_chat_template(req["messages"], tokenize=False, add_generation_prompt=True))["input_ids"]
    rebuilt = adapter.rebuild_token_ids(raw, image_grid_thw=image_grid, video_grid_thw=video_grid,
                                        video_metadata=copy.deepcopy(metas))
    assert np.array_equal(rebuilt, ids), first_difference(rebuilt, ids)
    layout = adapter.derive_layout(ids, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=True)
    for item in layout.items:
        if item.modality == "video":
            t, h, w = item.grid_thw
            assert len(item.runs) == t and all(r.length == h * w // 4 for r in item.runs)  # one group per frame
    # no outer wrapper: one vision_start per group (+ one per image)
    groups = sum(t for t, _, _ in video_grid)
    assert layout.vision_start_positions.shape[0] == groups + len(image_grid or [])
    with torch.no_grad():
        pos_hf, delta_hf = model.model.get_rope_index(inputs["input_ids"], inputs["mm_token_type_ids"],
                                                      image_grid_thw=inputs.get("image_grid_thw"),
                                                      video_grid_thw=inputs.get("video_grid_thw"))
    assert pos_hf.dtype == torch.int64
    assert np.array_equal(layout.mrope_position_ids, pos_hf[:, 0, :].numpy())
    assert layout.mrope_position_delta == int(delta_hf.reshape(-1)[0])


# ---------------------------------------------------------------------------------------------- 720p40 (slow)
@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen3_vl", "qwen3_5"])
def test_720p40_parity(family, request):
    """About 25 s per family on 2 cores, 3 GB RSS. Runs with ``-m slow`` or ``MM_HANDOFF_SLOW=1``
    (tests/conftest.py skips ``slow`` tests otherwise)."""
    e = FamilyEnv(family)
    r = e.run("720p40")
    assert r["agg"].prompt_len == 12054 and r["enc"].video_grid_thw == [[20, 36, 66]]
    rebuilt = e.adapter.rebuild_token_ids(r["enc"].raw_prompt_ids, video_grid_thw=r["enc"].video_grid_thw,
                                          video_metadata=r["enc"].video_metadata)
    assert np.array_equal(rebuilt, r["agg"].prompt_ids)
    for mode in ("epd", "epd-rebuild"):
        assert torch.equal(r[mode].hidden_states, r["agg"].hidden_states)
        assert r[mode].tokens == r["agg"].tokens
    assert np.array_equal(r["epd"].mrope_position_ids, r["agg"].mrope_position_ids)
    assert isinstance(r["stock_error"], MropeLengthError)
    assert r["stock"].prompt_len == 11894
