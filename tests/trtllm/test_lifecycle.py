"""install / uninstall / status / get_original against the stand-in: install twice, uninstall twice or
without install, own vs inherited methods, a foreign wrapper on top, modules imported before vs after."""

import logging
import threading

import pytest
from trtllm_helpers import PROMPT, video_request

import mm_handoff.trtllm as glue
from mm_handoff.errors import EngineNotSupportedError, HandoffError
from mm_handoff.glue.ledger import WRAPPER_MARK, find_owner


def _targets():
    """(class, attr) of every hook point of the stand-in, imported fresh."""
    from tensorrt_llm._torch.models.modeling_qwen3vl import Qwen3VLInputProcessorBase
    from tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner import DecoderRunner
    from tensorrt_llm._torch.pyexecutor.model_engine import PyTorchModelEngine
    from tensorrt_llm.executor.base_worker import BaseWorker
    from tensorrt_llm.llmapi.llm import BaseLLM
    from tensorrt_llm.llmapi.mm_encoder import MultimodalEncoder

    return [(MultimodalEncoder, "generate_async"), (MultimodalEncoder, "_preprocess"),
            (Qwen3VLInputProcessorBase, "build_disagg_prefill_multimodal_inputs"),
            (BaseLLM, "_preprocess"), (BaseWorker, "_enqueue_request"), (DecoderRunner, "_prepare_tp_inputs"),
            (PyTorchModelEngine, "_prepare_tp_inputs")]


def _raw(targets):
    return [vars(cls).get(attr) for cls, attr in targets]


def test_install_then_uninstall_restores_the_exact_originals(engine):
    """Every hook point is wrapped, get_original returns the engine's function, uninstall puts it back
    (MultimodalEncoder._preprocess is inherited from BaseLLM: wrapped on the subclass, deleted again)."""
    targets = _targets()
    before = _raw(targets)
    effective = [find_owner(cls, attr)[1] for cls, attr in targets]
    report = glue.install()
    assert glue.is_installed() and report["installed"] and report["mode"] == "carry"
    # every hook point of the stand-in is patched; the lori-ren fork's InputPreparer is not in it
    states = {h["target"].rpartition(":")[2]: h["state"] for h in report["hooks"]}
    assert states.pop("InputPreparer._prepare_tp_inputs") == "unavailable"
    assert set(states.values()) == {"patched"}
    assert report["slice_check"]["placed"] and len(report["slice_check"]["where"]) == 2
    for (cls, attr), original in zip(targets, effective, strict=True):
        assert getattr(vars(cls)[attr], WRAPPER_MARK) == f"{cls.__module__}:{cls.__qualname__}.{attr}"
        assert not hasattr(original, WRAPPER_MARK)
        assert glue.get_original((cls, attr)) is original
        assert glue.get_original(f"{cls.__module__}:{cls.__qualname__}.{attr}") is original
    glue.uninstall()
    assert not glue.is_installed()
    assert all(a is b for a, b in zip(_raw(targets), before, strict=True))


def test_install_twice_is_a_no_op(engine, caplog):
    """A second install logs "already installed" and leaves the same wrapper objects."""
    glue.install(policy="raise")
    targets = _targets()
    first = _raw(targets)
    with caplog.at_level(logging.INFO, logger="mm_handoff.trtllm"):
        report = glue.install(policy="fallback")
    assert "already installed" in caplog.text
    assert report["policy"] == "raise"
    assert all(a is b for a, b in zip(_raw(targets), first, strict=True))
    assert all(w.__wrapped__ is glue.get_original(t) for w, t in zip(first, targets, strict=True))
    assert all(not hasattr(w.__wrapped__, WRAPPER_MARK) for w in first)


