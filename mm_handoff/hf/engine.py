"""The Hugging Face reference E/PD engine: encoder -> (wire form + tensors) -> prefill/decode, on CPU.

This is the parity oracle for the handoff (hf-reference.md §10). One request runs through:

* :func:`encode` (the E side): the real processor expands the prompt, the vision tower
  (``model.model.get_image_features`` / ``get_video_features(..., return_dict=True)``) gives the visual
  rows and, for deepstack families, the per-level deepstack rows. Rows of mixed images and videos are put
  in **sequence order** (the order HF scatters them into one joint tensor, trap 17). The adapter derives the
  :class:`~mm_handoff.layout.HandoffLayout` (with mRoPE ids) from the expanded ids.
* :func:`handoff`: the layout's wire form, JSON round-tripped (proof it survives ``trtllm-serve``'s JSON),
  plus the tensors.
* :func:`prefill_decode` (the PD side) in one of three modes:

  ``"epd"``
      decode the wire form, recompute mRoPE with the adapter, run :func:`mm_handoff.validate`, place the rows
      at the layout's pad runs, prefill with 4-row position ids (§8c), greedy decode with the KV cache (and
      the recurrent state for Qwen3.5's linear-attention layers) at positions ``p + delta``.
  ``"epd-rebuild"``
      no wire layout: rebuild the aggregated ids from the raw prompt + grids + video metadata with
      ``adapter.rebuild_token_ids`` (the fallback path), then as ``"epd"``.
  ``"epd-stock"``
      TensorRT-LLM's current prefill: ``adapter.stock_token_ids`` (one pad run per item, no timestamps, no
      per-group markers), the encoder's mRoPE ids sliced to the shorter prompt and the encoder's delta. With
      ``validate=True`` the validator runs first and raises :class:`~mm_handoff.errors.MropeLengthError`;
      with ``validate=False`` it runs and gives the (wrong) outputs.

* :func:`aggregated`: the plain HF model on the processor's outputs (``model.model(**inputs)`` for the
  hidden states, ``model.generate(do_sample=False)`` for the greedy tokens), the reference.
* :func:`run_three_modes`: aggregated, epd (+ epd-rebuild), epd-stock with the validator on and off, with a
  structured report; the demo's entry point.

``model.model.rope_deltas`` is cached on the module by HF and reused across calls (trap 18); every entry
point here resets it to ``None`` before and after. Logits are computed for the last position only (trap 1).

torch and transformers are imported at module level here; ``import mm_handoff`` never imports this module.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

from ..errors import EmbeddingCountError, HandoffError, MropeLengthError, SkewError
from ..layout import HandoffLayout
from ..checks import check_skew
from ..checks import validate as _validate
from . import processors as _procs
from .families import normalize_family

__all__ = [
    "MODES",
    "EncoderOutput",
    "PDResult",
    "encode",
    "handoff",
    "prefill_decode",
    "pd_from_encoder",
    "aggregated",
    "run_three_modes",
    "load_family",
    "default_request",
    "first_difference",
    "DEFAULT_MAX_NEW_TOKENS",
]

MODES = ("epd", "epd-rebuild", "epd-stock")
DEFAULT_MAX_NEW_TOKENS = 8

#: processor outputs that the HF model forward does not take
_NON_MODEL_KEYS = ("video_metadata",)


# ------------------------------------------------------------------------------------------ results
@dataclass
class EncoderOutput:
    """What the E side produced for one request (everything the PD side may be handed)."""

    request_id: Any
    family: str
    #: the rendered (un-expanded) prompt text
    prompt: str
    #: the un-expanded prompt's ids, int32 (what a PD side would tokenize from the text)
    raw_prompt_ids: np.ndarray
    #: the processor's expanded ids, int32 (1-D)
    input_ids: np.ndarray
    #: 0 text / 1 image / 2 video per token, as the processor returned them (1-D int64)
    mm_token_type_ids: Optional[np.ndarray]
    #: grids as lists of [t, h, w] (None when the modality is absent)
    image_grid_thw: Optional[list]
    video_grid_thw: Optional[list]
    #: the processor's returned video metadata (return_metadata=True), deep-copied; None without videos
    video_metadata: Optional[list]
    #: (N, D) visual rows in prompt/sequence order across images and videos
    embeddings: torch.Tensor
    #: per deepstack level, an (N, D) tensor in the same order; empty for families without deepstack
    deepstack: list
    #: the adapter's layout of ``input_ids`` (with mRoPE ids and delta)
    layout: HandoffLayout
    #: rows per item in prompt order (= layout.multimodal_embedding_lengths)
    item_rows: list
    timings: dict = field(default_factory=dict)

    @property
    def mrope_position_ids(self) -> np.ndarray:
        return self.layout.mrope_position_ids

    @property
    def mrope_position_delta(self) -> int:
        return self.layout.mrope_position_delta


@dataclass
class PDResult:
    """One prefill + greedy decode (any mode, or the aggregated reference)."""

    mode: str
    request_id: Any
    #: the prompt the prefill ran on, int32 (1-D)
    prompt_ids: np.ndarray
    #: language-model last_hidden_state for every prompt position, (L, D) fp32
    hidden_states: torch.Tensor
    #: logits of the last prompt position, (V,)
    last_logits: torch.Tensor
    #: greedy tokens (max_new_tokens of them)
    tokens: list
    #: mRoPE ids (3, L) int64 used for the prefill, and the decode delta
    mrope_position_ids: Optional[np.ndarray] = None
    mrope_position_delta: Optional[int] = None
    #: the layout the prefill used (None for aggregated)
    layout: Optional[HandoffLayout] = None
    #: True when mm_handoff.validate ran and passed; False when it was skipped
    validated: bool = False
    timings: dict = field(default_factory=dict)

    @property
    def prompt_len(self) -> int:
        return int(self.prompt_ids.shape[0])


# ------------------------------------------------------------------------------------------ helpers
def _render(processor, text, messages) -> str:
    if (text is None) == (messages is None):
        raise ValueError("pass exactly one of text= (a rendered prompt) or messages= (chat messages)")
    if text is not None:
        return text
    prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return prompt[0] if isinstance(prompt, list) else prompt


def _grid_list(value) -> Optional[list]:
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    out = [[int(v) for v in g] for g in value]
    return out or None


def _ids_np(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim == 2:
        if arr.shape[0] != 1:
            raise ValueError(f"one request at a time (batch {arr.shape[0]})")
        arr = arr[0]
    return arr.astype(np.int32)


def _reset_rope_deltas(model) -> None:
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "rope_deltas"):
        inner.rope_deltas = None


def _model_inputs(inputs) -> dict:
    return {k: v for k, v in dict(inputs).items() if k not in _NON_MODEL_KEYS}


def _cat(parts) -> Optional[torch.Tensor]:
    if parts is None:
        return None
    parts = list(parts)
    return torch.cat(parts, dim=0) if parts else None


def _visual_rows(model, inputs, spec) -> tuple:
    """Run the vision tower and return (rows, deepstack levels) in sequence order."""
    inner = model.model
    ids = inputs["input_ids"][0]
    img_mask = ids == spec.image_pad
    vid_mask = ids == spec.video_pad
    img = vid = None
    if inputs.get("pixel_values") is not None:
        img = inner.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"], return_dict=True)
    if inputs.get("pixel_values_videos") is not None:
        vid = inner.get_video_features(inputs["pixel_values_videos"], inputs["video_grid_thw"], return_dict=True)

    visual = img_mask | vid_mask
    n = int(visual.sum())
    img_rows = _cat(img.pooler_output) if img is not None else None
    vid_rows = _cat(vid.pooler_output) if vid is not None else None
    for name, rows, mask in (("image", img_rows, img_mask), ("video", vid_rows, vid_mask)):
        have = 0 if rows is None else int(rows.shape[0])
        if have != int(mask.sum()):
            raise EmbeddingCountError(f"{name} rows", f"{int(mask.sum())} (pads in the prompt)", have)
    ref = img_rows if img_rows is not None else vid_rows
    if ref is None:
        return torch.zeros(0, 0), []
    img_joint = img_mask[visual]
    vid_joint = vid_mask[visual]

    def joint(a, b):
        out = ref.new_empty(n, ref.shape[-1])
        if a is not None:
            out[img_joint] = a
        if b is not None:
            out[vid_joint] = b
        return out

    rows = joint(img_rows, vid_rows)
    img_ds = getattr(img, "deepstack_features", None) if img is not None else None
    vid_ds = getattr(vid, "deepstack_features", None) if vid is not None else None
    levels = len(img_ds or vid_ds or [])
    deepstack = []
    for k in range(levels):
        deepstack.append(joint(_cat(img_ds[k]) if img_ds else None, _cat(vid_ds[k]) if vid_ds else None))
    return rows, deepstack


def first_difference(a, b) -> Optional[int]:
    """First index where two id sequences differ (the shorter length if one is a prefix); None if equal."""
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1)
    n = min(a.shape[0], b.shape[0])
    diff = np.flatnonzero(a[:n] != b[:n])
    if diff.size:
        return int(diff[0])
    return None if a.shape[0] == b.shape[0] else n


# ------------------------------------------------------------------------------------------ E side
def encode(model, processor, adapter, *, text: Optional[str] = None, messages=None, images=None, videos=None,
           video_metadata=None, request_id=None, **proc_kw) -> EncoderOutput:
    """The E side: processor + vision tower + layout (see the module docstring).

    ``proc_kw`` go to the processor call (e.g. ``do_sample_frames=True, fps=2``); ``return_metadata=True`` is
    added when videos are given, so the returned (possibly sampled) ``frames_indices`` travel with the request.
    """
    timings = {}
    t0 = time.perf_counter()
    prompt = _render(processor, text, messages)
    kw = dict(proc_kw)
    if videos is not None:
        kw.setdefault("return_metadata", True)
    inputs = _procs.run_processor(processor, prompt, images=images, videos=videos, video_metadata=video_metadata,
                                  **kw)
    timings["processor_s"] = time.perf_counter() - t0
    raw = processor.tokenizer(prompt)["input_ids"]
    input_ids = _ids_np(inputs["input_ids"])
    image_grid = _grid_list(inputs.get("image_grid_thw"))
    video_grid = _grid_list(inputs.get("video_grid_thw"))
    metas = inputs.get("video_metadata")
    metas = copy.deepcopy(list(metas)) if metas is not None and videos is not None else None

    t0 = time.perf_counter()
    _reset_rope_deltas(model)
    with torch.no_grad():
        rows, deepstack = _visual_rows(model, inputs, adapter.spec)
    timings["vision_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    layout = adapter.derive_layout(input_ids, image_grid_thw=image_grid, video_grid_thw=video_grid, mrope=True,
                                   request_id=request_id)
    timings["layout_s"] = time.perf_counter() - t0
    if int(rows.shape[0]) != layout.num_pads:
        raise EmbeddingCountError("embedding rows", f"{layout.num_pads} (pads in the layout)", int(rows.shape[0]),
                                  request_id=request_id)
    mm = inputs.get("mm_token_type_ids")
    return EncoderOutput(
        request_id=request_id,
        family=adapter.family,
        prompt=prompt,
        raw_prompt_ids=np.asarray(raw, dtype=np.int32),
        input_ids=input_ids,
        mm_token_type_ids=None if mm is None else _ids_np(mm).astype(np.int64),
        image_grid_thw=image_grid,
        video_grid_thw=video_grid,
        video_metadata=metas,
        embeddings=rows,
        deepstack=list(deepstack),
        layout=layout,
        item_rows=list(layout.multimodal_embedding_lengths),
        timings=timings,
    )


def handoff(enc_out: EncoderOutput) -> tuple:
    """``(wire_dict, tensors)``: the layout's wire form after a ``json.dumps``/``json.loads`` round trip, and
    ``{"embeddings": (N, D), "deepstack": [(N, D), ...]}``."""
    wire = json.loads(json.dumps(enc_out.layout.to_wire()))
    tensors = {"embeddings": enc_out.embeddings, "deepstack": list(enc_out.deepstack)}
    return wire, tensors


# ------------------------------------------------------------------------------------------ PD side
def _pad_mask_from_layout(layout: HandoffLayout) -> np.ndarray:
    mask = np.zeros(layout.prompt_len, dtype=bool)
    for run in layout.runs:
        mask[run.offset:run.end] = True
    return mask


def _prefill_decode_core(model, ids: np.ndarray, positions: np.ndarray, delta: int, pad_mask: np.ndarray,
                         embeddings: torch.Tensor, deepstack: Sequence, max_new_tokens: int, request_id) -> dict:
    """Embed, scatter rows at the pads, prefill with 4-row positions, greedy-decode with the cache."""
    inner = model.model
    lm = inner.language_model
    embed = inner.get_input_embeddings()
    n = int(ids.shape[0])
    if positions.shape != (3, n):
        raise MropeLengthError("mrope_position_ids.shape", [3, n], list(positions.shape), request_id=request_id)
    rows = int(pad_mask.sum())
    if rows != int(embeddings.shape[0]):
        raise EmbeddingCountError("embedding rows", f"{rows} (pads in the prompt)", int(embeddings.shape[0]),
                                  request_id=request_id)
    for k, level in enumerate(deepstack):
        if tuple(level.shape) != tuple(embeddings.shape):
            raise EmbeddingCountError(f"deepstack[{k}].shape", list(embeddings.shape), list(level.shape),
                                      request_id=request_id)
    timings = {}
    _reset_rope_deltas(model)
    t0 = time.perf_counter()
    with torch.no_grad():
        ids_t = torch.from_numpy(ids.astype(np.int64)).view(1, n)
        x = embed(ids_t)
        mask = torch.from_numpy(pad_mask).view(1, n)
        if rows:
            x = x.masked_scatter(mask.unsqueeze(-1).expand_as(x), embeddings.to(x.device, x.dtype))
        pos3 = torch.from_numpy(np.array(positions, dtype=np.int64)).view(3, 1, n)  # a writable copy
        pos4 = torch.cat([torch.arange(n, dtype=torch.int64).view(1, 1, n), pos3], dim=0)
        kw = {}
        if len(deepstack):
            kw["visual_pos_masks"] = mask
            kw["deepstack_visual_embeds"] = [d.to(x.device, x.dtype) for d in deepstack]
        out = lm(inputs_embeds=x, position_ids=pos4, use_cache=True, **kw)
        hidden = out.last_hidden_state[0]
        cache = out.past_key_values  # DynamicCache: KV for attention layers, conv/recurrent state for linear ones
        last_logits = model.lm_head(hidden[-1:])[0]
        timings["prefill_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tokens = []
        logits = last_logits
        for i in range(max_new_tokens):
            tok = int(torch.argmax(logits))
            tokens.append(tok)
            if i == max_new_tokens - 1:
                break
            p = n + i
            e = embed(torch.tensor([[tok]], dtype=torch.int64))
            pos = torch.tensor([p, p + delta, p + delta, p + delta], dtype=torch.int64).view(4, 1, 1)
            step = lm(inputs_embeds=e, position_ids=pos, past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            logits = model.lm_head(step.last_hidden_state[:, -1])[0]
        timings["decode_s"] = time.perf_counter() - t0
    _reset_rope_deltas(model)
    return {"hidden": hidden, "last_logits": last_logits, "tokens": tokens, "timings": timings, "cache": cache}


def _as_np_mrope(value) -> Optional[np.ndarray]:
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim == 3 and arr.shape[1] == 1:
        arr = arr[:, 0, :]
    return arr.astype(np.int64, copy=False)


def prefill_decode(model, adapter, *, mode: str, wire: Optional[dict] = None, embeddings: torch.Tensor,
                   deepstack: Sequence = (), raw_prompt_ids=None, image_grid_thw=None, video_grid_thw=None,
                   video_metadata=None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, validate: bool = True,
                   encoder_mrope=None, encoder_delta: Optional[int] = None, request_id=None) -> PDResult:
    """The PD side in one of :data:`MODES` (see the module docstring).

    * ``"epd"``: needs ``wire``; grids and metadata are taken from the layout.
    * ``"epd-rebuild"``: needs ``raw_prompt_ids``, the grids and ``video_metadata`` (the processor's returned
      metadata, so sampled ``frames_indices`` are the ones used).
    * ``"epd-stock"``: needs ``raw_prompt_ids``, the grids and ``encoder_mrope`` ((3, L) or (3, 1, L) ids of the
      encoder's prompt) plus ``encoder_delta``. ``validate=True`` raises ``MropeLengthError`` when the lengths
      differ (every video prompt); ``validate=False`` slices ``[:, :L_stock]`` and runs.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    deepstack = list(deepstack or [])
    levels = int(getattr(adapter, "deepstack_levels", 0) or 0)
    if len(deepstack) != levels:
        raise EmbeddingCountError("deepstack levels", adapter.deepstack_levels, len(deepstack),
                                  request_id=request_id)
    timings = {}
    t0 = time.perf_counter()
    validated = False
    if mode == "epd":
        if wire is None:
            raise ValueError("mode 'epd' needs the wire form (wire=)")
        layout = HandoffLayout.from_wire(wire, request_id=request_id)
        check_skew(layout, family=adapter.family, convention=adapter.convention,
                   tokenizer_digest=adapter.tokenizer_digest, request_id=request_id)
        image_grids = [list(i.grid_thw) for i in layout.items if i.modality == "image"] or None
        video_grids = [list(i.grid_thw) for i in layout.items if i.modality == "video"] or None
        positions, delta = adapter.mrope_positions(layout.token_ids, image_grid_thw=image_grids,
                                                   video_grid_thw=video_grids, request_id=request_id)
        if layout.mrope_position_delta is not None and int(layout.mrope_position_delta) != int(delta):
            raise MropeLengthError("mrope_position_delta", layout.mrope_position_delta, delta,
                                   request_id=request_id, hint="recomputed delta differs from the encoder's")
        if validate:
            _validate(layout, embedding_rows=int(embeddings.shape[0]), mrope_position_ids=positions,
                      request_id=request_id)
            validated = True
        ids = layout.token_ids
        pad_mask = _pad_mask_from_layout(layout)
    elif mode == "epd-rebuild":
        if raw_prompt_ids is None:
            raise ValueError("mode 'epd-rebuild' needs raw_prompt_ids")
        ids = adapter.rebuild_token_ids(raw_prompt_ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                                        video_metadata=video_metadata, request_id=request_id)
        layout = adapter.derive_layout(ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw, mrope=True,
                                       request_id=request_id)
        positions, delta = layout.mrope_position_ids, layout.mrope_position_delta
        if validate:
            _validate(layout, embedding_rows=int(embeddings.shape[0]), mrope_position_ids=positions,
                      request_id=request_id)
            validated = True
        pad_mask = _pad_mask_from_layout(layout)
    else:  # epd-stock
        if raw_prompt_ids is None or encoder_mrope is None or encoder_delta is None:
            raise ValueError("mode 'epd-stock' needs raw_prompt_ids, encoder_mrope and encoder_delta")
        ids = adapter.stock_token_ids(raw_prompt_ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw)
        layout = adapter.derive_layout(ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw, mrope=False,
                                       request_id=request_id)
        enc_mrope = _as_np_mrope(encoder_mrope)
        if validate:
            _validate(layout, mrope_position_ids=enc_mrope, embedding_rows=int(embeddings.shape[0]),
                      request_id=request_id)
            validated = True
        n = layout.prompt_len
        if enc_mrope.shape[-1] < n:
            raise MropeLengthError("mrope_position_ids.shape[-1]", f">= {n} to slice", int(enc_mrope.shape[-1]),
                                   request_id=request_id)
        positions = np.ascontiguousarray(enc_mrope[:, :n])  # the silent slice TensorRT-LLM does today
        delta = int(encoder_delta)
        pad_mask = _pad_mask_from_layout(layout)
    timings["layout_s"] = time.perf_counter() - t0
    core = _prefill_decode_core(model, np.asarray(ids), np.asarray(positions), int(delta), pad_mask, embeddings,
                                deepstack, max_new_tokens, request_id)
    timings.update(core["timings"])
    return PDResult(mode=mode, request_id=request_id, prompt_ids=np.array(ids, dtype=np.int32),
                    hidden_states=core["hidden"], last_logits=core["last_logits"], tokens=core["tokens"],
                    mrope_position_ids=np.asarray(positions), mrope_position_delta=int(delta), layout=layout,
                    validated=validated, timings=timings)


def pd_from_encoder(model, adapter, enc_out: EncoderOutput, *, mode: str, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                    validate: bool = True) -> PDResult:
    """Convenience: hand ``enc_out`` over (through :func:`handoff`) and run :func:`prefill_decode` in ``mode``."""
    wire, tensors = handoff(enc_out)
    return prefill_decode(
        model, adapter, mode=mode, wire=wire if mode == "epd" else None, embeddings=tensors["embeddings"],
        deepstack=tensors["deepstack"], raw_prompt_ids=enc_out.raw_prompt_ids, image_grid_thw=enc_out.image_grid_thw,
        video_grid_thw=enc_out.video_grid_thw, video_metadata=copy.deepcopy(enc_out.video_metadata),
        max_new_tokens=max_new_tokens, validate=validate,
        encoder_mrope=enc_out.mrope_position_ids if mode == "epd-stock" else None,
        encoder_delta=enc_out.mrope_position_delta if mode == "epd-stock" else None,
        request_id=enc_out.request_id)


# ------------------------------------------------------------------------------------------ aggregated
def aggregated(model, processor, *, text: Optional[str] = None, messages=None, images=None, videos=None,
               video_metadata=None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, inputs=None, request_id=None,
               **proc_kw) -> PDResult:
    """The aggregated reference: the plain HF model on the processor's outputs.

    Hidden states: ``model.model(**inputs).last_hidden_state``; logits: ``lm_head`` on the last position;
    tokens: ``model.generate(**inputs, do_sample=False)`` (an independent implementation of the decode loop).
    ``inputs`` (a processor ``BatchFeature``) skips the processor call.
    """
    timings = {}
    if inputs is None:
        prompt = _render(processor, text, messages)
        kw = dict(proc_kw)
        if videos is not None:
            kw.setdefault("return_metadata", True)
        t0 = time.perf_counter()
        inputs = _procs.run_processor(processor, prompt, images=images, videos=videos,
                                      video_metadata=video_metadata, **kw)
        timings["processor_s"] = time.perf_counter() - t0
    model_inputs = _model_inputs(inputs)
    _reset_rope_deltas(model)
    t0 = time.perf_counter()
    with torch.no_grad():
        hidden = model.model(**model_inputs).last_hidden_state[0]
        last_logits = model.lm_head(hidden[-1:])[0]
    timings["forward_s"] = time.perf_counter() - t0
    _reset_rope_deltas(model)
    t0 = time.perf_counter()
    tokens: list = []
    if max_new_tokens > 0:
        with torch.no_grad():
            seq = model.generate(**model_inputs, max_new_tokens=max_new_tokens, min_new_tokens=0, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
        tokens = seq[0, model_inputs["input_ids"].shape[1]:].tolist()
    timings["generate_s"] = time.perf_counter() - t0
    _reset_rope_deltas(model)
    ids = _ids_np(model_inputs["input_ids"])
    positions = delta = None
    mm = model_inputs.get("mm_token_type_ids")
    if mm is not None:
        with torch.no_grad():
            pos, d = model.model.get_rope_index(model_inputs["input_ids"], mm,
                                                image_grid_thw=model_inputs.get("image_grid_thw"),
                                                video_grid_thw=model_inputs.get("video_grid_thw"))
        positions, delta = pos[:, 0, :].numpy(), int(d.reshape(-1)[0])
    _reset_rope_deltas(model)
    return PDResult(mode="aggregated", request_id=request_id, prompt_ids=ids, hidden_states=hidden,
                    last_logits=last_logits, tokens=tokens, mrope_position_ids=positions,
                    mrope_position_delta=delta, layout=None, validated=False, timings=timings)


# ------------------------------------------------------------------------------------------ the demo driver
_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


def load_family(family: str, *, seed: int = 0, video_size: Optional[dict] = None) -> tuple:
    """``(tokenizer, processor, model, adapter)`` for ``family``, built once per process (cached).

    The tokenizer is the shared real one, the processor the real HF one (``build_processor``), the model the
    tiny random one (``build_tiny_model(family, seed)``), the adapter the registered family adapter built with
    the tokenizer and the model's config.
    """
    from ..adapters import FAMILIES
    from . import tiny
    from .tokenizers import load_tokenizer

    fam = normalize_family(family, FAMILIES)
    if fam == "cosmos3_edge":
        raise ValueError("the E/PD engine runs the Qwen-layout families; Cosmos3-Edge is covered at layout level")
    key = (fam, seed, None if video_size is None else tuple(sorted(video_size.items())))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
    tok = load_tokenizer(_procs.tokenizer_vocab_for(fam), shared=True)
    proc = _procs.build_processor(fam, tok, video_size=video_size)
    model = tiny.build_tiny_model(fam, seed)
    adapter = FAMILIES[fam](tokenizer=tok, config=model.config)
    value = (tok, proc, model, adapter)
    with _CACHE_LOCK:
        return _CACHE.setdefault(key, value)


def default_request(frames: int = 8, height: int = 64, width: int = 96, fps: float = 24.0, seed: int = 0) -> dict:
    """A small one-video request: ``{"messages", "videos", "video_metadata"}`` (frames at 64x96 by default)."""
    video, meta = _procs.synthetic_clip(frames, height, width, fps=fps, seed=seed)
    return {"messages": _procs.video_messages(), "videos": video, "video_metadata": meta}


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max()) if a.shape == b.shape else float("nan")


def _hidden_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.equal(a, b))


