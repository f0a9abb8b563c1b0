"""Another request's layout, carried with this one, under every policy of the vLLM and SGLang glue.

Request A carries request B's layout: the same images and videos with other text, or (SGLang, whose hook
holds the request's own timestamps) the same clip at another frame rate. A layout that is not the
request's own is not a mismatch to repair: under ``raise``, ``rebuild`` and ``fallback`` alike the hook
refuses it with a typed error (a ``rebuild`` never answers A with B's ids; ``fallback`` never passes it on),
while A's own layout is still accepted, rebuilt from and passed through as before. Without either engine:
the hook functions are called as the engines call them, with processors shaped like theirs (SGLang's output
types stood in by a module of the same names). The TensorRT-LLM glue's own test is
``tests/trtllm/test_foreign_layout.py``.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from adversary import answer
from handoff_strategies import TEXT_IDS, prompts
from hypothesis import given, settings
from hypothesis import strategies as st

from mm_handoff.errors import HandoffError
from mm_handoff.glue.policy import Policy

POLICIES = tuple(Policy)
WIDTH = 4


# -------------------------------------------------------------------------------------- requests
@st.composite
def two_requests(draw, *, other_fps: bool = False):
    """``(adapter, A's raw prompt, image grids, video grids, A's metadata, A's ids, B's ids, how B differs)``:
    B is A's images and videos with other text (or, ``other_fps``, A's text with its videos at another frame
    rate or frames, printed differently)."""
    adapter, raw, images, videos, metas, expanded = draw(prompts("qwen3_vl", convention="pad_only", max_items=2))
    spec = adapter.spec
    if other_fps:
        if not videos:
            videos = [(2, 4, 4)]
            raw = raw + [spec.vision_start, spec.video_pad, spec.vision_end]
            metas = [{"fps": 2.0, "frames_indices": [0, 1, 2, 3], "total_num_frames": 4}]
            expanded = adapter.rebuild_token_ids(raw, image_grid_thw=images, video_grid_thw=videos,
                                                 video_metadata=metas)
        fps = draw(st.sampled_from([1.0, 3.0, 7.5, 13.0]))
        others = [{**m, "fps": fps * m["fps"]} for m in metas]
        other = adapter.rebuild_token_ids(raw, image_grid_thw=images, video_grid_thw=videos, video_metadata=others)
        if other.shape == expanded.shape and np.array_equal(other, expanded):  # a frame rate printing the same
            others = [{**m, "frames_indices": [f + 48 for f in m["frames_indices"]]} for m in metas]
            other = adapter.rebuild_token_ids(raw, image_grid_thw=images, video_grid_thw=videos,
                                              video_metadata=others)
        return adapter, raw, images, videos, metas, expanded, other, "fps"
    text = [i for i, t in enumerate(raw) if t not in (spec.vision_start, spec.vision_end, spec.image_pad,
                                                      spec.video_pad)]
    at = draw(st.sampled_from(text))
    new = draw(TEXT_IDS.filter(lambda t: t != raw[at]))
    edit = draw(st.sampled_from(["replace", "insert", "delete"] if len(text) > 1 else ["replace", "insert"]))
    other_raw = list(raw)
    if edit == "replace":
        other_raw[at] = new
    elif edit == "insert":
        other_raw.insert(at, new)
    else:
        del other_raw[at]
    other = adapter.rebuild_token_ids(other_raw, image_grid_thw=images, video_grid_thw=videos, video_metadata=metas)
    return adapter, raw, images, videos, metas, expanded, other, "text"


def _layout(adapter, ids, images, videos):
    return adapter.derive_layout(ids, image_grid_thw=images or None, video_grid_thw=videos or None, mrope=False)


def _outcome(call):
    """``(result, error)`` within the bounds every answer is held to; an error prints within 1,000 chars."""
    result, error = answer(call)
    if error is not None:
        assert error.field and len(str(error)) <= 1000
    return result, error


# ------------------------------------------------------------------------------------------ vLLM
@dataclasses.dataclass
class _Inputs:
    prompt: list
    hf_processor_mm_kwargs: dict


class _VllmProcessor:
    """What the wrapper reads of vLLM's ``Qwen3VLMultiModalProcessor``."""

    def __init__(self):
        self.info = types.SimpleNamespace(get_hf_config=lambda: "qwen3_vl", get_tokenizer=lambda: None,
                                          get_hf_processor=lambda: None)

    @classmethod
    def _expands_only_video_token(cls, hf_processor):
        return True


