"""HF's processor as a differential oracle on requests shaped the way users send them (mm_handoff.hf.oracle).

Every family and convention: the current transformers (``pad_only``; Cosmos3-Edge's ``replace_wrapper``) in
process, transformers 5.9.0 (``replace_wrapper``) in a subprocess, as tests/hf/test_convention_old_transformers.py
sets it up. ``MM_HANDOFF_ORACLE_EXAMPLES`` requests per family and convention (300 in ``make test``; ``make
oracle-long`` runs 2,000 each, 22,000 in all). Two named properties pin the classes the oracle found first:
the text touching a video's first timestamp, and timestamps in the metadata's own number types.
"""

from __future__ import annotations

import collections
import copy
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")
pytest.importorskip("torchvision")
torch = pytest.importorskip("torch")

from mm_handoff.adapters.families import FAMILIES, HF_FAMILIES  # noqa: E402
from mm_handoff.adapters.timestamps import format_timestamp  # noqa: E402
from mm_handoff.errors import HandoffError  # noqa: E402
from mm_handoff.hf import corpus, oracle  # noqa: E402
from mm_handoff.hf import processors as P  # noqa: E402
from mm_handoff.hf.tokenizers import build_tokenizer, load_tokenizer  # noqa: E402

pytestmark = pytest.mark.hf

COUNT = int(os.environ.get("MM_HANDOFF_ORACLE_EXAMPLES", "300"))
#: every family the HF reference covers (the families table): the Qwen processor's under both conventions,
#: Cosmos3-Edge's (always replace_wrapper) under the current transformers
QWEN = tuple(name for name, row in HF_FAMILIES.items() if row.qwen_processor)
CURRENT = [(f, "pad_only") for f in QWEN] + [(name, "replace_wrapper") for name, row in HF_FAMILIES.items()
                                             if not row.qwen_processor]
#: what HF itself refuses: a tuple of frame indices (``indices.tolist()``), one frame where a temporal patch
#: needs two, and prompts its model cannot place (adjacent items of one kind without markers, no text at all)
HF_REFUSES = re.compile(r"AttributeError: 'tuple' object has no attribute 'tolist'|t:1 must be larger than "
                        r"temporal_factor|get_rope_index: (RuntimeError: The expanded size|ValueError: torch\.cat)")


def _tokenizer(family):
    return load_tokenizer(P.tokenizer_vocab_for(family), shared=True)


@functools.cache
def _processor(family):
    return P.build_processor(family, _tokenizer(family))


@functools.cache
def _adapter_pair(family, convention):
    return _adapters(family, convention, _tokenizer(family))


def _adapters(family, convention, tok):
    adapter = FAMILIES[family](tokenizer=tok, convention=None if family == "cosmos3_edge" else convention)
    bare = None if family == "cosmos3_edge" else FAMILIES[family](convention=convention)
    return adapter, bare


def _render(tok):
    return lambda messages: tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _judge(family, convention, tok, reqs, results, transformers_version):
    adapter, bare = _adapters(family, convention, tok)
    problems, refused, cases = [], collections.Counter(), []
    for req, hf in zip(reqs, results, strict=True):
        if "refused" in hf:
            refused[hf["refused"][:80]] += 1
            assert HF_REFUSES.search(hf["refused"]), f"HF failed unexpectedly on {req['prompt']!r}: {hf['refused']}"
            continue
        found = oracle.compare(adapter, bare, tok, req, hf)
        if found:
            problems.append((req["prompt"], [v["fps"] for v in req["videos"]], found))
        elif len(cases) < corpus.CASES_PER_SET and len(hf["input_ids"]) <= corpus.MAX_CASE_IDS:
            layout = adapter.derive_layout(hf["input_ids"], image_grid_thw=hf["image_grid_thw"],
                                           video_grid_thw=hf["video_grid_thw"])
            raw = tok(req["prompt"], add_special_tokens=False)["input_ids"]
            cases.append(corpus.case(req, raw, hf, layout, hf["timestamps"]))
    assert not problems, f"{len(problems)} of {len(reqs)} differ from HF; first: {problems[:3]}"
    assert sum(refused.values()) < 0.4 * len(reqs), refused  # most requests were compared
    # the stored corpus is what HF answers today (its cases are the first answered requests of this draw)
    fresh = corpus.make_set(family, convention, transformers_version, cases)
    name = f"{family}.{convention}"
    if os.environ.get("MM_HANDOFF_WRITE_CORPUS") == "1":
        Path(corpus.__file__).with_name("corpus_data").joinpath(f"{name}.json").write_text(corpus.dumps(fresh))
    assert json.loads(corpus.dumps(corpus.load(name))) == json.loads(corpus.dumps(fresh)), \
        f"{name}: the stored corpus is not what HF answers (MM_HANDOFF_WRITE_CORPUS=1 rewrites it)"


