"""What reading upstream found (see tests/upstream for the same on upstream's code), modelled in the stand-in."""

import dataclasses
import io
import logging

import pytest
from trtllm_helpers import video_request

import mm_handoff.trtllm as glue
from mm_handoff.errors import HandoffError
from mm_handoff.trtllm.doctor import run_doctor


def test_stand_in_handles_serve_one_consumer(engine):
    import numpy as np
    from tensorrt_llm._torch.shared_tensor import SharedTensorContainer

    handle = SharedTensorContainer.from_tensor(np.arange(6).reshape(2, 3)).dump_to_dict()
    assert SharedTensorContainer.from_dict(handle).get_local_view().tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="unable to open shared memory object"):
        SharedTensorContainer.from_dict(handle)


def test_encoder_stamp_leaves_the_grid_handles_to_the_worker(deployment):
    """The worker's to_tensor is the one consumer of each grid handle; the stamp must not be another."""
    glue.install()
    dep = deployment()
    out = dep.encoder.generate_async(video_request()).result()
    assert glue.LAYOUT_KEY in out.disaggregated_params.multimodal_embedding_handles[0]
    assert out.disaggregated_params.multimodal_embedding_handles[0][glue.GRIDS_KEY]["video_grid_thw"]


def test_a_request_that_skips_the_stamp_is_named(deployment):
    glue.install(policy="raise")
    dep = deployment()
    pre = dep.encoder.preprocess(video_request())
    with pytest.raises(HandoffError, match="PreprocessedInputs"):
        dep.encoder.generate_async(pre)


def _params_class_with(field):
    from tensorrt_llm.disaggregated_params import DisaggregatedParams as Base

    @dataclasses.dataclass(slots=True, kw_only=True)
    class DisaggregatedParams(Base):
        pass

    DisaggregatedParams.__dataclass_fields__[field] = dataclasses.field(default=None)
    return DisaggregatedParams


def test_the_mode_reads_the_params_class_llm_py_uses(engine, monkeypatch):
    import tensorrt_llm.llmapi.llm as llm

    monkeypatch.setattr(llm, "DisaggregatedParams", _params_class_with("multimodal_layout"))
    report = glue.install()
    assert report["mode"] == "validate" and glue.is_installed() and not report["standing_down"]
    out = io.StringIO()
    run_doctor(None, out=out)
    assert "mode          validate: upstream carries the layout" in out.getvalue()


def test_a_runs_only_carrier_keeps_mm_handoff_and_says_so(engine, monkeypatch):
    import tensorrt_llm.llmapi.llm as llm

    monkeypatch.setattr(llm, "DisaggregatedParams", _params_class_with("multimodal_item_runs"))
    report = glue.install()
    assert report["installed"] and report["upstream_carriers"]["multimodal_item_runs"].startswith("present")
    out = io.StringIO()
    run_doctor(None, out=out)
    assert "carrier       DisaggregatedParams.multimodal_item_runs: present: item runs only" in out.getvalue()


def test_a_vanished_slice_hook_is_shown_unavailable(engine):
    from tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner import DecoderRunner

    del DecoderRunner._prepare_tp_inputs
    glue.install()
    row = next(r for r in glue.status()["hooks"] if r["target"].endswith("DecoderRunner._prepare_tp_inputs"))
    assert row["state"] == "unavailable" and row["reason"].startswith("slice check unavailable on this version")
    assert glue.status()["slice_check"]["where"] == [
        "tensorrt_llm._torch.pyexecutor.model_engine:PyTorchModelEngine._prepare_tp_inputs"]


def test_no_slice_anywhere_is_said_plainly(engine, caplog):
    """The slice moved somewhere the patch table does not know: install goes on (admission and ingress
    still check), logs an error, status() says placed=False, doctor prints NOT PLACED and exits 1."""
    from tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner import DecoderRunner
    from tensorrt_llm._torch.pyexecutor.model_engine import PyTorchModelEngine

    del DecoderRunner._prepare_tp_inputs
    del PyTorchModelEngine._prepare_tp_inputs
    with caplog.at_level(logging.ERROR, logger="mm_handoff.trtllm"):
        report = glue.install()
    assert glue.is_installed()
    assert "slice check could NOT be placed" in caplog.text
    assert report["slice_check"]["placed"] is False and "runners.decoder.prepare" in report["slice_check"]["reason"]
    out = io.StringIO()
    assert run_doctor(None, out=out) == 1
    assert "slice check   NOT PLACED: none of the places upstream has sliced" in out.getvalue()
