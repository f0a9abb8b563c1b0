"""The ``replace_wrapper`` convention against a real transformers from before 5.10.

transformers <= 5.9 replaces the whole ``<|vision_start|><|video_pad|><|vision_end|>`` trio with the per-group
expansion; >= 5.10.1 replaces only the pad and keeps the template's outer pair (2 tokens more per video).
This runs the *real* 5.9.0 ``Qwen3VLProcessor`` in a subprocess and checks that the ``replace_wrapper``
adapter reproduces its ids exactly, that its layout derives, that mRoPE equals both HF 5.9.0's own
``get_rope_index`` (in the subprocess) and the installed one's, and that the ``pad_only`` rebuild is exactly
2 tokens longer per video.

Set-up, cached under ``$MM_HANDOFF_CACHE`` or ``~/.cache/mm-handoff`` (first run ~10 s with network, then
offline):

* ``wheels/transformers-5.9.0-py3-none-any.whl`` via ``pip download --no-deps``, unzipped to ``tf-5.9.0/``;
* 5.9.0 pins ``tokenizers>=0.22,<=0.23.0`` and ``huggingface-hub>=1.5,<2`` (our venv has 0.23.3 / 2.x, and
  transformers checks them at import), so ``tokenizers==0.22.2`` and ``huggingface-hub<2`` (with httpx, which
  hub 1.x needs) go into ``tf-5.9.0-deps/`` with ``pip install --target``.

The subprocess runs this venv's python with ``PYTHONPATH=tf-5.9.0:tf-5.9.0-deps`` (torch, torchvision,
numpy come from the venv). The test skips with the reason when the set-up cannot be made.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("torchvision")
torch = pytest.importorskip("torch")

import mm_handoff  # noqa: E402
from mm_handoff.adapters import FAMILIES  # noqa: E402
from mm_handoff.hf import processors as P  # noqa: E402
from mm_handoff.hf.tokenizers import build_tokenizer, load_tokenizer  # noqa: E402

pytestmark = pytest.mark.hf

from old_transformers import OLD_VERSION  # noqa: E402
from old_transformers import prepare_old_transformers as _prepare_old_transformers  # noqa: E402

# The script the old transformers runs. Reads a JSON job on stdin, prints one JSON line.
_SCRIPT = r'''
import json, sys, types
import numpy as np
job = json.loads(sys.stdin.read())
import transformers, tokenizers
from transformers import AutoTokenizer, Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel
from transformers.video_utils import VideoMetadata

tok = AutoTokenizer.from_pretrained(job["tokenizer_dir"])
proc = Qwen3VLProcessor(
    image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
    tokenizer=tok,
    video_processor=Qwen3VLVideoProcessor(size=job["video_size"], do_sample_frames=False),
    chat_template=tok.chat_template,
)
# get_rope_index needs only config.vision_config.spatial_merge_size and get_vision_position_ids
ns = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=2)))
ns.get_vision_position_ids = types.MethodType(Qwen3VLModel.get_vision_position_ids, ns)

def frames(n, h, w, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)

out = {"transformers": transformers.__version__, "transformers_file": transformers.__file__,
       "tokenizers": tokenizers.__version__, "cases": {}}
for name, case in job["cases"].items():
    kw = {"text": [case["prompt"]], "return_tensors": "pt"}
    if case.get("images"):
        kw["images"] = [frames(1, im["h"], im["w"], im["seed"])[0] for im in case["images"]]
    if case.get("videos"):
        kw["videos"] = [frames(v["n"], v["h"], v["w"], v["seed"]) for v in case["videos"]]
        kw["video_metadata"] = [VideoMetadata(total_num_frames=v["total"], fps=v["fps"], width=v["w"], height=v["h"],
                                              frames_indices=list(v["indices"])) for v in case["videos"]]
        kw["do_sample_frames"] = False
        kw["return_metadata"] = True
    res = proc(**kw)
    pos, delta = Qwen3VLModel.get_rope_index(ns, res["input_ids"], res["mm_token_type_ids"],
                                             image_grid_thw=res.get("image_grid_thw"),
                                             video_grid_thw=res.get("video_grid_thw"))
    metas = res.get("video_metadata") or []
    out["cases"][name] = {
        "input_ids": res["input_ids"][0].tolist(),
        "mm_token_type_ids": res["mm_token_type_ids"][0].tolist(),
        "image_grid_thw": res["image_grid_thw"].tolist() if res.get("image_grid_thw") is not None else None,
        "video_grid_thw": res["video_grid_thw"].tolist() if res.get("video_grid_thw") is not None else None,
        "video_metadata": [{"fps": m.fps, "total_num_frames": m.total_num_frames,
                            "frames_indices": [int(i) for i in (m.frames_indices.tolist()
                                               if hasattr(m.frames_indices, "tolist") else m.frames_indices)]}
                           for m in metas],
        "mrope": pos[:, 0, :].tolist(), "mrope_dtype": str(pos.dtype), "delta": int(delta.reshape(-1)[0]),
    }
print("RESULT " + json.dumps(out))
'''


def _video(n, h, w, seed, fps=24.0, indices=None):
    idx = list(range(n)) if indices is None else [int(i) for i in indices]
    return {"n": n, "h": h, "w": w, "seed": seed, "fps": fps, "indices": idx, "total": max(idx) + 1}


def _messages(parts, text="Describe this."):
    return [{"role": "user", "content": [{"type": p} for p in parts] + [{"type": "text", "text": text}]}]


def _cases(tok) -> dict:
    def render(parts):
        return tok.apply_chat_template(_messages(parts), tokenize=False, add_generation_prompt=True)

    vp = "<|video_pad|>"
    return {
        "video": {"prompt": render(["video"]), "videos": [_video(6, 64, 96, 1)]},
        # 470 tokens under >= 5.10.1, 468 under <= 5.9
        "small_clip": {"prompt": render(["video"]), "videos": [_video(16, 224, 224, 2)]},
        "odd_frames": {"prompt": render(["video"]), "videos": [_video(5, 64, 64, 3)]},
        "image+video": {"prompt": render(["image", "video"]), "images": [{"h": 64, "w": 64, "seed": 4}],
                        "videos": [_video(4, 64, 96, 5, fps=30.0)]},
        "two_videos": {"prompt": render(["video", "video"]),
                       "videos": [_video(4, 64, 64, 6, fps=30.0), _video(6, 64, 96, 7, fps=29.97,
                                                                           indices=range(3, 63, 10))]},
        "long": {"prompt": render(["video"]), "videos": [_video(64, 64, 64, 8)]},
        # "vllm may input video token directly": a bare <|video_pad|> without the markers
        "bare_pad": {"prompt": f"<|im_start|>user\n{vp}Describe this.<|im_end|>\n<|im_start|>assistant\n",
                     "videos": [_video(4, 64, 64, 9)]},
    }


@pytest.fixture(scope="module")
def old_run():
    tf_dir, deps_dir = _prepare_old_transformers()
    tok_dir = build_tokenizer("qwen3")
    tok = load_tokenizer("qwen3", shared=True)
    cases = _cases(tok)
    job = {"tokenizer_dir": str(tok_dir), "video_size": dict(P.OFFICIAL_VIDEO_SIZE), "cases": cases}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tf_dir), str(deps_dir)])
    env.setdefault("OMP_NUM_THREADS", "1")
    env["TOKENIZERS_PARALLELISM"] = "false"
    r = subprocess.run([sys.executable, "-c", _SCRIPT], input=json.dumps(job), capture_output=True, text=True,
                       env=env, timeout=600, cwd=str(tf_dir.parent))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, f"old transformers subprocess failed:\n{r.stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    return tok, cases, out


def test_subprocess_is_old_transformers(old_run):
    _, _, out = old_run
    assert out["transformers"] == OLD_VERSION
    assert f"tf-{OLD_VERSION}" in out["transformers_file"]
    assert out["tokenizers"] == "0.22.2"


def _meta(m):
    return {"fps": m["fps"], "frames_indices": list(m["frames_indices"]), "total_num_frames": m["total_num_frames"]}


@pytest.mark.parametrize("case", ["video", "small_clip", "odd_frames", "image+video", "two_videos", "long", "bare_pad"])
def test_replace_wrapper_rebuild_matches_old_processor(old_run, case):
    tok, cases, out = old_run
    res = out["cases"][case]
    ids = np.asarray(res["input_ids"], dtype=np.int32)
    image_grid, video_grid = res["image_grid_thw"], res["video_grid_thw"]
    metas = [_meta(m) for m in res["video_metadata"]]
    raw = tok(cases[case]["prompt"])["input_ids"]
    old = FAMILIES["qwen3_vl"](convention="replace_wrapper", tokenizer=tok)
    new = FAMILIES["qwen3_vl"](convention="pad_only", tokenizer=tok)
    assert old.convention == mm_handoff.REPLACE_WRAPPER

    rebuilt = old.rebuild_token_ids(raw, image_grid_thw=image_grid, video_grid_thw=video_grid,
                                    video_metadata=copy.deepcopy(metas))
    assert np.array_equal(rebuilt, ids), (len(rebuilt), len(ids))

    # the layout derives from the <= 5.9 ids (no outer wrapper: one vs/ve per group, plus one per image)
    layout = old.derive_layout(ids, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=True)
    assert layout.convention == "replace_wrapper"
    groups = sum(t for t, _, _ in video_grid)
    n_images = len(image_grid or [])
    assert layout.vision_start_positions.shape[0] == groups + n_images
    assert layout.vision_end_positions.shape[0] == groups + n_images
    for item in layout.items:
        if item.modality == "video":
            t, h, w = item.grid_thw
            assert [r.length for r in item.runs] == [h * w // 4] * t
            assert item.timestamps is not None and len(item.timestamps) == t
    mm_handoff.validate(layout, prompt_token_ids=ids, mrope_position_ids=layout.mrope_position_ids,
                        embedding_rows=layout.multimodal_embedding_lengths)

    # mRoPE: equal to 5.9.0's own get_rope_index on its ids ...
    assert res["mrope_dtype"] == "torch.int64"
    assert np.array_equal(layout.mrope_position_ids, np.asarray(res["mrope"], dtype=np.int64))
    assert layout.mrope_position_delta == res["delta"]
    # ... and to the installed (>= 5.10) get_rope_index: the rules did not change
    import types

    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel
    ns = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=2)))
    ns.get_vision_position_ids = types.MethodType(Qwen3VLModel.get_vision_position_ids, ns)
    ids_t = torch.tensor(res["input_ids"], dtype=torch.int64)[None]
    mm_t = torch.tensor(res["mm_token_type_ids"], dtype=torch.int64)[None]
    pos, delta = Qwen3VLModel.get_rope_index(
        ns, ids_t, mm_t, image_grid_thw=None if image_grid is None else torch.tensor(image_grid),
        video_grid_thw=torch.tensor(video_grid))
    assert np.array_equal(pos[:, 0, :].numpy(), layout.mrope_position_ids)
    assert int(delta.reshape(-1)[0]) == layout.mrope_position_delta

    # pad_only keeps the template's outer pair: exactly 2 tokens more per wrapped video
    wrapped = 0 if case == "bare_pad" else len(video_grid)
    rebuilt_new = new.rebuild_token_ids(raw, image_grid_thw=image_grid, video_grid_thw=video_grid,
                                        video_metadata=copy.deepcopy(metas))
    assert len(rebuilt_new) - len(ids) == 2 * wrapped
    if wrapped:
        new_layout = new.derive_layout(rebuilt_new, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=True)
        assert new_layout.mrope_position_delta == layout.mrope_position_delta  # same delta both ways
        # removing the outer vs/ve of each video from the pad_only ids gives the replace_wrapper ids
        keep = np.ones(len(rebuilt_new), dtype=bool)
        for item in new_layout.items:
            if item.modality == "video":
                last = item.runs[-1]
                start = item.timestamp_spans[0][0] - 1
                assert rebuilt_new[start] == new.spec.vision_start and rebuilt_new[last.end + 1] == new.spec.vision_end
                keep[start] = keep[last.end + 1] = False
        assert np.array_equal(rebuilt_new[keep], ids)
    else:  # a bare pad is replaced the same way in both conventions
        assert np.array_equal(rebuilt_new, ids)


def test_small_clip_lengths(old_run):
    """The 16x224x224 clip gives 468 tokens under <= 5.9 (470 under >= 5.10.1 with this 14-token prompt)."""
    tok, cases, out = old_run
    res = out["cases"]["small_clip"]
    assert res["video_grid_thw"] == [[8, 14, 14]]
    ids = res["input_ids"]
    assert ids.count(151656) == 392 and ids.count(151652) == 8 and ids.count(151653) == 8
    raw = tok(cases["small_clip"]["prompt"])["input_ids"]
    new = FAMILIES["qwen3_vl"](convention="pad_only", tokenizer=tok)
    assert len(new.rebuild_token_ids(raw, video_grid_thw=res["video_grid_thw"],
                                     video_metadata=[_meta(m) for m in res["video_metadata"]])) == len(ids) + 2