def _vllm_apply(raw, expanded, carried, images, videos, policy):
    """vLLM's ``apply`` for request A (its own raw prompt, expanded as vLLM expands it), with ``carried``."""
    from mm_handoff.vllm._hooks import HOOKS, apply_wrapper

    result = {"mm_placeholders": {"image": [object()] * len(images), "video": [object()] * len(videos)},
              "prompt_token_ids": expanded.tolist()}
    inputs = _Inputs(list(raw), {"mm_handoff_layout": carried})
    out = _outcome(lambda: apply_wrapper(lambda *a, **k: result, _VllmProcessor(), (inputs,), {},
                                         point=HOOKS[0].point("vllm", policy)))
    return result, out


@settings(max_examples=150)
@given(two_requests(), st.sampled_from(POLICIES))
def test_vllm_refuses_another_requests_layout_under_every_policy(case, policy):
    adapter, raw, images, videos, metas, expanded, other, _ = case
    theirs = _layout(adapter, other, images, videos).to_wire()
    result, (got, error) = _vllm_apply(raw, expanded, theirs, images, videos, policy)
    assert error is not None, f"policy={policy.value}: another request's layout passed"
    assert got is None
    mine = _layout(adapter, expanded, images, videos).to_wire()  # A's own: accepted under every policy
    result, (got, error) = _vllm_apply(raw, expanded, mine, images, videos, policy)
    assert error is None and got is result


# ---------------------------------------------------------------------------------------- SGLang
class _Modality:
    IMAGE, VIDEO = "IMAGE", "VIDEO"


class _Item:
    def __init__(self, modality, offsets, precomputed_embeddings=None):
        self.modality, self.offsets, self.precomputed_embeddings = modality, offsets, precomputed_embeddings


class _Output:
    def __init__(self, **fields):
        self.__dict__.update(fields)


@contextmanager
def _sglang_types():
    """SGLang's output types (``sglang.srt.managers.schedule_batch``), stood in by plain classes."""
    batch = types.ModuleType("sglang.srt.managers.schedule_batch")
    batch.Modality, batch.MultimodalDataItem, batch.MultimodalProcessorOutput = _Modality, _Item, _Output
    names = {"sglang": types.ModuleType("sglang"), "sglang.srt": types.ModuleType("sglang.srt"),
             "sglang.srt.managers": types.ModuleType("sglang.srt.managers"),
             "sglang.srt.managers.schedule_batch": batch}
    with mock.patch.dict(sys.modules, names):
        yield


class _SglangProcessor:
    """What the wrapper reads of SGLang's ``QwenVLImageProcessor``."""

    model_type, spatial_merge_size, hf_config, _tokenizer = "qwen3_vl", 2, "qwen3_vl", None
    IM_START_TOKEN_ID, IM_END_TOKEN_ID = 151652, 151653
    mm_tokens = types.SimpleNamespace(image_token_id=151655, video_token_id=151656, audio_token_id=None)


def _sglang_output(adapter, ids, images, videos):
    """SGLang's ``MultimodalProcessorOutput`` for its ids: one item per pad run, its mRoPE ids (zeros where
    they cannot be computed for the ids: the one-run fallback's, which SGLang computes its own way)."""
    layout = _layout(adapter, ids, images, videos)
    items = [_Item(item.modality, [(int(s), int(s + n - 1))]) for item in layout.items
             for s, n in zip(item.run_offsets, item.run_lengths, strict=True)]
    try:
        positions, delta = adapter.mrope_positions(ids, image_grid_thw=images or None, video_grid_thw=videos or None)
    except HandoffError:
        positions, delta = np.zeros((3, len(ids)), np.int64), 0
    return _Output(input_ids=[int(t) for t in ids], mm_items=items, mrope_positions=np.asarray(positions),
                   mrope_position_delta=int(delta))


def _sglang_call(adapter, raw, images, videos, metas, sglang_ids, carried, policy, *, stamped: bool):
    """SGLang's ``get_validated_mm_data`` for request A (its own prompt, grids and, ``stamped``, timestamps;
    SGLang's output built from ``sglang_ids``), with ``carried``: ``(SGLang's output, (result, error))``."""
    import torch

    from mm_handoff.sglang._hooks import HOOKS, validated_mm_data_wrapper

    output = _sglang_output(adapter, sglang_ids, images, videos)
    mine = _layout(adapter, adapter.rebuild_token_ids(raw, image_grid_thw=images, video_grid_thw=videos,
                                                      video_metadata=metas), images, videos)
    embeddings = {}
    for modality in ("image", "video"):
        rows = sum(i.embedding_length for i in mine.items if i.modality == modality)
        if rows:
            embeddings[modality] = torch.zeros(rows, WIDTH)
    kwargs = {"img_grid_thw": torch.tensor(images) if images else None,
              "video_grid_thw": torch.tensor(videos) if videos else None, "mm_handoff_layout": carried}
    if stamped and videos:
        kwargs["video_timestamps"] = [adapter.video_timestamps(m, j) for j, m in enumerate(metas)]
    with _sglang_types():
        out = _outcome(lambda: validated_mm_data_wrapper(lambda *a, **k: output, _SglangProcessor(),
                                                         (list(raw), embeddings), kwargs,
                                                         point=HOOKS[0].point("sglang", policy)))
    return output, out


