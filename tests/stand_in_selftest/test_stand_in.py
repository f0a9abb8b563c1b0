"""Smoke tests of the TensorRT-LLM stand-in itself (tests/stand_in)."""

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

STAND_IN_DIR = Path(__file__).resolve().parent.parent / "stand_in"


@pytest.fixture
def stand_in(monkeypatch):
    """Put tests/stand_in on sys.path and return the helper module."""
    monkeypatch.syspath_prepend(str(STAND_IN_DIR))
    import stand_in_helpers

    return stand_in_helpers


def _context_request(prompt_ids, mrope_ids):
    from tensorrt_llm._torch.pyexecutor.llm_request import LlmRequest
    from tensorrt_llm.bindings import executor as tllm

    req = tllm.Request(client_id=1, input_token_ids=prompt_ids, max_tokens=4)
    req.py_multimodal_data = {
        "mrope_config": {
            "mrope_position_ids": mrope_ids,
            "mrope_position_deltas": np.asarray([[-5]], dtype=np.int32),
        }
    }
    return LlmRequest(request_id=1, executor_request=req)


def _run_fresh(code, **env):
    import subprocess
    import sys

    full_env = dict(os.environ, **env)
    full_env["PYTHONPATH"] = os.pathsep.join([str(STAND_IN_DIR), full_env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, check=True).stdout


def test_imports_without_torch_and_zoo_is_lazy(stand_in):
    """The whole stand-in imports with numpy only; the model zoo loads lazily."""
    out = _run_fresh(
        "import sys, tensorrt_llm, tensorrt_llm._torch.models, tensorrt_llm.llmapi.llm, "
        "tensorrt_llm.llmapi.mm_encoder, tensorrt_llm.executor.proxy;"
        "print(tensorrt_llm.__version__, 'torch' in sys.modules,"
        " any('modeling_qwen3vl' in m for m in sys.modules))"
    )
    assert out.split() == ["1.3.0rc25", "False", "False"]


def test_cosmos3_variants(stand_in):
    """Default mirrors 1c58b17 (base class registered); the issue-20138 variant registers a subclass."""
    code = (
        "from tensorrt_llm._torch.models import modeling_cosmos3 as m;"
        "from tensorrt_llm.inputs.registry import INPUT_PROCESSOR_REGISTRY as R;"
        "c = R._input_processors_cls_by_model_type[m.Cosmos3Model];"
        "print(c.__name__, getattr(c, 'support_mm_disagg', False), c._registered_model_type)"
    )
    assert _run_fresh(code).split() == ["Qwen3VLInputProcessorBase", "True", "cosmos3"]
    out = _run_fresh(code, TLLM_STAND_IN_COSMOS3_VARIANT="issue-20138").split()
    assert out == ["Cosmos3InputProcessor", "True", "cosmos3"]


def test_stock_single_run_rebuild_matches_upstream_unit_test(stand_in):
    """Upstream's own unit test (``tests/unittest/_torch/multimodal/test_qwen3vl_disagg_prompt.py``
    @ 07c5ac45126f006812dcae04b24216db1a64c84c), first case: [11, VS, VIDEO, VE, 12] + a (3, 16) handle."""
    from tensorrt_llm._torch.models.modeling_qwen3vl import Qwen3VLInputProcessorBase

    vs, ve, video = stand_in.VISION_START, stand_in.VISION_END, stand_in.VIDEO_PAD
    proc = object.__new__(Qwen3VLInputProcessorBase)
    proc._tokenizer = lambda text, return_tensors=None: SimpleNamespace(input_ids=[[11, vs, video, ve, 12]])
    proc._config = stand_in.make_qwen3vl_config(hidden_size=4, deepstack_visual_indexes=(0, 1, 2))

    out = proc.build_disagg_prefill_multimodal_inputs({"prompt": "ignored"}, [{"tensor_size": [3, 16]}])

    assert out.prompt_token_ids == [11, vs, video, video, video, ve, 12]
    assert out.multimodal_lengths == [4]
    assert out.multimodal_positions == [1]
    assert out.multimodal_embedding_lengths == [3]
    assert out.multimodal_item_run_cu_offsets == [0, 1]
    assert out.multimodal_run_positions == [1]
    assert out.multimodal_run_lengths == [4]
    assert out.special_token_offsets == [0]
    assert out.item_types == [1]


def test_stock_rebuild_checks_handle_width_and_count(stand_in):
    """Width must be hidden_size * (1 + deepstack levels); one handle per placeholder."""
    from tensorrt_llm._torch.models.modeling_qwen3vl import Qwen3VLInputProcessorBase

    tok = stand_in.FakeTokenizer()
    proc = Qwen3VLInputProcessorBase("m", stand_in.make_qwen3vl_config(hidden_size=8), tok)
    prompt = {"prompt": "a<|vision_start|><|video_pad|><|vision_end|>b"}
    with pytest.raises(RuntimeError, match="hidden size 32"):
        proc.build_disagg_prefill_multimodal_inputs(prompt, [{"tensor_size": [3, 16]}])
    with pytest.raises(ValueError, match="placeholders=1, mm_handles=0"):
        proc.build_disagg_prefill_multimodal_inputs(prompt, [])


def _runner_inputs(request):
    """``DecoderRunner._prepare_tp_inputs`` on one context request (upstream's keyword-only arguments)."""
    from tensorrt_llm._torch.pyexecutor.engine.runners.decoder.runner import DecoderRunner
    from tensorrt_llm._torch.pyexecutor.llm_request import ScheduledRequests

    runner = DecoderRunner(model=None, use_mrope=True, max_num_tokens=64)
    return runner._prepare_tp_inputs(ScheduledRequests(context_requests=[request]), None, None,
                                     enable_spec_decode=False, runtime_draft_len=0, is_dummy=False)


def test_decoder_runner_slice_silently_truncates_longer_mrope(stand_in):
    """A (3, 1, L_agg) array with L_agg > prompt length is cut without any error."""
    prompt = list(range(10))
    longer = np.arange(3 * 16, dtype=np.int64).reshape(3, 1, 16)
    inputs, _, _ = _runner_inputs(_context_request(prompt, longer))

    assert inputs["position_ids"].shape == (3, 1, 10)
    np.testing.assert_array_equal(inputs["position_ids"], longer[:, :, :10])


def test_decoder_runner_copy_raises_on_shorter_mrope(stand_in):
    """A shorter array fails at the later copy (only rank and (3, 1) are checked before it)."""
    with pytest.raises(RuntimeError, match="must match the size"):
        _runner_inputs(_context_request(list(range(10)), np.zeros((3, 1, 7), dtype=np.int64)))


def test_model_engine_slice_silently_truncates_longer_mrope(stand_in):
    """The older PyTorchModelEngine slice behaves the same way."""
    from tensorrt_llm._torch.pyexecutor.llm_request import ScheduledRequests
    from tensorrt_llm._torch.pyexecutor.model_engine import PyTorchModelEngine

    longer = np.arange(3 * 12, dtype=np.int64).reshape(3, 1, 12)
    request = _context_request(list(range(5)), longer)
    inputs, _ = PyTorchModelEngine(use_mrope=True, max_num_tokens=32)._prepare_tp_inputs(
        ScheduledRequests(context_requests=[request]), None, None
    )
    np.testing.assert_array_equal(inputs["position_ids"], longer[:, :, :5])


def _video(stand_in, n_frames=4, size=64, fps=2.0):
    from tensorrt_llm.inputs.multimodal_data import VideoData

    frames = [np.full((size, size, 3), i, dtype=np.uint8) for i in range(n_frames)]
    return VideoData(frames=frames, metadata={"fps": fps, "frames_indices": list(range(n_frames))})


def _build_e_and_pd(stand_in, monkeypatch, tmp_name):
    from tensorrt_llm._torch.model_config import register_pretrained_config
    from tensorrt_llm.llmapi.llm import LLM
    from tensorrt_llm.llmapi.mm_encoder import MultimodalEncoder

    config = stand_in.make_qwen3vl_config()
    register_pretrained_config(tmp_name, config)
    tok = stand_in.FakeTokenizer()
    enc = MultimodalEncoder(model=tmp_name, tokenizer=tok)
    enc.input_processor._hf_expand = stand_in.make_hf_expand(tok, config)
    llm = LLM(model=tmp_name, tokenizer=tok)
    return enc, llm


def test_e_to_pd_handoff_reproduces_issue_20138_in_process(stand_in, monkeypatch):
    """Stock E -> PD: PD prompt is shorter than the encoder's; the mRoPE ids are sliced silently."""
    monkeypatch.setenv("TLLM_WORKER_USE_SINGLE_PROCESS", "1")
    from tensorrt_llm.sampling_params import SamplingParams

    enc, llm = _build_e_and_pd(stand_in, monkeypatch, "stand-in/qwen3vl-inproc")
    try:
        prompt = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe.<|im_end|>\n"
        mm = {"prompt": prompt, "multi_modal_data": {"video": [_video(stand_in)]}}
        enc_out = enc.generate_async(mm).result()
        dp = enc_out.disaggregated_params
        assert [h["tensor_size"] for h in dp.multimodal_embedding_handles] == [[8, 32]]
        assert dp.multimodal_embedding_handles[0]["method_key"] == 2
        l_agg = len(enc_out.prompt_token_ids)
        assert dp.mrope_position_ids_handle["tensor_size"] == [3, 1, l_agg]

        dp.request_type = "context_and_generation"
        out_b = llm.generate_async({"prompt": prompt}, sampling_params=SamplingParams(max_tokens=4),
                                   disaggregated_params=dp).result()
        l_pd = len(out_b.prompt_token_ids)
        # 2 groups; transformers>=5.10.1 convention keeps the outer pair, so each group adds
        # one timestamp ("<0.2 seconds>", "<1.2 seconds>": 5 chars and the " seconds" token here) and a vs/ve pair.
        assert l_agg - l_pd == 2 * 6 + 2 * 2
        assert out_b._stand_in_trace["context_position_ids"].shape == (3, 1, l_pd)
        assert out_b._stand_in_trace["worker_pid"] == os.getpid()
    finally:
        enc.shutdown()
        llm.shutdown()


def test_worker_runs_in_a_spawned_process_by_default(stand_in, monkeypatch):
    """Without TLLM_WORKER_USE_SINGLE_PROCESS the worker is another (spawned) interpreter."""
    monkeypatch.delenv("TLLM_WORKER_USE_SINGLE_PROCESS", raising=False)
    from tensorrt_llm._torch.model_config import register_pretrained_config
    from tensorrt_llm.llmapi.llm import LLM

    register_pretrained_config("stand-in/qwen3vl-spawn", stand_in.make_qwen3vl_config())
    llm = LLM(model="stand-in/qwen3vl-spawn", tokenizer=stand_in.FakeTokenizer())
    try:
        out = llm.generate_async("hello").result()
        assert out._stand_in_trace["worker_pid"] != os.getpid()
        assert len(out.outputs[0].token_ids) == 8
    finally:
        llm.shutdown()


def test_parent_patch_does_not_reach_spawned_worker(stand_in, monkeypatch):
    """A class patch on BaseWorker in the parent is absent in the spawned worker, present in-process."""
    from tensorrt_llm._torch.model_config import register_pretrained_config
    from tensorrt_llm.executor.base_worker import BaseWorker
    from tensorrt_llm.executor.utils import RequestError
    from tensorrt_llm.llmapi.llm import LLM

    def refuse(self, request, result_wait_queue=None):
        raise ValueError("patched in parent")

    monkeypatch.setattr(BaseWorker, "_enqueue_request", refuse)
    register_pretrained_config("stand-in/qwen3vl-patch", stand_in.make_qwen3vl_config())

    monkeypatch.delenv("TLLM_WORKER_USE_SINGLE_PROCESS", raising=False)
    spawned = LLM(model="stand-in/qwen3vl-patch", tokenizer=stand_in.FakeTokenizer())
    try:
        assert spawned.generate_async("hi").result().outputs[0].token_ids
    finally:
        spawned.shutdown()

    monkeypatch.setenv("TLLM_WORKER_USE_SINGLE_PROCESS", "1")
    local = LLM(model="stand-in/qwen3vl-patch", tokenizer=stand_in.FakeTokenizer())
    with pytest.raises(RequestError, match="patched in parent"):
        local.generate_async("hi").result()
