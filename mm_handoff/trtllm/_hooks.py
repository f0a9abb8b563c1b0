"""The one declared patch table. install, uninstall, status() and ``mm-handoff doctor`` all read it.

Its rows are the hook-table rows every engine glue uses (:class:`mm_handoff.glue.hooks.Hook`): each names a
hook point by module and class, the attribute, the wrapper installed on it and the check point the wrapper
runs (:mod:`mm_handoff.glue.checkpoint`), the leading parameters its signature must have, which process runs
it, whether install needs it, and the upstream file + commit it was written against (the stand-in in
``tests/stand_in`` mirrors the same files). :func:`probe` turns the table into concrete
:class:`~mm_handoff.glue.hooks.HookPoint` rows, adding one row per registered input-processor class that
overrides the prefill method.
"""

from __future__ import annotations

import importlib

from ..adapters.registry import REGISTRY
from ..errors import HandoffError
from ..glue.hooks import Hook, HookPoint, check_signature, resolve, unwrap_ours
from ..glue.ledger import find_owner, target_key
from ._admission import admission_wrapper, prefill_wrapper
from ._encoder import generate_async_wrapper, preprocess_wrapper, to_handle_wrapper
from ._worker import enqueue_request_wrapper, prepare_tp_inputs_wrapper

#: the name this package has always exported for a row of its table: the glue's one row format
PatchSpec = Hook

_QWEN3VL = "tensorrt_llm/_torch/models/modeling_qwen3vl.py"
_LLM = "tensorrt_llm/llmapi/llm.py (the version with TODO(TRTLLM-12869); its commit is not recorded)"

PATCH_TABLE: tuple[Hook, ...] = (
    # encoder side (_encoder.py); before BaseLLM._preprocess, so the encoder's _preprocess row records
    # the engine's own function, never the admission wrapper, as its original. The _preprocess and to_handle
    # rows gather what generate_async's check point needs and record nothing themselves.
    Hook("tensorrt_llm.llmapi.mm_encoder", "MultimodalEncoder", "generate_async", generate_async_wrapper, "encoder",
         ("inputs",), required=True, process="user",
         upstream="tensorrt_llm/llmapi/mm_encoder.py @ 83ab45a50d169b08e29e9bf2f46fc66b3838cc37"),
    Hook("tensorrt_llm.llmapi.mm_encoder", "MultimodalEncoder", "_preprocess", preprocess_wrapper, "encoder",
         ("inputs", "sampling_params", "disaggregated_params"), required=True, process="user", upstream=_LLM),
    # where _preprocess turns the grids into one-use SharedTensorContainer handles: read them just before
    Hook("tensorrt_llm.inputs.multimodal", "MultimodalParams", "to_handle", to_handle_wrapper, "encoder",
         ("element",), required=True, process="user",
         upstream="tensorrt_llm/inputs/multimodal.py @ 01138754b3f4b047dfacd714ff121cc7f4df6d67"),
    # PD side (_admission.py)
    Hook("tensorrt_llm._torch.models.modeling_qwen3vl", "Qwen3VLInputProcessorBase",
         "build_disagg_prefill_multimodal_inputs", prefill_wrapper, "prefill",
         ("inputs", "mm_handles"), required=True, process="user", covers_registered_overrides=True, role="prefill",
         upstream=f"{_QWEN3VL} @ 002f3cc3d0554c4ebd530d1354f96e89666d93b8 (the older get_prompt_token_ids, "
                  "@ f4faed18a1a35ff6a29c29e91650faa70a793bff, is outside the version gate)"),
    Hook("tensorrt_llm.llmapi.llm", "BaseLLM", "_preprocess", admission_wrapper, "admission",
         ("inputs", "sampling_params", "disaggregated_params"), required=True, process="user", upstream=_LLM),
    # executor worker (_worker.py)
    Hook("tensorrt_llm.executor.base_worker", "BaseWorker", "_enqueue_request", enqueue_request_wrapper, "ingress",
         ("request",), required=False, process="worker",
         upstream="tensorrt_llm/executor/base_worker.py @ 7b437aaa73bf5a44b1102aee5c631074da763b8f"),
    # the context-phase slice: wherever the installed version has it (newest first); the slice check is
    # placed when any of these resolves, and install/status/doctor say so when none does
    Hook("tensorrt_llm._torch.pyexecutor.engine.runners.decoder.prepare", "InputPreparer", "_prepare_tp_inputs",
         prepare_tp_inputs_wrapper, "slice", ("scheduled_requests",), required=False, process="worker", role="slice",
         upstream="tensorrt_llm/_torch/pyexecutor/engine/runners/decoder/prepare.py @ "
                  "084628908c26f348f988792b66c07a99a8013ee3 (the lori-ren/TensorRT-LLM fork's runner split)"),
    Hook("tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner", "DecoderRunner", "_prepare_tp_inputs",
         prepare_tp_inputs_wrapper, "slice", ("scheduled_requests",), required=False, process="worker", role="slice",
         upstream="tensorrt_llm/_torch/pyexecutor/engine/runners/decoder/runner.py @ "
                  "0ea8c1debd2aae24c7fceaf5474f0c627114cc6a and @ fcc4432bef2a729ae6de0d29fdd89b7d15c87794"),
    Hook("tensorrt_llm._torch.pyexecutor.model_engine", "PyTorchModelEngine", "_prepare_tp_inputs",
         prepare_tp_inputs_wrapper, "slice", ("scheduled_requests",), required=False, process="worker", role="slice",
         upstream="tensorrt_llm/_torch/pyexecutor/model_engine.py @ "
                  "1a0dc5f70054f66d892df6a964996fc5ead6f81e (before the runner refactor)"),
)

