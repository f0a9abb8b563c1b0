"""The demo driver: one request aggregated, E/PD fixed and E/PD stock on a tiny model, as a JSON-safe report.

:func:`run_three_modes` is the entry point of ``mm-handoff demo``: it loads a family's real tokenizer,
real processor and tiny random model (:func:`load_family`), runs the aggregated reference, the E side,
the ``epd`` (and ``epd-rebuild``) modes and the ``epd-stock`` mode with the validator on and off, and
compares every mode with the aggregated run.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable

import numpy as np
import torch

from ..errors import HandoffError
from ..layout.summary import layout_summary
from ..layout.tokens import first_difference
from . import processors as _procs
from .aggregated import aggregated
from .encode import encode
from .families import normalize_family
from .prefill import pd_from_encoder

_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


def load_family(family: str, *, seed: int = 0, video_size: dict | None = None) -> tuple:
    """``(tokenizer, processor, model, adapter)`` for ``family``, built once per process (cached).

    The tokenizer is the shared real one, the processor the real HF one (``build_processor``), the model the
    tiny random one (``build_tiny_model(family, seed)``), the adapter the registered family adapter built with
    the tokenizer and the model's config.
    """
    from ..adapters import FAMILIES
    from ..adapters.families import HF_FAMILIES
    from . import tiny
    from .tokenizers import load_tokenizer

    fam = normalize_family(family, HF_FAMILIES)
    if not HF_FAMILIES[fam].qwen_processor:
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


def _verdict(exc: HandoffError | None) -> str:
    return "ok" if exc is None else f"{type(exc).__name__}: {exc}"


def _pd_modes(model, adapter, enc, max_new_tokens: int, include_rebuild: bool, emit) -> tuple:
    """Every PD mode on the encoder's output: ``(results per mode, verdicts, the stock path's error)``."""
    results, verdicts = {}, {}
    for mode in ["epd"] + (["epd-rebuild"] if include_rebuild else []):
        emit(mode, status="start")
        try:
            results[mode] = pd_from_encoder(model, adapter, enc, mode=mode, max_new_tokens=max_new_tokens)
            verdicts[mode] = _verdict(None)
        except HandoffError as exc:
            verdicts[mode] = _verdict(exc)
        emit(mode, status="end", verdict=verdicts[mode])

    emit("epd-stock/validate", status="start")
    stock_error = None
    try:
        pd_from_encoder(model, adapter, enc, mode="epd-stock", max_new_tokens=max_new_tokens, validate=True)
    except HandoffError as exc:
        stock_error = exc
    verdicts["epd-stock (validator on)"] = _verdict(stock_error)
    emit("epd-stock/validate", status="end", verdict=verdicts["epd-stock (validator on)"],
         error=None if stock_error is None else type(stock_error).__name__)

    emit("epd-stock/run", status="start")
    stock = pd_from_encoder(model, adapter, enc, mode="epd-stock", max_new_tokens=max_new_tokens, validate=False)
    results["epd-stock"] = stock
    verdicts["epd-stock (validator off)"] = "skipped"
    emit("epd-stock/run", status="end", length=stock.prompt_len, tokens=stock.tokens)
    return results, verdicts, stock_error


def _difference(tok, agg, stock) -> dict:
    """Where the stock prompt first leaves the aggregated one, with the tokens around it."""
    at = first_difference(agg.prompt_ids, stock.prompt_ids)
    lo = None if at is None else max(0, at - 2)

    def around(ids):
        return [] if at is None else tok.convert_ids_to_tokens([int(t) for t in ids[lo:at + 6]])

    return {"first_difference": at,
            "first_difference_context": {"aggregated": around(agg.prompt_ids), "epd-stock": around(stock.prompt_ids),
                                         "starts_at": lo}}


def _report(tok, adapter, agg, enc, results: dict, verdicts: dict, stock_error) -> dict:
    """Each mode compared with the aggregated run (the keys :func:`run_three_modes` documents)."""
    stock = results["epd-stock"]
    epd = results.get("epd")
    hf_mrope_equal = (agg.mrope_position_ids is not None and epd is not None
                      and np.array_equal(epd.mrope_position_ids, agg.mrope_position_ids)
                      and epd.mrope_position_delta == agg.mrope_position_delta)
    return {
        "convention": adapter.convention,
        "lengths": {"aggregated": agg.prompt_len, **{m: r.prompt_len for m, r in results.items()},
                    "aggregated_minus_stock": agg.prompt_len - stock.prompt_len},
        "layouts": {"aggregated": layout_summary(enc.layout), "stock": layout_summary(stock.layout)},
        **_difference(tok, agg, stock),
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
    }


def run_three_modes(family: str, *, messages=None, text: str | None = None, images=None, videos=None,
                    video_metadata=None, max_new_tokens: int = 6, seed: int = 0, include_rebuild: bool = True,
                    progress: Callable[[str, dict], None] | None = None, request_id=None, **proc_kw) -> dict:
    """Run one request aggregated, E/PD (``epd``, optionally ``epd-rebuild``) and ``epd-stock`` (validator on,
    then off) on ``family``'s tiny model; return a JSON-safe report.

    Without ``messages``/``text``/media a small default clip is used (:func:`default_request`).
    ``progress(stage, info)`` is called before and after each stage (``stage`` like ``"load"``, ``"aggregated"``,
    ``"encode"``, ``"epd"``, ``"epd-rebuild"``, ``"epd-stock/validate"``, ``"epd-stock/run"``, ``"done"``;
    ``info`` has ``"status"`` = ``"start"`` | ``"end"`` plus stage details).

    Report keys: ``family``, ``request_id``, ``convention``, ``lengths`` (aggregated / epd / stock prompt lengths
    and their difference), ``layouts`` (aggregated and stock, as :func:`mm_handoff.layout.summary.layout_summary`
    describes them), ``first_difference`` (first index where the stock ids differ from the aggregated ids) and
    its context, ``validator`` (per mode: ``"ok"``, ``"skipped"`` or the error class and message),
    ``stock_error``, ``tokens`` (per mode), ``tokens_equal``, ``text``, ``max_abs_logit_diff`` and
    ``hidden_bitwise_equal`` (each mode vs aggregated), ``mrope`` (delta per mode, and whether the epd mRoPE
    equals HF ``get_rope_index``), ``timings`` (seconds).
    """
    def emit(stage, **info):
        if progress is not None:
            progress(stage, info)

    if messages is None and text is None and images is None and videos is None:
        req = default_request()
        messages, videos, video_metadata = req["messages"], req["videos"], req["video_metadata"]
    t_all = time.perf_counter()
    emit("load", status="start", family=family)
    tok, proc, model, adapter = load_family(family, seed=seed)
    timings = {"load_s": time.perf_counter() - t_all}
    emit("load", status="end", seconds=timings["load_s"])
    req = dict(text=text, messages=messages, images=images, videos=videos, request_id=request_id, **proc_kw)

    emit("aggregated", status="start")
    agg = aggregated(model, proc, video_metadata=copy.deepcopy(video_metadata), max_new_tokens=max_new_tokens, **req)
    emit("aggregated", status="end", length=agg.prompt_len, tokens=agg.tokens)
    emit("encode", status="start")
    enc = encode(model, proc, adapter, video_metadata=copy.deepcopy(video_metadata), **req)
    emit("encode", status="end", length=enc.layout.prompt_len, rows=int(enc.embeddings.shape[0]),
         deepstack_levels=len(enc.deepstack))
    results, verdicts, stock_error = _pd_modes(model, adapter, enc, max_new_tokens, include_rebuild, emit)

    for name, res in [("aggregated", agg), ("encode", enc), *results.items()]:
        timings[f"{name}_s"] = sum(res.timings.values())
    timings["total_s"] = time.perf_counter() - t_all
    report = {"family": family, "request_id": request_id,
              **_report(tok, adapter, agg, enc, results, verdicts, stock_error),
              "timings": {k: round(v, 4) for k, v in timings.items()}}
    emit("done", status="end", seconds=timings["total_s"])
    return report