@pytest.mark.parametrize("family, convention", CURRENT)
def test_mm_handoff_answers_what_hf_answers(family, convention):
    tok = _tokenizer(family)
    proc = P.build_processor(family, tok)
    reqs = oracle.requests(family, convention, COUNT, seed=0, chat_template=_render(tok))
    import transformers

    _judge(family, convention, tok, reqs, [oracle.run_hf(proc, r) for r in reqs], transformers.__version__)


# --- transformers 5.9.0 (replace_wrapper), in a subprocess -----------------------------------------------------

_SCRIPT = r'''
import json, sys
job = json.loads(sys.stdin.read())
import transformers
from transformers import AutoTokenizer, Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor
from mm_handoff.hf import oracle
out = {"transformers": transformers.__version__, "results": {}}
for family, job_f in job["families"].items():
    tok = AutoTokenizer.from_pretrained(job_f["tokenizer_dir"])
    proc = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2), tokenizer=tok,
        video_processor=Qwen3VLVideoProcessor(size=job["video_size"], do_sample_frames=False),
        chat_template=tok.chat_template)
    out["results"][family] = [oracle.run_hf(proc, r) for r in job_f["requests"]]
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def replace_wrapper_runs():
    from old_transformers import OLD_VERSION, prepare_old_transformers

    tf_dir, deps_dir = prepare_old_transformers()
    job, reqs = {"video_size": dict(P.OFFICIAL_VIDEO_SIZE), "families": {}}, {}
    for family in QWEN:
        tok = _tokenizer(family)
        reqs[family] = oracle.requests(family, "replace_wrapper", COUNT, seed=0, chat_template=_render(tok))
        job["families"][family] = {"tokenizer_dir": str(build_tokenizer(P.tokenizer_vocab_for(family))),
                                   "requests": reqs[family]}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tf_dir), str(deps_dir)]), OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    r = subprocess.run([sys.executable, "-c", _SCRIPT], input=json.dumps(job), capture_output=True, text=True,
                       env=env, timeout=1800, cwd=str(tf_dir.parent))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, f"transformers {OLD_VERSION} subprocess failed:\n{r.stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["transformers"] == OLD_VERSION
    return reqs, out["results"], out["transformers"]


@pytest.mark.parametrize("family", QWEN)
def test_mm_handoff_answers_what_hf_answers_replace_wrapper(replace_wrapper_runs, family):
    reqs, results, version = replace_wrapper_runs
    _judge(family, "replace_wrapper", _tokenizer(family), reqs[family], results[family], version)


# --- the classes the oracle found, as named properties -----------------------------------------------------------

TEXT = st.lists(st.sampled_from(oracle.TEXT_PIECES), max_size=4).map("".join)


@settings(max_examples=150, deadline=None)
@given(family=st.sampled_from(["qwen3_vl", "qwen3_5", "cosmos3_edge"]), before=TEXT, after=TEXT,
       trio=st.booleans(), frames=st.integers(2, 5))
def test_text_touching_the_first_timestamp_is_read_as_hf_reads_it(family, before, after, trio, frames):
    """HF tokenizes the expanded text whole, so spaces or punctuation before a video merge with its first
    ``<`` (``Ġ<``, ``:<``); the rebuild settles that boundary, derive reads it, and the prompt check accepts it."""
    tok, proc = _tokenizer(family), _processor(family)
    pad = "<|vision_start|><|video_pad|><|vision_end|>" if trio else "<|video_pad|>"
    video = {"n": frames, "h": 32, "w": 32, "fps": {"type": "float", "value": 30.0},
             "indices": {"type": "list", "values": list(range(0, 3 * frames, 3))}, "total": 3 * frames}
    req = {"prompt": f"{before}{pad}{after}", "images": [], "videos": [video]}
    hf = oracle.run_hf(proc, req)
    if "refused" in hf:
        assert HF_REFUSES.search(hf["refused"])
        return
    adapter, bare = _adapter_pair(family, "replace_wrapper" if family == "cosmos3_edge" else "pad_only")
    assert oracle.compare(adapter, bare, tok, req, hf) == []


NUMBER_TYPES = st.sampled_from(["float", "int", "np.float16", "np.float32", "np.float64", "np.int64",
                                "torch.float32", "torch.float64", "torch.bfloat16"])
INDEX_TYPES = st.sampled_from(["list", "list.np.int64", "list.np.int32", "list.np.int16", "list.np.uint8",
                               "np.int64", "np.int32", "torch.int64"])


@settings(max_examples=600, deadline=None)
@given(fps_type=NUMBER_TYPES, fps=st.one_of(st.sampled_from(oracle.FPS_VALUES), st.floats(0.5, 240.0)),
       index_type=INDEX_TYPES, indices=st.lists(st.integers(0, 250), min_size=1, max_size=12),
       temporal=st.sampled_from([1, 2]))
def test_timestamps_are_computed_in_the_metadata_own_number_types(fps_type, fps, index_type, indices, temporal):
    """HF divides each frame index by fps in whatever types the metadata holds (``np.float32(30.0)`` with
    frames ``[4, 5, 6, 7]`` prints ``<0.2 seconds>``, float64 ``<0.1 seconds>``); so does the adapter."""
    processing = pytest.importorskip("transformers.models.qwen3_vl.processing_qwen3_vl")
    if fps_type in ("int", "np.int64"):
        fps = float(max(1, round(fps)))
    if fps_type == "torch.bfloat16":
        value = torch.tensor(fps, dtype=torch.bfloat16)
    else:
        value = oracle._typed(fps_type, fps)
    if index_type == "list.np.uint8":
        frames = [np.uint8(i) for i in indices]
    elif index_type == "list.np.int16":
        frames = [np.int16(i) for i in indices]
    else:
        frames = oracle._typed(index_type, indices)
    with np.errstate(all="ignore"):
        hf = processing.Qwen3VLProcessor._calculate_timestamps(None, copy.copy(frames), value, temporal)
        expected = [f"<{t:.1f} seconds>" for t in hf]
    adapter = _adapter_pair("cosmos3_edge", "replace_wrapper")[0] if temporal == 1 else \
        _adapter_pair("qwen3_vl", "pad_only")[1]
    try:
        with np.errstate(all="ignore"):
            ours = adapter.video_timestamps({"fps": value, "frames_indices": frames})
    except HandoffError:  # a value HF prints but no prompt can hold (inf): refused, never another text
        assert any(not (0 <= float(t) < 1e7) for t in hf)
        return
    assert [format_timestamp(t) for t in ours] == expected


# --- the corpus, as a peer reads it -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", corpus.names())
def test_mm_handoff_answers_the_corpus(name):
    """From each stored case's un-expanded ids, grids and metadata, the adapter rebuilds HF's ids, and from
    those derives HF's runs, timestamps and mRoPE ids and delta."""
    data = corpus.load(name)
    assert len(data["cases"]) == corpus.CASES_PER_SET
    family, convention = data["family"], data["convention"]
    adapter = _adapter_pair(family, convention)[0]
    for case in data["cases"]:
        want = case["expected"]
        grids = {"image_grid_thw": want["image_grid_thw"], "video_grid_thw": want["video_grid_thw"]}
        metas = [oracle.video_metadata(v) for v in case["videos"]]
        ids = adapter.rebuild_token_ids(case["raw_prompt_ids"], **grids, video_metadata=metas).tolist()
        assert ids == want["token_ids"]
        layout = adapter.derive_layout(ids, **grids)
        assert [{"modality": it.modality, "runs": [list(r) for r in zip(it.run_offsets.tolist(),
                                                                         it.run_lengths.tolist(), strict=True)],
                 "timestamps": [format_timestamp(t) for t in it.timestamps] if it.modality == "video" else None}
                for it in layout.items] == want["items"]
        pos, delta = adapter.mrope_positions(ids, **grids)
        assert pos.tolist() == want["mrope_position_ids"] and delta == want["mrope_position_delta"]


def test_the_corpus_covers_every_family_and_convention_and_a_merged_timestamp():
    sets = corpus.load()
    assert {(d["family"], d["convention"]) for d in sets.values()} == {*CURRENT, *((f, "replace_wrapper")
                                                                                    for f in QWEN)}
    merged = 0
    for d in sets.values():
        adapter = _adapter_pair(d["family"], d["convention"])[0]
        for case in d["cases"]:
            want = case["expected"]
            layout = adapter.derive_layout(want["token_ids"], image_grid_thw=want["image_grid_thw"],
                                           video_grid_thw=want["video_grid_thw"])
            merged += any(int(layout.token_ids[it.span_array[0, 0]]) in adapter.spec.timestamps.open_merged
                          for it in layout.items if it.modality == "video")
    assert merged >= 5  # the text-boundary class is in the data a peer tests against


def test_the_corpus_round_trips_through_the_export(tmp_path):
    from mm_handoff.cli import main

    assert main(["corpus", "--out", str(tmp_path)]) == 0
    index = json.loads((tmp_path / "index.json").read_text())
    assert [s["file"] for s in index["sets"]] == [f"{n}.json" for n in corpus.names()]
    for n in corpus.names():
        assert json.loads((tmp_path / f"{n}.json").read_text()) == corpus.load(n)
    assert "raw_prompt_ids" in (tmp_path / "README.md").read_text()


@settings(max_examples=200, deadline=None)
@given(family=st.sampled_from(QWEN), forms=st.lists(st.booleans(), min_size=1, max_size=4), text=TEXT)
def test_videos_transformers_59_fills_out_of_order_are_refused(family, forms, text):
    """transformers <= 5.9 gives each video the first trio left and a bare pad only when no trio is: a trio
    after a bare ``<|video_pad|>`` gets an earlier video, so its ids hold the videos out of order. The rebuild
    refuses that prompt by name; every other order is rebuilt."""
    adapter = _adapter_pair(family, "replace_wrapper")[0]
    tok = _tokenizer(family)
    prompt = "".join(("<|vision_start|><|video_pad|><|vision_end|>" if trio else "<|video_pad|>") + "\n" + text
                     for trio in forms)
    raw = tok(prompt, add_special_tokens=False)["input_ids"]
    meta = [{"fps": 30.0, "frames_indices": [0, 3, 6, 9]}] * len(forms)
    grids = [[2, 2, 2]] * len(forms)
    disorder = any(trio for trio in forms[forms.index(False):]) if False in forms else False
    assert oracle.out_of_order(adapter, prompt) == disorder
    if disorder:
        with pytest.raises(HandoffError, match="after a bare"):
            adapter.rebuild_token_ids(raw, video_grid_thw=grids, video_metadata=meta)
    else:
        adapter.rebuild_token_ids(raw, video_grid_thw=grids, video_metadata=meta)


@pytest.mark.parametrize("family", ["qwen3_vl", "qwen3_5"])
def test_text_ids_that_end_inside_a_character_are_refused(family):
    """Ids before a video whose bytes no character completes (a lone 0xE4) are no text HF's tokenizer can give:
    a typed error, not a '<' assumed to stand alone."""
    adapter = _adapter_pair(family, "pad_only")[0]
    tok = _tokenizer(family)
    lone = tok.convert_tokens_to_ids("ä")  # the byte 0xE4 in the byte-level alphabet: half of a character
    for text in ([lone], tok.encode("look ", add_special_tokens=False) + [lone]):
        with pytest.raises(HandoffError, match="whole characters"):
            adapter.settle_first_timestamp(np.asarray(text))
