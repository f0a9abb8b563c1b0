"""The oracle's cases as data: requests and what HF's processors answer on each, per family and convention.

Other engines rebuild the Qwen3-VL layout on their own (SGLang's EPD receiver; NVIDIA Dynamo's KV router, in
Rust); this is a language-neutral set they can check themselves against. One JSON file per family and
convention (``<family>.<convention>.json``) holds a few requests drawn by :mod:`mm_handoff.hf.oracle` (text of
every kind touching the placeholders, bare placeholders, trios and chat-template messages, video metadata in
Python, NumPy and torch types) and, for each, HF's answer:

- ``token_ids``: the processor's expanded ids; ``raw_prompt_ids``: the prompt's ids before expansion (what a
  prefill side that rebuilds the layout starts from);
- ``image_grid_thw`` / ``video_grid_thw``: the processor's grids;
- ``items``: per image or video in prompt order, its modality, its pad runs ``[offset, length]`` and, for a
  video, the ``<t seconds>`` text HF printed before each group (``Qwen3VLProcessor._calculate_timestamps`` on
  the metadata as given);
- ``mrope_position_ids`` (3 rows) and ``mrope_position_delta``: ``Qwen3VLModel.get_rope_index``.

The files ship with the package; ``mm-handoff corpus --out DIR`` writes them out with an index and a README.
``tests/hf/test_oracle.py`` regenerates every case from the processors (``MM_HANDOFF_WRITE_CORPUS=1`` writes
them) and checks that the stored ones are still what HF answers and what mm-handoff answers.
Reading needs only the standard library.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

#: bump when a field's meaning changes
CORPUS_VERSION = 1
FORMAT = "mm-handoff/qwen-layout-corpus"
#: cases kept per family and convention (the first answered requests of the oracle's seed-0 draw, short ones)
CASES_PER_SET = 8
MAX_CASE_IDS = 320

_README = """# mm-handoff corpus: the Qwen3-VL-family multimodal prompt layout, as HF's processors build it

Version {version}. One JSON file per family and convention; `index.json` lists them. Each file:

    {{"format": "{format}", "version": {version}, "family": ..., "convention": ..., "transformers": ...,
     "cases": [{{"prompt": str, "raw_prompt_ids": [int], "images": [...], "videos": [...], "expected": {{...}}}}]}}

- `convention`: `pad_only` (transformers >= 5.10.1: only `<|video_pad|>` is replaced, the template's
  `<|vision_start|>`/`<|vision_end|>` stay) or `replace_wrapper` (transformers <= 5.9 and Cosmos3-Edge: the whole
  trio, or a bare `<|video_pad|>`, is replaced).
- `videos[j]`: `n` frames of `h` x `w` pixels; `fps` and `indices` (the sampled frame indices) carry the type the
  user passed by name (`float`, `np.float32`, `torch.float32`, ...; `list`, `np.int64` array, ...): HF computes
  `idx / fps` in those types, and the printed timestamps depend on it. `total` is `total_num_frames`.
- `expected.token_ids`: HF's expanded ids. The text right before a video touches its first `<t seconds>` and
  HF tokenizes the whole string, so `" <"` is one token (`Ġ<`) there: a rebuild must reproduce that.
- `expected.items[k]`: `modality`, `runs` (`[offset, length]` of each pad run), `timestamps` (the text HF printed
  before each group of a video, `null` for an image).
- `expected.mrope_position_ids`: 3 rows (t, h, w) of HF's `get_rope_index`; `expected.mrope_position_delta`.

A peer checks itself by building, from `raw_prompt_ids`, the grids and the video metadata, the same
`token_ids`, and from those the same runs, timestamps and mRoPE ids and delta.
"""


def _root():
    return resources.files("mm_handoff.hf").joinpath("corpus_data")


def names() -> list:
    """The stored sets, as ``<family>.<convention>`` names."""
    return sorted(p.name[:-len(".json")] for p in _root().iterdir() if p.name.endswith(".json"))


def load(name: str | None = None):
    """One stored set (a dict), or every set by name when ``name`` is None."""
    if name is None:
        return {n: load(n) for n in names()}
    data = json.loads(_root().joinpath(f"{name}.json").read_text(encoding="utf-8"))
    if data.get("format") != FORMAT or data.get("version") != CORPUS_VERSION:
        raise ValueError(f"corpus set {name}: not version {CORPUS_VERSION} of {FORMAT}")
    return data


def make_set(family: str, convention: str, transformers_version: str, cases: list) -> dict:
    return {"format": FORMAT, "version": CORPUS_VERSION, "family": family, "convention": convention,
            "transformers": transformers_version, "cases": cases}


def dumps(data: dict) -> str:
    """The stored text of a set: one case a line, so a change reads as a diff of cases."""
    head = {k: v for k, v in data.items() if k != "cases"}
    lines = [json.dumps(c, separators=(",", ":"), ensure_ascii=False) for c in data["cases"]]
    return json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n"


def export(out: str | Path) -> list:
    """Write every set, ``index.json`` and ``README.md`` into ``out`` (created); the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    sets = load()
    for name, data in sets.items():
        path = out / f"{name}.json"
        path.write_text(dumps(data), encoding="utf-8")
        written.append(path)
    index = {"format": FORMAT, "version": CORPUS_VERSION,
             "sets": [{"file": f"{n}.json", "family": d["family"], "convention": d["convention"],
                       "transformers": d["transformers"], "cases": len(d["cases"])} for n, d in sets.items()]}
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    (out / "README.md").write_text(_README.format(version=CORPUS_VERSION, format=FORMAT), encoding="utf-8")
    return [*written, out / "index.json", out / "README.md"]


def case(request: dict, raw_prompt_ids: list, hf: dict, layout, printed: list) -> dict:
    """One stored case: the request, its un-expanded ids, and HF's answer (``hf`` from
    :func:`mm_handoff.hf.oracle.run_hf`; ``layout`` its derived layout, for the runs; ``printed``: per video
    the texts HF printed)."""
    videos = iter(printed)
    items = [{"modality": it.modality, "runs": [[int(o), int(n)] for o, n in zip(
        it.run_offsets.tolist(), it.run_lengths.tolist(), strict=True)],
        "timestamps": next(videos) if it.modality == "video" else None} for it in layout.items]
    return {"prompt": request["prompt"], "raw_prompt_ids": list(raw_prompt_ids), "images": request["images"],
            "videos": request["videos"],
            "expected": {"token_ids": hf["input_ids"], "image_grid_thw": hf["image_grid_thw"],
                         "video_grid_thw": hf["video_grid_thw"], "items": items,
                         "mrope_position_ids": hf["mrope"], "mrope_position_delta": hf["delta"]}}