def _layout_summary(layout: HandoffLayout) -> dict:
    return {
        "length": layout.prompt_len,
        "runs": len(layout.runs),
        "run_lengths": layout.run_lengths,
        "items": [{"modality": i.modality, "grid_thw": list(i.grid_thw), "rows": i.embedding_length,
                   "runs": len(i.runs), "timestamps": None if i.timestamps is None else list(i.timestamps)}
                  for i in layout.items],
        "vision_start": int(layout.vision_start_positions.shape[0]),
        "vision_end": int(layout.vision_end_positions.shape[0]),
    }


def run_three_modes(family: str, *, messages=None, text: Optional[str] = None, images=None, videos=None,
                    video_metadata=None, max_new_tokens: int = 6, seed: int = 0, include_rebuild: bool = True,
                    progress: Optional[Callable[[str, dict], None]] = None, request_id=None, **proc_kw) -> dict:
    """Run one request aggregated, E/PD (``epd``, optionally ``epd-rebuild``) and ``epd-stock`` (validator on,
    then off) on ``family``'s tiny model; return a JSON-safe report.

    Without ``messages``/``text``/media a small default clip is used (:func:`default_request`).
    ``progress(stage, info)`` is called before and after each stage (``stage`` like ``"load"``, ``"aggregated"``,
    ``"encode"``, ``"epd"``, ``"epd-rebuild"``, ``"epd-stock/validate"``, ``"epd-stock/run"``, ``"done"``;
    ``info`` has ``"status"`` = ``"start"`` | ``"end"`` plus stage details).

    Report keys: ``family``, ``request_id``, ``lengths`` (aggregated / epd / stock prompt lengths and their
    difference), ``layouts`` (aggregated and stock summaries: runs, run lengths, items with grids and
    timestamps, marker counts), ``first_difference`` (first index where the stock ids differ from the
    aggregated ids), ``validator`` (per mode: ``"ok"``, ``"skipped"`` or the error class and message),
    ``tokens`` (per mode), ``max_abs_logit_diff`` and ``hidden_bitwise_equal`` (each mode vs aggregated),
    ``mrope`` (delta per mode, and whether the epd mRoPE equals HF ``get_rope_index``), ``timings`` (seconds).
    """
    def emit(stage, **info):
        if progress is not None:
            progress(stage, info)

    if messages is None and text is None and images is None and videos is None:
        req = default_request()
        messages, videos, video_metadata = req["messages"], req["videos"], req["video_metadata"]
    t_all = time.perf_counter()
    emit("load", status="start", family=family)
    t0 = time.perf_counter()
    tok, proc, model, adapter = load_family(family, seed=seed)
    timings = {"load_s": time.perf_counter() - t0}
    emit("load", status="end", seconds=timings["load_s"])
    req = dict(text=text, messages=messages, images=images, videos=videos)

    emit("aggregated", status="start")
    agg = aggregated(model, proc, video_metadata=copy.deepcopy(video_metadata), max_new_tokens=max_new_tokens,
                     request_id=request_id, **req, **proc_kw)
    timings["aggregated_s"] = sum(agg.timings.values())
    emit("aggregated", status="end", length=agg.prompt_len, tokens=agg.tokens)

    emit("encode", status="start")
    enc = encode(model, proc, adapter, video_metadata=copy.deepcopy(video_metadata), request_id=request_id,
                 **req, **proc_kw)
    timings["encode_s"] = sum(enc.timings.values())
    emit("encode", status="end", length=enc.layout.prompt_len, rows=int(enc.embeddings.shape[0]),
         deepstack_levels=len(enc.deepstack))

    results, verdicts = {}, {}
    modes = ["epd"] + (["epd-rebuild"] if include_rebuild else [])
    for mode in modes:
        emit(mode, status="start")
        try:
            results[mode] = pd_from_encoder(model, adapter, enc, mode=mode, max_new_tokens=max_new_tokens)
            verdicts[mode] = "ok"
        except HandoffError as exc:
            verdicts[mode] = f"{type(exc).__name__}: {exc}"
        emit(mode, status="end", verdict=verdicts[mode])

    emit("epd-stock/validate", status="start")
    stock_error = None
    try:
        pd_from_encoder(model, adapter, enc, mode="epd-stock", max_new_tokens=max_new_tokens, validate=True)
        verdicts["epd-stock (validator on)"] = "ok"
    except HandoffError as exc:
        stock_error = exc
        verdicts["epd-stock (validator on)"] = f"{type(exc).__name__}: {exc}"
    emit("epd-stock/validate", status="end", verdict=verdicts["epd-stock (validator on)"],
         error=None if stock_error is None else type(stock_error).__name__)

    emit("epd-stock/run", status="start")
    stock = pd_from_encoder(model, adapter, enc, mode="epd-stock", max_new_tokens=max_new_tokens, validate=False)
    results["epd-stock"] = stock
    verdicts["epd-stock (validator off)"] = "skipped"
    emit("epd-stock/run", status="end", length=stock.prompt_len, tokens=stock.tokens)

    for name, res in results.items():
        timings[f"{name}_s"] = sum(res.timings.values())
    timings["total_s"] = time.perf_counter() - t_all

    hf_mrope_equal = (agg.mrope_position_ids is not None and "epd" in results
                      and np.array_equal(results["epd"].mrope_position_ids, agg.mrope_position_ids)
                      and results["epd"].mrope_position_delta == agg.mrope_position_delta)
    diff_at = first_difference(agg.prompt_ids, stock.prompt_ids)

    def around(ids):
        if diff_at is None:
            return []
        lo = max(0, diff_at - 2)
        return tok.convert_ids_to_tokens([int(t) for t in ids[lo:diff_at + 6]])

    report = {
        "family": family,
        "request_id": request_id,
        "convention": adapter.convention,
        "lengths": {
            "aggregated": agg.prompt_len,
            **{m: r.prompt_len for m, r in results.items()},
            "aggregated_minus_stock": agg.prompt_len - stock.prompt_len,
        },
        "layouts": {"aggregated": _layout_summary(enc.layout), "stock": _layout_summary(stock.layout)},
        "first_difference": diff_at,
        "first_difference_context": {"aggregated": around(agg.prompt_ids), "epd-stock": around(stock.prompt_ids),
                                     "starts_at": None if diff_at is None else max(0, diff_at - 2)},
        "validator": verdicts,
        "stock_error": None if stock_error is None else {
            "type": type(stock_error).__name__, "field": stock_error.field,
            "expected": str(stock_error.expected), "actual": str(stock_error.actual)},
        "tokens": {"aggregated": agg.tokens, **{m: r.tokens for m, r in results.items()}},
        "tokens_equal": {m: r.tokens == agg.tokens for m, r in results.items()},
        "text": {"aggregated": tok.decode(agg.tokens), **{m: tok.decode(r.tokens) for m, r in results.items()}},
        "max_abs_logit_diff": {m: _max_abs(r.last_logits, agg.last_logits) for m, r in results.items()},
        "hidden_bitwise_equal": {m: _hidden_equal(r.hidden_states, agg.hidden_states) for m, r in results.items()},
        "mrope": {"aggregated_delta": agg.mrope_position_delta,
                  **{f"{m}_delta": r.mrope_position_delta for m, r in results.items()},
                  "epd_equals_hf_get_rope_index": bool(hf_mrope_equal)},
        "timings": {k: round(v, 4) for k, v in timings.items()},
    }
    emit("done", status="end", seconds=timings["total_s"])
    return report