def _sglang_ids(adapter, raw, images, videos, expanded, stamped):
    """What SGLang builds for A: its exact ids with the encoder's timestamps, one pad run per video without."""
    if stamped or not videos:
        return expanded
    return adapter.stock_token_ids(raw, image_grid_thw=images, video_grid_thw=videos)


@settings(max_examples=150)
@given(st.one_of(two_requests(), two_requests(other_fps=True)), st.sampled_from(POLICIES), st.booleans())
def test_sglang_refuses_another_requests_layout_under_every_policy(case, policy, stamped):
    """B's layout against A's request: refused whatever SGLang built (its exact ids, or the one-run fallback
    without timestamps); with B's text, or with B's frame rate where the request holds its own timestamps."""
    adapter, raw, images, videos, metas, expanded, other, differs = case
    stamped = stamped or differs == "fps"  # the same text at another frame rate: told by the timestamps only
    theirs = _layout(adapter, other, images, videos).to_wire()
    sglang_ids = _sglang_ids(adapter, raw, images, videos, expanded, stamped)
    output, (got, error) = _sglang_call(adapter, raw, images, videos, metas, sglang_ids, theirs, policy,
                                        stamped=stamped)
    assert error is not None, f"policy={policy.value}: answered with {'SGLang' if got is output else 'B'}'s ids"
    assert got is None


@settings(max_examples=100)
@given(two_requests(), st.sampled_from(POLICIES))
def test_sglang_still_answers_a_request_from_its_own_layout(case, policy):
    """A's own layout, SGLang's one-run fallback (no timestamps): raise refuses, rebuild answers with A's exact
    ids, fallback keeps SGLang's; with SGLang's exact ids every policy passes SGLang's result."""
    adapter, raw, images, videos, metas, expanded, _, _ = case
    mine = _layout(adapter, expanded, images, videos).to_wire()
    output, (got, error) = _sglang_call(adapter, raw, images, videos, metas, expanded, mine, policy, stamped=True)
    assert error is None and got is output
    if not videos:
        return
    stock = _sglang_ids(adapter, raw, images, videos, expanded, stamped=False)
    output, (got, error) = _sglang_call(adapter, raw, images, videos, metas, stock, mine, policy, stamped=False)
    if policy is Policy.RAISE:
        assert isinstance(error, HandoffError)
    elif policy is Policy.FALLBACK:
        assert error is None and got is output
    else:
        assert error is None and got is not output and got.input_ids == expanded.tolist()


def test_sglang_rebuild_needs_the_requests_own_prompt():
    """Without the request's prompt (a text prompt and no tokenizer to read it with) the owner of a carried
    layout is unknown: ``rebuild`` does not answer from it."""
    import torch

    from mm_handoff import get_adapter
    from mm_handoff.sglang._hooks import HOOKS, validated_mm_data_wrapper

    adapter = get_adapter("qwen3_vl", convention="pad_only")
    s = adapter.spec
    raw = [100, s.vision_start, s.video_pad, s.vision_end, 101]
    metas, videos = [{"fps": 2.0, "frames_indices": [0, 1, 2, 3]}], [(2, 4, 4)]
    expanded = adapter.rebuild_token_ids(raw, video_grid_thw=videos, video_metadata=metas)
    layout = _layout(adapter, expanded, [], videos)
    output = _sglang_output(adapter, adapter.stock_token_ids(raw, video_grid_thw=videos), [], videos)
    kwargs = {"img_grid_thw": None, "video_grid_thw": torch.tensor(videos), "mm_handoff_layout": layout.to_wire()}
    with _sglang_types(), pytest.raises(HandoffError):
        validated_mm_data_wrapper(lambda *a, **k: output, _SglangProcessor(),
                                  ("a text prompt", {"video": torch.zeros(layout.num_pads, WIDTH)}), kwargs,
                                  point=HOOKS[0].point("sglang", Policy.REBUILD))
