"""The one declared patch table. install, uninstall, status() and ``mm-handoff doctor`` all read it.

Each row names a hook point by module and class, the attribute with the wrapper function installed
on it (older names with their own wrappers as alternatives, newest first), the leading parameters its
signature must have, which process runs it, whether install needs it, and the upstream file + commit
it was written against (the stand-in in ``tests/stand_in`` mirrors the same files). :func:`probe`
turns the table into concrete :class:`HookPoint` rows, adding one row per registered input-processor
class that overrides the prefill method.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

import attrs

from ..adapters.registry import REGISTRY
from ..errors import HandoffError
from ..glue.ledger import WRAPPER_MARK, find_owner, target_key
from ._admission import admission_wrapper, prefill_wrapper
from ._encoder import generate_async_wrapper, preprocess_wrapper, to_handle_wrapper
from ._worker import enqueue_request_wrapper, prepare_tp_inputs_wrapper


@attrs.frozen
class PatchSpec:
    module: str
    qualname: str
    #: ``(attribute, wrapper)`` pairs, newest name first: the first attribute present gets its wrapper,
    #: called as ``wrapper(wrapped, instance, args, kwargs, policy=...)``
    hooks: tuple[tuple[str, Callable], ...]
    #: leading parameter names after ``self`` that the signature must start with
    params: tuple[str, ...]
    #: install refuses when a required hook point is missing
    required: bool
    #: ``"user"`` (LLM / encoder / server process) or ``"worker"`` (executor worker)
    process: str
    #: upstream file @ commit the wrapper was written against
    upstream: str
    #: also wrap registered input-processor subclasses that override the attribute
    covers_registered_overrides: bool = False
    #: what the row is for: ``"slice"`` (one of the places the context-phase mRoPE slice may live: the
    #: slice check is placed when any of them resolves), ``"prefill"`` (the prompt rewrite, not installed
    #: when upstream carries the layout itself), or ``""``
    role: str = ""

    @property
    def display(self) -> str:
        return f"{self.module}:{self.qualname}.{'|'.join(attr for attr, _ in self.hooks)}"


_QWEN3VL = "tensorrt_llm/_torch/models/modeling_qwen3vl.py"
_LLM = "tensorrt_llm/llmapi/llm.py (the version with TODO(TRTLLM-12869); its commit is not recorded)"

PATCH_TABLE: tuple[PatchSpec, ...] = (
    # encoder side (_encoder.py); before BaseLLM._preprocess, so the encoder's _preprocess row records
    # the engine's own function, never the admission wrapper, as its original
    PatchSpec("tensorrt_llm.llmapi.mm_encoder", "MultimodalEncoder", (("generate_async", generate_async_wrapper),),
              ("inputs",), required=True, process="user",
              upstream="tensorrt_llm/llmapi/mm_encoder.py @ 83ab45a50d169b08e29e9bf2f46fc66b3838cc37"),
    PatchSpec("tensorrt_llm.llmapi.mm_encoder", "MultimodalEncoder", (("_preprocess", preprocess_wrapper),),
              ("inputs", "sampling_params", "disaggregated_params"), required=True, process="user",
              upstream=_LLM),
    # where _preprocess turns the grids into one-use SharedTensorContainer handles: read them just before
    PatchSpec("tensorrt_llm.inputs.multimodal", "MultimodalParams", (("to_handle", to_handle_wrapper),),
              ("element",), required=True, process="user",
              upstream="tensorrt_llm/inputs/multimodal.py @ 01138754b3f4b047dfacd714ff121cc7f4df6d67"),
    # PD side (_admission.py)
    PatchSpec("tensorrt_llm._torch.models.modeling_qwen3vl", "Qwen3VLInputProcessorBase",
              (("build_disagg_prefill_multimodal_inputs", prefill_wrapper),),
              ("inputs", "mm_handles"), required=True, process="user", covers_registered_overrides=True,
              role="prefill",
              upstream=f"{_QWEN3VL} @ 002f3cc3d0554c4ebd530d1354f96e89666d93b8 (the older get_prompt_token_ids, "
                       "@ f4faed18a1a35ff6a29c29e91650faa70a793bff, is outside the version gate)"),
    PatchSpec("tensorrt_llm.llmapi.llm", "BaseLLM", (("_preprocess", admission_wrapper),),
              ("inputs", "sampling_params", "disaggregated_params"), required=True, process="user", upstream=_LLM),
    # executor worker (_worker.py)
    PatchSpec("tensorrt_llm.executor.base_worker", "BaseWorker", (("_enqueue_request", enqueue_request_wrapper),),
              ("request",), required=False, process="worker",
              upstream="tensorrt_llm/executor/base_worker.py @ 7b437aaa73bf5a44b1102aee5c631074da763b8f"),
    # the context-phase slice: wherever the installed version has it (newest first); the slice check is
    # placed when any of these resolves, and install/status/doctor say so when none does
    PatchSpec("tensorrt_llm._torch.pyexecutor.engine.runners.decoder.prepare", "InputPreparer",
              (("_prepare_tp_inputs", prepare_tp_inputs_wrapper),), ("scheduled_requests",), required=False,
              process="worker", role="slice",
              upstream="tensorrt_llm/_torch/pyexecutor/engine/runners/decoder/prepare.py @ "
                       "084628908c26f348f988792b66c07a99a8013ee3 (the lori-ren/TensorRT-LLM fork's runner split)"),
    PatchSpec("tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner", "DecoderRunner",
              (("_prepare_tp_inputs", prepare_tp_inputs_wrapper),), ("scheduled_requests",), required=False,
              process="worker", role="slice",
              upstream="tensorrt_llm/_torch/pyexecutor/engine/runners/decoder/runner.py @ "
                       "0ea8c1debd2aae24c7fceaf5474f0c627114cc6a and @ fcc4432bef2a729ae6de0d29fdd89b7d15c87794"),
    PatchSpec("tensorrt_llm._torch.pyexecutor.model_engine", "PyTorchModelEngine",
              (("_prepare_tp_inputs", prepare_tp_inputs_wrapper),), ("scheduled_requests",), required=False,
              process="worker", role="slice",
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


@attrs.define
class HookPoint:
    spec: PatchSpec
    #: ``"module:Qualname.attr"`` (the ledger key), or the spec's display name when unresolved
    key: str
    cls: type | None = None
    attr: str | None = None
    #: the wrapper the row names for ``attr`` (the newest name's when unresolved)
    wrapper: Callable | None = None
    #: found | missing | drifted
    state: str = "missing"
    reason: str = ""
    #: for a drifted hook: (what mm-handoff expects, what the engine has)
    drift: tuple | None = None


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


def _check_callable(point: HookPoint, raw) -> HookPoint:
    if not inspect.isfunction(raw):
        point.state, point.reason = "drifted", f"{point.key} is {type(raw).__name__}, expected a plain method"
        point.drift = ("a plain method", type(raw).__name__)
        return point
    names = tuple(list(inspect.signature(raw).parameters)[1:])
    want = tuple(point.spec.params)
    if names[:len(want)] != want:
        point.state = "drifted"
        point.reason = f"{point.key} takes {names}, expected it to start with {want}"
        point.drift = (f"parameters starting {want}", names)
        return point
    point.state = "found"
    return point


def _resolve(spec: PatchSpec) -> HookPoint:
    point = HookPoint(spec, spec.display, wrapper=spec.hooks[0][1])
    try:
        module = importlib.import_module(spec.module)
    except Exception as exc:
        point.reason = f"module {spec.module} not importable ({type(exc).__name__}: {exc})"
        return point
    cls = getattr(module, spec.qualname, None)
    if not isinstance(cls, type):
        point.reason = f"{spec.module} has no class {spec.qualname}"
        return point
    for attr, wrapper in spec.hooks:
        owner, raw = find_owner(cls, attr)
        if owner is not None:
            point.cls, point.attr, point.key, point.wrapper = cls, attr, target_key(cls, attr), wrapper
            return _check_callable(point, _unwrap_ours(raw))
    point.reason = f"{spec.module}:{spec.qualname} has none of {[attr for attr, _ in spec.hooks]}"
    if find_owner(cls, "get_prompt_token_ids")[0] is not None:
        point.reason += (" (it has get_prompt_token_ids: that era returns (ids, lengths, offsets), rewrites pads "
                         "out of vocabulary and takes images only; mm-handoff does not support it)")
    return point


def _unwrap_ours(raw):
    """Probe the engine's own function, not an mm-handoff wrapper already in place."""
    while getattr(raw, WRAPPER_MARK, None) is not None and hasattr(raw, "__wrapped__"):
        raw = raw.__wrapped__
    return raw


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
        point = HookPoint(base_point.spec, target_key(cls, attr), cls, attr, base_point.wrapper)
        rows.append(_check_callable(point, _unwrap_ours(vars(cls)[attr])))
    return rows


def _prompt_token_ids_era(base_point: HookPoint, cls: type, attr: str) -> HookPoint:
    """A registered family processor of the ``get_prompt_token_ids`` era (e.g. the older Qwen3.5 wrapper
    ``Qwen3_5InputProcessorBase``): no prefill hook to wrap, so install must refuse, naming the class."""
    key = target_key(cls, attr)
    return HookPoint(base_point.spec, key, cls, None, base_point.wrapper, state="missing",
                     reason=f"{cls.__module__}:{cls.__qualname__} has no {attr} but get_prompt_token_ids: "
                            "that era returns (ids, lengths, offsets), rewrites pads out of vocabulary and takes "
                            "images only; mm-handoff does not support it")


def probe() -> list:
    """Resolve every table row (plus registered overrides) against the imported engine."""
    points = []
    for spec in PATCH_TABLE:
        point = _resolve(spec)
        points.append(point)
        if spec.covers_registered_overrides and point.state == "found":
            points.extend(_overrides(point))
    return points