#: model modules that register Qwen3-VL-family processors; the zoo loads lazily, so install imports them
MODEL_MODULES: tuple[tuple[str, bool], ...] = (
    ("tensorrt_llm._torch.models.modeling_qwen3vl", True),
    ("tensorrt_llm._torch.models.modeling_qwen3vl_moe", False),
    ("tensorrt_llm._torch.models.modeling_qwen3_5", False),
    ("tensorrt_llm._torch.models.modeling_cosmos3", False),
)

REGISTRY_MODULE = "tensorrt_llm.inputs.registry"


def wrapper_name(wrapper) -> str:
    """``_admission.prefill_wrapper``: where a wrapper lives, for status() and doctor."""
    return f"{wrapper.__module__.rpartition('.')[2]}.{wrapper.__name__}"


def import_model_modules() -> dict:
    """Import the Qwen3-VL-family model modules; ``{module: None | "why it failed"}``."""
    out: dict[str, str | None] = {}
    for module, required in MODEL_MODULES:
        try:
            importlib.import_module(module)
            out[module] = None
        except Exception as exc:  # an optional model file may be absent from a release
            out[module] = f"{type(exc).__name__}: {exc}"
            if required:
                raise
    return out


def _resolve(hook: Hook) -> HookPoint:
    """The row in the engine; a class of the ``get_prompt_token_ids`` era, without the row's method, says so."""
    point = resolve(hook)
    if point.state == "missing" and point.cls is not None and find_owner(point.cls, "get_prompt_token_ids")[0]:
        point.reason += (" (it has get_prompt_token_ids: that era returns (ids, lengths, offsets), rewrites pads "
                         "out of vocabulary and takes images only; mm-handoff does not support it)")
    return point


def registered_processor_classes() -> list:
    """Every processor class in TensorRT-LLM's input-processor registry (deduplicated, stable order)."""
    try:
        module = importlib.import_module(REGISTRY_MODULE)
    except Exception:
        return []
    table = getattr(getattr(module, "INPUT_PROCESSOR_REGISTRY", None), "_input_processors_cls_by_model_type", None)
    seen = []
    for cls in (table or {}).values():
        if isinstance(cls, type) and cls not in seen:
            seen.append(cls)
    return seen


def _overrides(base_point: HookPoint) -> list:
    """Rows for registered mm-handoff-family processor subclasses that define their own override."""
    rows: list = []
    attr = base_point.attr
    if attr is None:  # the base point did not resolve: no override to look for
        return rows
    for cls in registered_processor_classes():
        if cls is base_point.cls:
            continue
        try:
            REGISTRY.resolve(cls)
        except HandoffError:
            continue  # another family's processor: not ours to wrap
        if find_owner(cls, attr)[0] is None:
            if find_owner(cls, "get_prompt_token_ids")[0] is not None:
                rows.append(_prompt_token_ids_era(base_point, cls, attr))
            continue
        if attr not in vars(cls):
            continue
        point = HookPoint(base_point.hook, target_key(cls, attr), cls, attr)
        rows.append(check_signature(point, unwrap_ours(vars(cls)[attr])))
    return rows


def _prompt_token_ids_era(base_point: HookPoint, cls: type, attr: str) -> HookPoint:
    """A registered family processor of the ``get_prompt_token_ids`` era (e.g. the older Qwen3.5 wrapper
    ``Qwen3_5InputProcessorBase``): no prefill hook to wrap, so install must refuse, naming the class."""
    key = target_key(cls, attr)
    return HookPoint(base_point.hook, key, cls, None, state="missing",
                     reason=f"{cls.__module__}:{cls.__qualname__} has no {attr} but get_prompt_token_ids: "
                            "that era returns (ids, lengths, offsets), rewrites pads out of vocabulary and takes "
                            "images only; mm-handoff does not support it")


def probe() -> list:
    """Resolve every table row (plus registered overrides) against the imported engine."""
    points = []
    for hook in PATCH_TABLE:
        point = _resolve(hook)
        points.append(point)
        if hook.covers_registered_overrides and point.state == "found":
            points.extend(_overrides(point))
    return points
