"""Stand-in for ``tensorrt_llm/_torch/pyexecutor/py_executor.py`` (the worker's engine).

Not a mirror of upstream's scheduler loop: ``enqueue_request`` runs the request
to completion at once. Decoder mode runs one context step through
``DecoderRunner._prepare_tp_inputs`` and then emits FAKE greedy tokens that are
a deterministic function of the prompt ids, the context position ids and the
mRoPE delta (so a layout or position mismatch changes the "output", as in
issue #20138). Encoder mode (``llm_args.mm_encoder_only``) runs
``MultimodalEncoderRunner._forward_step`` and the ``EarlyStopWithMMResult``
bookkeeping (``append_mm_embeddings`` / ``set_mrope_position``).
"""

import hashlib
import os
from typing import Any, Dict, Optional

import numpy as np

from tensorrt_llm._torch.shared_tensor import SharedTensorContainer

from .engine.runners.decoder.runner import DecoderRunner
from .engine.runners.mm_encoder import MultimodalEncoderRunner
from .llm_request import LlmRequest, ScheduledRequests


def _fake_tokens(prompt, positions: np.ndarray, delta: int, n: int):
    h = hashlib.sha256()
    h.update(np.asarray(prompt, dtype=np.int64).tobytes())
    h.update(np.asarray(positions, dtype=np.int64).tobytes())
    seed = h.digest()
    out = []
    for i in range(n):
        decode_pos = len(prompt) + i + int(delta)
        out.append(int.from_bytes(hashlib.sha256(seed + decode_pos.to_bytes(8, "little", signed=True)).digest()[:4], "little") % 32000)
    return out


class PyExecutor:
    def __init__(self, hf_model_config: Any, llm_args: Any) -> None:
        from tensorrt_llm._torch.models import get_model_architecture

        self.llm_args = llm_args
        self.kv_cache_transceiver = None
        self.model = None
        if hf_model_config is not None:
            try:
                model_cls, _ = get_model_architecture(hf_model_config)
                self.model = model_cls(hf_model_config)
            except RuntimeError:
                self.model = None
        self.mm_encoder_only = bool(getattr(llm_args, "mm_encoder_only", False))
        max_num_tokens = int(getattr(llm_args, "max_num_tokens", None) or 8192)
        if self.mm_encoder_only:
            text = hf_model_config.text_config
            levels = len(getattr(hf_model_config.vision_config, "deepstack_visual_indexes", []) or [])
            self.runner = MultimodalEncoderRunner(text.hidden_size * (1 + levels))
        else:
            use_mrope = self.model is not None and hasattr(hf_model_config, "vision_start_token_id")
            self.runner = DecoderRunner(self.model, use_mrope=use_mrope, max_num_tokens=max_num_tokens)
        self._next_request_id = 1
        self._responses: Dict[int, Dict[str, Any]] = {}

    def enqueue_request(self, request, query: Optional[Any] = None, result_wait_queue=None) -> int:
        req_id = self._next_request_id
        self._next_request_id += 1
        llm_request = LlmRequest(request_id=req_id, executor_request=request)
        scheduled = ScheduledRequests(context_requests=[llm_request])
        if self.mm_encoder_only:
            self._responses[req_id] = self._encoder_step(llm_request, scheduled)
        else:
            self._responses[req_id] = self._decoder_step(llm_request, scheduled)
        return req_id

    def await_response(self, req_id: int) -> Dict[str, Any]:
        return self._responses.pop(req_id)

    def _encoder_step(self, llm_request: LlmRequest, scheduled: ScheduledRequests) -> Dict[str, Any]:
        out = self.runner._forward_step({}, scheduled)
        response: Dict[str, Any] = {"client_id": llm_request.py_client_id, "output_token_ids": [], "trace": {"worker_pid": os.getpid()}}
        if out["mm_embedding_request_indices"]:
            llm_request.py_result.append_mm_embeddings(out["mm_embeddings"][0], out["mm_embedding_lengths"][0])
            llm_request.py_result.set_mrope_position(out["mrope_position_ids"][0], out["mrope_position_deltas"][0])
            response["mm_embedding_handles"] = [
                SharedTensorContainer.from_tensor(e, shape_only=True).dump_to_dict()
                for e in llm_request.py_result.mm_embeddings
            ]
            ids, deltas = llm_request.py_result.mrope_position_ids, llm_request.py_result.mrope_position_deltas
            if ids is not None and deltas is not None:
                response["mrope_position_ids_handle"] = SharedTensorContainer.from_tensor(ids).dump_to_dict()
                response["mrope_position_deltas_handle"] = SharedTensorContainer.from_tensor(deltas).dump_to_dict()
        return response

    def _decoder_step(self, llm_request: LlmRequest, scheduled: ScheduledRequests) -> Dict[str, Any]:
        inputs, _, _ = self.runner._prepare_tp_inputs(
            scheduled, None, None, enable_spec_decode=False, runtime_draft_len=0, is_dummy=False
        )
        if self.model is not None and hasattr(self.model, "select_multimodal_params"):
            self.model.select_multimodal_params(inputs["multimodal_params"], len(scheduled.context_requests))
        delta = llm_request.py_mrope_position_delta
        delta_value = int(np.asarray(delta).reshape(-1)[0]) if delta is not None else 0
        n = llm_request.py_max_new_tokens or 8
        if llm_request.is_context_only_request:
            n = 1
        tokens = _fake_tokens(llm_request.get_tokens(0), inputs["position_ids"], delta_value, n)
        response: Dict[str, Any] = {
            "client_id": llm_request.py_client_id,
            "output_token_ids": tokens,
            "trace": {
                "worker_pid": os.getpid(),
                "context_position_ids": np.asarray(inputs["position_ids"]),
                "mrope_position_delta": delta_value if delta is not None else None,
            },
        }
        if llm_request.is_context_only_request and llm_request.py_result.mrope_position_ids is not None:
            response["mrope_position_ids_handle"] = SharedTensorContainer.from_tensor(
                llm_request.py_result.mrope_position_ids
            ).dump_to_dict()
            response["mrope_position_deltas_handle"] = SharedTensorContainer.from_tensor(
                llm_request.py_result.mrope_position_deltas
            ).dump_to_dict()
        return response