def test_concurrent_installs_patch_once(engine):
    """Eight threads racing to install leave one layer of wrappers."""
    targets = _targets()
    threads = [threading.Thread(target=glue.install) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (cls, attr), wrapper in zip(targets, _raw(targets), strict=True):
        assert not hasattr(wrapper.__wrapped__, WRAPPER_MARK), f"{cls.__name__}.{attr} wrapped twice"


def test_uninstall_without_install_is_harmless(engine, caplog):
    """Nothing installed: uninstall logs and changes nothing."""
    targets = _targets()
    before = _raw(targets)
    with caplog.at_level(logging.INFO, logger="mm_handoff.trtllm"):
        glue.uninstall()
        glue.uninstall()
    assert "not installed" in caplog.text
    assert all(a is b for a, b in zip(_raw(targets), before, strict=True))


def test_inherited_method_is_deleted_not_set_on_uninstall(engine):
    """A hook inherited from a base is wrapped on the subclass and deleted again on uninstall."""
    from tensorrt_llm.llmapi.llm import BaseLLM
    from tensorrt_llm.llmapi.mm_encoder import MultimodalEncoder

    del MultimodalEncoder.generate_async  # a release where the encoder does not override it
    base_fn = vars(BaseLLM)["generate_async"]
    glue.install()
    assert "generate_async" in vars(MultimodalEncoder)
    assert glue.get_original((MultimodalEncoder, "generate_async")) is base_fn
    assert vars(BaseLLM)["generate_async"] is base_fn
    glue.uninstall()
    assert "generate_async" not in vars(MultimodalEncoder) and "_preprocess" not in vars(MultimodalEncoder)
    assert MultimodalEncoder.generate_async is base_fn
    assert MultimodalEncoder._preprocess is vars(BaseLLM)["_preprocess"]


def test_foreign_wrapper_on_top_is_left_alone(deployment, caplog):
    """Someone wrapped BaseLLM._preprocess after install: uninstall warns, keeps that layer, and ours
    stays in place switched off (a tampered request then passes unchecked)."""
    from tensorrt_llm.llmapi.llm import BaseLLM

    glue.install()
    ours = vars(BaseLLM)["_preprocess"]

    def foreign(self, *args, **kwargs):
        return ours(self, *args, **kwargs)

    BaseLLM._preprocess = foreign
    with caplog.at_level(logging.WARNING, logger="mm_handoff.trtllm"):
        report = glue.uninstall()
    assert "wrapped again after install" in caplog.text
    assert vars(BaseLLM)["_preprocess"] is foreign
    assert report["left_in_place"] == ["tensorrt_llm.llmapi.llm:BaseLLM._preprocess"]
    from tensorrt_llm.llmapi.mm_encoder import MultimodalEncoder

    assert not hasattr(vars(MultimodalEncoder)["generate_async"], WRAPPER_MARK)  # the others were restored
    assert MultimodalEncoder._preprocess is foreign  # the encoder's own row is gone: it inherits again
    dep = deployment()
    from tensorrt_llm.sampling_params import SamplingParams

    enc = dep.encoder.generate_async(video_request()).result()
    enc.disaggregated_params.mrope_position_ids_handle["tensor_size"] = [3, 1, 1]
    # ours is switched off: the stock prefill runs and nothing is checked
    ids = dep.pd._preprocess({"prompt": PROMPT}, SamplingParams(), enc.disaggregated_params)[0]
    assert len(ids) < len(enc.prompt_token_ids)


def test_drifted_signature_refuses_naming_the_hook(engine):
    """A renamed parameter on a hook point: install refuses with one line naming it, touching nothing."""
    from tensorrt_llm.llmapi.llm import BaseLLM

    def _preprocess(self, prompt, sampling_params, disaggregated_params=None):
        return None

    BaseLLM._preprocess = _preprocess
    targets = _targets()
    before = _raw(targets)
    with pytest.raises(EngineNotSupportedError) as info:
        glue.install()
    message = str(info.value)
    # the first table row that reaches the drifted function: the encoder's, which inherits it from BaseLLM
    assert "tensorrt_llm.llmapi.mm_encoder:MultimodalEncoder._preprocess" in message and "\n" not in message
    assert "('prompt', 'sampling_params', 'disaggregated_params')" in message
    assert "('inputs', 'sampling_params', 'disaggregated_params')" in message
    assert not glue.is_installed()
    assert all(a is b for a, b in zip(_raw(targets), before, strict=True))


def test_renamed_required_method_refuses_naming_the_hook(engine):
    """The prefill method gone under both known names: install refuses naming the class and names."""
    from tensorrt_llm._torch.models.modeling_qwen3vl import Qwen3VLInputProcessorBase

    Qwen3VLInputProcessorBase.build_prefill_inputs = Qwen3VLInputProcessorBase.build_disagg_prefill_multimodal_inputs
    del Qwen3VLInputProcessorBase.build_disagg_prefill_multimodal_inputs
    pattern = "Qwen3VLInputProcessorBase.*build_disagg_prefill_multimodal_inputs"
    with pytest.raises(EngineNotSupportedError, match=pattern):
        glue.install()


def test_older_release_get_prompt_token_ids_is_refused(engine):
    """The get_prompt_token_ids era (ids, lengths, offsets; out-of-vocabulary pads; images only) is outside
    the gate: install refuses, naming the missing hook and that era, and patches nothing."""
    from tensorrt_llm._torch.models.modeling_qwen3vl import Qwen3VLInputProcessorBase

    cls = Qwen3VLInputProcessorBase
    cls.get_prompt_token_ids = cls.build_disagg_prefill_multimodal_inputs
    del cls.build_disagg_prefill_multimodal_inputs
    with pytest.raises(EngineNotSupportedError, match="build_disagg_prefill_multimodal_inputs.*get_prompt_token_ids"):
        glue.install()
    assert not glue.is_installed()


def test_a_registered_qwen3_5_wrapper_of_the_get_prompt_token_ids_era_is_refused(engine):
    """A registered family processor with get_prompt_token_ids and no prefill hook (the older Qwen3.5
    wrapper ``Qwen3_5InputProcessorBase``): install refuses naming the class and the era; nothing patched."""
    from tensorrt_llm.inputs import registry

    wrapper = type("Qwen3_5InputProcessorBase", (registry.BaseMultimodalInputProcessor,), {
        "__module__": "tensorrt_llm._torch.models.modeling_qwen3_5",
        "get_prompt_token_ids": lambda self, inputs, mm_handles: None})
    model_cls = type("Qwen3_5Model", (), {})
    table = registry.INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type
    table[model_cls] = wrapper
    targets = _targets()
    before = _raw(targets)
    try:
        pattern = "Qwen3_5InputProcessorBase has no build_disagg_prefill_multimodal_inputs but get_prompt_token_ids"
        with pytest.raises(EngineNotSupportedError, match=pattern):
            glue.install()
        assert not glue.is_installed() and _raw(targets) == before
        del table[model_cls]
        assert glue.install()["installed"]  # without it, install goes ahead
    finally:
        table.pop(model_cls, None)


def test_unsupported_version_refuses(engine):
    """A release outside the supported range is refused with the range in the message."""
    import tensorrt_llm

    tensorrt_llm.__version__ = "1.2.0rc0"  # the get_prompt_token_ids era: below what conformance verified
    with pytest.raises(EngineNotSupportedError, match=r"tensorrt_llm >= 1\.3\.0rc25, < 1\.5.*'1\.2\.0rc0'"):
        glue.install()


def test_upstream_carrier_installs_the_validator(engine):
    """DisaggregatedParams with a multimodal_layout field: mode=validate; every hook point is patched (admission
    validates the carried layout; the prefill hook only ever sees upstream's fallback for requests without it;
    slice and ingress checks stay), and the prefill row says so."""
    from tensorrt_llm.disaggregated_params import DisaggregatedParams

    DisaggregatedParams.__dataclass_fields__["multimodal_layout"] = None
    targets = _targets()
    before = dict(zip(targets, _raw(targets), strict=True))
    report = glue.install()
    assert report["installed"] and report["mode"] == "validate" and not report["standing_down"]
    assert report["upstream_fix_fields"] == ["multimodal_layout"]
    for cls, attr in targets:
        assert hasattr(vars(cls)[attr], WRAPPER_MARK), (cls, attr)
        assert glue.get_original((cls, attr)) is before[(cls, attr)] or attr == "_preprocess"
    rows = {h["target"].rpartition(":")[2]: h for h in report["hooks"]}
    prefill = rows["Qwen3VLInputProcessorBase.build_disagg_prefill_multimodal_inputs"]
    assert prefill["state"] == "patched" and "without multimodal_layout" in prefill["reason"]
    assert report["slice_check"]["placed"]


def test_engine_modules_imported_before_or_after_install(engine):
    """A class imported before install is patched in place; a module first imported after install (the
    executor's worker, which install does not import) defines a subclass that inherits the wrapper, and
    follows the original again after uninstall."""
    import sys

    from tensorrt_llm.llmapi.llm import BaseLLM  # before

    assert "tensorrt_llm.executor.worker" not in sys.modules
    glue.install()
    assert hasattr(vars(BaseLLM)["_preprocess"], WRAPPER_MARK)
    assert "tensorrt_llm.executor.worker" not in sys.modules  # install did not import it
    from tensorrt_llm.executor.base_worker import BaseWorker
    from tensorrt_llm.executor.worker import GenerationExecutorWorker  # after

    assert "_enqueue_request" not in vars(GenerationExecutorWorker)
    assert GenerationExecutorWorker._enqueue_request is vars(BaseWorker)["_enqueue_request"]
    assert getattr(GenerationExecutorWorker._enqueue_request, WRAPPER_MARK) == \
        "tensorrt_llm.executor.base_worker:BaseWorker._enqueue_request"
    glue.uninstall()
    assert GenerationExecutorWorker._enqueue_request is glue.get_original((BaseWorker, "_enqueue_request"))
    assert not hasattr(GenerationExecutorWorker._enqueue_request, WRAPPER_MARK)


def test_status_without_install_reports_found_hooks(engine):
    """status() probes without patching: every stand-in hook point is found."""
    report = glue.status()
    assert report["installed"] is False and report["tensorrt_llm"] == "1.3.0rc25"
    assert report["upstream_fix_detected"] is False and report["mode"] == "carry"
    assert {h["state"] for h in report["hooks"] if "InputPreparer" not in h["target"]} == {"found"}
    assert [(h["target"].rpartition(":")[2], h["wrapper"]) for h in report["hooks"]] == [
        ("MultimodalEncoder.generate_async", "_encoder.generate_async_wrapper"),
        ("MultimodalEncoder._preprocess", "_encoder.preprocess_wrapper"),
        ("MultimodalParams.to_handle", "_encoder.to_handle_wrapper"),
        ("Qwen3VLInputProcessorBase.build_disagg_prefill_multimodal_inputs", "_admission.prefill_wrapper"),
        ("BaseLLM._preprocess", "_admission.admission_wrapper"),
        ("BaseWorker._enqueue_request", "_worker.enqueue_request_wrapper"),
        ("InputPreparer._prepare_tp_inputs", "_worker.prepare_tp_inputs_wrapper"),
        ("DecoderRunner._prepare_tp_inputs", "_worker.prepare_tp_inputs_wrapper"),
        ("PyTorchModelEngine._prepare_tp_inputs", "_worker.prepare_tp_inputs_wrapper")]


def test_bad_policy_is_refused_before_touching_anything(engine):
    """An unknown policy is a HandoffError naming the choices."""
    with pytest.raises(HandoffError, match="raise"):
        glue.install(policy="sometimes")
    assert not glue.is_installed()
