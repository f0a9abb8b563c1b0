"""The PD side of the Hugging Face reference engine: prefill + greedy decode, on CPU.

:func:`prefill_decode` runs in one of three modes:

``"epd"``
    the carried wire form goes through :func:`mm_handoff.checks.accept_layout` with this side's
    adapter (decode, skew, grid, the carried mRoPE delta, rows per item and row width, this request's own
    prompt); mRoPE is recomputed with the adapter; the rows are placed at the layout's
    pad runs and the prompt is prefilled.
``"epd-rebuild"``
    no carried layout: the expanded ids are rebuilt from the raw prompt + grids + video metadata with
    ``adapter.rebuild_token_ids`` (the fallback path), checked by the same accept step, then as ``"epd"``.
``"epd-stock"``
    TensorRT-LLM's current prefill: ``adapter.stock_token_ids`` (one pad run per item, no timestamps,
    no per-group markers), the encoder's mRoPE ids sliced to the shorter prompt and the encoder's
    delta. With ``validate=True`` the accept step runs first and raises
    :class:`~mm_handoff.errors.MropeLengthError`; with ``validate=False`` it runs and gives the
    (wrong) outputs.

The prefill passes 4-row position ids to the language model (row 0 the text position ``arange(L)``,
rows 1-3 mRoPE t, h, w); decode step ``i`` uses ``[p, p + delta, p + delta, p + delta]`` with
``p = L + i`` and carries the cache object forward (for Qwen3.5 it also holds the linear-attention
conv and recurrent state). Logits are computed for the last position only: full-sequence logits of
a 12k-token prompt take 7 GB per copy.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..adapters.base import typed_adapter
from ..checks import accept_layout, check_mrope_slice
from ..errors import EmbeddingCountError, MropeLengthError
from ..layout import HandoffLayout
from .encode import EncoderOutput, handoff, reset_rope_deltas

MODES = ("epd", "epd-rebuild", "epd-stock")
DEFAULT_MAX_NEW_TOKENS = 8


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
    mrope_position_ids: np.ndarray | None = None
    mrope_position_delta: int | None = None
    #: the layout the prefill used (None for aggregated)
    layout: HandoffLayout | None = None
    #: True when the layout was checked (the accept step) and passed; False when skipped
    validated: bool = False
    timings: dict = field(default_factory=dict)

    @property
    def prompt_len(self) -> int:
        return int(self.prompt_ids.shape[0])


@dataclass(frozen=True)
class _Inputs:
    """What a mode hands to the prefill: ids, their layout, positions and delta, whether it was checked."""

    ids: np.ndarray
    layout: HandoffLayout
    positions: np.ndarray
    delta: int
    validated: bool


# ------------------------------------------------------------------------------------------ the model
def pad_mask(layout: HandoffLayout) -> np.ndarray:
    """True at every pad position of ``layout`` (where the visual rows go)."""
    mask = np.zeros(layout.prompt_len, dtype=bool)
    for run in layout.runs:
        mask[run.offset:run.end] = True
    return mask


def _check_tensors(ids, positions, mask, embeddings, deepstack, request_id) -> None:
    """What the scatter and the language model need: positions cover the prompt, one row per pad,
    every deepstack level shaped like the embeddings."""
    check_mrope_slice(positions, int(ids.shape[0]), request_id=request_id)
    rows = int(mask.sum())
    if rows != int(embeddings.shape[0]):
        raise EmbeddingCountError("embedding rows", f"{rows} (pads in the prompt)", int(embeddings.shape[0]),
                                  request_id=request_id)
    for k, level in enumerate(deepstack):
        if tuple(level.shape) != tuple(embeddings.shape):
            raise EmbeddingCountError(f"deepstack[{k}].shape", list(embeddings.shape), list(level.shape),
                                      request_id=request_id)


def _prefill(model, ids, positions, mask, embeddings, deepstack) -> tuple:
    """Embed, scatter the rows at the pads, run the language model; ``(hidden, last logits, cache)``."""
    inner = model.model
    n = int(ids.shape[0])
    x = inner.get_input_embeddings()(torch.from_numpy(ids.astype(np.int64)).view(1, n))
    mask_t = torch.from_numpy(mask).view(1, n)
    if int(embeddings.shape[0]):
        x = x.masked_scatter(mask_t.unsqueeze(-1).expand_as(x), embeddings.to(x.device, x.dtype))
    pos3 = torch.from_numpy(np.array(positions, dtype=np.int64)).view(3, 1, n)  # a writable copy
    pos4 = torch.cat([torch.arange(n, dtype=torch.int64).view(1, 1, n), pos3], dim=0)
    kw: dict[str, Any] = {}
    if len(deepstack):
        kw["visual_pos_masks"] = mask_t
        kw["deepstack_visual_embeds"] = [d.to(x.device, x.dtype) for d in deepstack]
    out = inner.language_model(inputs_embeds=x, position_ids=pos4, use_cache=True, **kw)
    hidden = out.last_hidden_state[0]
    return hidden, model.lm_head(hidden[-1:])[0], out.past_key_values


def _greedy_decode(model, last_logits, cache, n: int, delta: int, max_new_tokens: int) -> tuple:
    """Greedy tokens after a prompt of ``n`` ids, at mRoPE positions ``p + delta``; ``(tokens, cache)``."""
    inner = model.model
    embed = inner.get_input_embeddings()
    tokens, logits = [], last_logits
    for i in range(max_new_tokens):
        tok = int(torch.argmax(logits))
        tokens.append(tok)
        if i == max_new_tokens - 1:
            break
        p = n + i
        e = embed(torch.tensor([[tok]], dtype=torch.int64))
        pos = torch.tensor([p, p + delta, p + delta, p + delta], dtype=torch.int64).view(4, 1, 1)
        step = inner.language_model(inputs_embeds=e, position_ids=pos, past_key_values=cache, use_cache=True)
        cache = step.past_key_values
        logits = model.lm_head(step.last_hidden_state[:, -1])[0]
    return tokens, cache


def prefill_and_decode(model, ids: np.ndarray, positions: np.ndarray, delta: int, mask: np.ndarray,
                       embeddings: torch.Tensor, deepstack: Sequence, max_new_tokens: int, request_id) -> dict:
    """Prefill ``ids`` with the rows at ``mask`` and decode greedily; no layout checks (the caller's job).

    Returns ``{"hidden", "last_logits", "tokens", "timings", "cache"}``.
    """
    _check_tensors(ids, positions, mask, embeddings, deepstack, request_id)
    timings = {}
    reset_rope_deltas(model)
    with torch.no_grad():
        t0 = time.perf_counter()
        hidden, last_logits, cache = _prefill(model, ids, positions, mask, embeddings, deepstack)
        timings["prefill_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tokens, cache = _greedy_decode(model, last_logits, cache, int(ids.shape[0]), int(delta), max_new_tokens)
        timings["decode_s"] = time.perf_counter() - t0
    reset_rope_deltas(model)
    return {"hidden": hidden, "last_logits": last_logits, "tokens": tokens, "timings": timings, "cache": cache}


# ------------------------------------------------------------------------------------------ the modes
def _grids(layout: HandoffLayout, modality: str) -> list | None:
    return [list(i.grid_thw) for i in layout.items if i.modality == modality] or None


def _epd_inputs(adapter, wire, embeddings, deepstack, item_rows, raw_prompt_ids, request_id) -> _Inputs:
    """The carried layout, accepted; mRoPE recomputed by this side's adapter (it must give the carried delta)."""
    if wire is None or item_rows is None:
        raise ValueError("mode 'epd' needs the wire form (wire=) and the rows per item (item_rows=)")
    width = int(embeddings.shape[1]) * (1 + len(deepstack))  # a row with its deepstack levels side by side
    layout = accept_layout(wire, adapter, embedding_shapes=[(int(r), width) for r in item_rows],
                           prompt_token_ids=raw_prompt_ids, request_id=request_id)
    positions, delta = typed_adapter(adapter, request_id=request_id).mrope_positions(layout.token_ids,
                                    image_grid_thw=_grids(layout, "image"), video_grid_thw=_grids(layout, "video"),
                                    request_id=request_id)  # a carried delta was checked against it above
    return _Inputs(layout.token_ids, layout, positions, int(delta), True)


def _rebuild_inputs(adapter, raw_prompt_ids, image_grid_thw, video_grid_thw, video_metadata, rows: int,
                    validate: bool, request_id) -> _Inputs:
    """The fallback: this side rebuilds the expanded ids and derives their layout and mRoPE."""
    if raw_prompt_ids is None:
        raise ValueError("mode 'epd-rebuild' needs raw_prompt_ids")
    layout = adapter.rebuild_layout(raw_prompt_ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                                    video_metadata=video_metadata, mrope=True, request_id=request_id)
    positions, delta = layout.mrope_position_ids, layout.mrope_position_delta
    if validate:
        accept_layout(layout, adapter, embedding_rows=rows, mrope_position_ids=positions, request_id=request_id)
    return _Inputs(layout.token_ids, layout, positions, int(delta), validate)


def _as_np_mrope(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim == 3 and arr.shape[1] == 1:
        arr = arr[:, 0, :]
    return arr.astype(np.int64, copy=False)


def _stock_inputs(adapter, raw_prompt_ids, image_grid_thw, video_grid_thw, encoder_mrope, encoder_delta,
                  rows: int, validate: bool, request_id) -> _Inputs:
    """TensorRT-LLM's current prefill: one pad run per item and the encoder's mRoPE sliced to it."""
    if raw_prompt_ids is None or encoder_mrope is None or encoder_delta is None:
        raise ValueError("mode 'epd-stock' needs raw_prompt_ids, encoder_mrope and encoder_delta")
    ids = adapter.stock_token_ids(raw_prompt_ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw)
    layout = adapter.derive_layout(ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw, mrope=False,
                                   request_id=request_id)
    enc_mrope = _as_np_mrope(encoder_mrope)
    if validate:
        accept_layout(layout, adapter, mrope_position_ids=enc_mrope, embedding_rows=rows, request_id=request_id)
    n = layout.prompt_len
    if enc_mrope.shape[-1] < n:
        raise MropeLengthError("mrope_position_ids.shape[-1]", f">= {n} to slice", int(enc_mrope.shape[-1]),
                               request_id=request_id)
    positions = np.ascontiguousarray(enc_mrope[:, :n])  # the silent slice TensorRT-LLM does today
    return _Inputs(np.asarray(ids), layout, positions, int(encoder_delta), validate)


def prefill_decode(model, adapter, *, mode: str, wire: dict | None = None, embeddings: torch.Tensor,
                   deepstack: Sequence = (), item_rows: Sequence[int] | None = None, raw_prompt_ids=None,
                   image_grid_thw=None, video_grid_thw=None, video_metadata=None,
                   max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, validate: bool = True, encoder_mrope=None,
                   encoder_delta: int | None = None, request_id=None) -> PDResult:
    """The PD side in one of :data:`MODES` (see the module docstring).

    * ``"epd"``: needs ``wire`` and ``item_rows`` (rows per item, as :func:`handoff` gives them); grids and
      metadata are taken from the layout; ``raw_prompt_ids``, when given, must be the prompt the layout was
      expanded from. The accept step always runs (``validate`` does not apply).
    * ``"epd-rebuild"``: needs ``raw_prompt_ids``, the grids and ``video_metadata`` (the processor's returned
      metadata, so sampled ``frames_indices`` are the ones used).
    * ``"epd-stock"``: needs ``raw_prompt_ids``, the grids and ``encoder_mrope`` ((3, L) or (3, 1, L) ids of the
      encoder's prompt) plus ``encoder_delta``. ``validate=True`` raises ``MropeLengthError`` when the lengths
      differ (every video prompt); ``validate=False`` slices ``[:, :L_stock]`` and runs.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    deepstack = list(deepstack or [])
    rows = int(embeddings.shape[0])
    t0 = time.perf_counter()
    if mode == "epd":
        inp = _epd_inputs(adapter, wire, embeddings, deepstack, item_rows, raw_prompt_ids, request_id)
    elif mode == "epd-rebuild":
        inp = _rebuild_inputs(adapter, raw_prompt_ids, image_grid_thw, video_grid_thw, video_metadata, rows,
                              validate, request_id)
    else:
        inp = _stock_inputs(adapter, raw_prompt_ids, image_grid_thw, video_grid_thw, encoder_mrope, encoder_delta,
                            rows, validate, request_id)
    if len(deepstack) != int(getattr(adapter, "deepstack_levels", 0) or 0):
        raise EmbeddingCountError("deepstack levels", adapter.deepstack_levels, len(deepstack), request_id=request_id)
    timings = {"layout_s": time.perf_counter() - t0}
    core = prefill_and_decode(model, np.asarray(inp.ids), np.asarray(inp.positions), inp.delta, pad_mask(inp.layout),
                              embeddings, deepstack, max_new_tokens, request_id)
    timings.update(core["timings"])
    return PDResult(mode=mode, request_id=request_id, prompt_ids=np.array(inp.ids, dtype=np.int32),
                    hidden_states=core["hidden"], last_logits=core["last_logits"], tokens=core["tokens"],
                    mrope_position_ids=np.asarray(inp.positions), mrope_position_delta=inp.delta, layout=inp.layout,
                    validated=inp.validated, timings=timings)


def pd_from_encoder(model, adapter, enc_out: EncoderOutput, *, mode: str, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                    validate: bool = True) -> PDResult:
    """Convenience: hand ``enc_out`` over (through :func:`handoff`) and run :func:`prefill_decode` in ``mode``."""
    wire, tensors = handoff(enc_out)
    stock = mode == "epd-stock"
    return prefill_decode(
        model, adapter, mode=mode, wire=wire if mode == "epd" else None, embeddings=tensors["embeddings"],
        deepstack=tensors["deepstack"], item_rows=tensors["item_rows"], raw_prompt_ids=enc_out.raw_prompt_ids,
        image_grid_thw=enc_out.image_grid_thw, video_grid_thw=enc_out.video_grid_thw,
        video_metadata=copy.deepcopy(enc_out.video_metadata), max_new_tokens=max_new_tokens, validate=validate,
        encoder_mrope=enc_out.mrope_position_ids if stock else None,
        encoder_delta=enc_out.mrope_position_delta if stock else None, request_id=enc_out.request_id)
