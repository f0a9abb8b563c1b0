"""``mm-handoff doctor``, the version gate, and the encoder's deferred stamping."""

import io

import pytest

import mm_handoff.trtllm as glue
from mm_handoff.glue.instrumentor import version_in_range
from mm_handoff.trtllm._encoder import attach_carried
from mm_handoff.trtllm._startup import PTH_LINE
from mm_handoff.trtllm.doctor import run_doctor, stale_startup_lines


def test_doctor_lists_every_hook_point_and_exits_zero(engine):
    """With the stand-in: versions, every hook point with module:qualname, upstream fix 'no', exit 0."""
    out = io.StringIO()
    assert run_doctor(None, out=out) == 0
    text = out.getvalue()
    assert "tensorrt_llm  1.3.0rc25" in text and "upstream fix  no" in text
    assert "[   found] tensorrt_llm.llmapi.llm:BaseLLM._preprocess  (_admission.admission_wrapper, user process, " \
           "required)" in text
    glue.install()
    out = io.StringIO()
    assert run_doctor(None, out=out) == 0
    assert "[ patched] tensorrt_llm._torch.models.modeling_qwen3vl:Qwen3VLInputProcessorBase." \
           "build_disagg_prefill_multimodal_inputs" in out.getvalue()


def test_doctor_flags_a_drifted_hook(engine):
    """A drifted hook is printed with its reason and the exit code is 1."""
    from tensorrt_llm.executor.base_worker import BaseWorker

    BaseWorker._enqueue_request = lambda self, req, result_wait_queue=None: None
    out = io.StringIO()
    assert run_doctor(None, out=out) == 1
    assert "[ drifted] tensorrt_llm.executor.base_worker:BaseWorker._enqueue_request" in out.getvalue()
    assert "takes ('req', 'result_wait_queue'), expected it to start with ('request',)" in out.getvalue()


@pytest.mark.parametrize("version, expected", [
    ("1.3.0rc25", True), ("1.2.0rc0", True), ("1.4.2", True), ("1.5.0rc1", False), ("1.5.0", False),
    ("1.1.9", False), ("1.2.0.dev3", False), ("1.3.0+cu129", True),
])
def test_version_gate_on_tensorrt_llm_tags(version, expected):
    """PEP 440 through packaging: pre-releases inside the range count, '< 1.5' excludes 1.5 pre-releases,
    a local build tag is inside; the requirement's name is optional."""
    assert version_in_range(version, "tensorrt_llm >= 1.2.0rc0, < 1.5") is expected
    assert version_in_range(version, ">= 1.2.0rc0, < 1.5") is expected


def test_unparsable_version_is_outside_every_range():
    assert version_in_range("not-a-version", "tensorrt_llm >= 1.2.0rc0, < 1.5") is False


def test_deferred_stamp_lands_when_the_response_arrives():
    """An encoder output without handles yet gets the stamp from its own _handle_response."""

    class Params:
        multimodal_embedding_handles = None

    class Output:
        request_id = 3
        disaggregated_params = None

        def _handle_response(self, response):
            params = Params()
            params.multimodal_embedding_handles = [{"tensor_size": [8, 32]}]
            self.disaggregated_params = params
            return "handled"

    out = Output()
    attach_carried(out, {glue.LAYOUT_KEY: {"format": "x"}})
    assert out._handle_response({"ok": True}) == "handled"
    assert out.disaggregated_params.multimodal_embedding_handles[0][glue.LAYOUT_KEY] == {"format": "x"}


def test_doctor_names_an_older_releases_startup_line(tmp_path, monkeypatch, engine):
    """A .pth line of an older release (its hook module has moved) is named, with the command that rewrites
    it, and doctor exits 1; this release's line and unrelated .pth files are left alone."""
    (tmp_path / "mm_handoff_autoinstall.pth").write_text(PTH_LINE + "\n")
    (tmp_path / "other.pth").write_text("import sys\n")
    assert stale_startup_lines([str(tmp_path)]) == []
    older = tmp_path / "older.pth"
    older.write_text(PTH_LINE.replace("mm_handoff.trtllm._startup", "mm_handoff._startup") + "\n")
    assert stale_startup_lines([str(tmp_path)]) == [str(older)]
    monkeypatch.setattr("mm_handoff.trtllm.doctor.stale_startup_lines", lambda: [str(older)])
    out = io.StringIO()
    assert run_doctor(out=out) == 1
    assert f"start-up line STALE: {older}" in out.getvalue() and "rewrite it: python -c" in out.getvalue()
