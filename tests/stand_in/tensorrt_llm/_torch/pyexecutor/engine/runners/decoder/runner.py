"""Stand-in for ``tensorrt_llm/_torch/pyexecutor/engine/runners/decoder/runner.py``.

Mirrors ``DecoderRunner._prepare_tp_inputs`` at NVIDIA/TensorRT-LLM @
0ea8c1debd2aae24c7fceaf5474f0c627114cc6a (same signature), reduced to the
context-request loop and the mRoPE position copy:

* context loop: ``prompt_tokens = request.get_tokens_range(0, begin_compute,
  end_compute)``, ``check_mm_embed_cumsum_if_needed``, ``MultimodalParams``
  from ``request.py_multimodal_data``; when ``use_mrope`` and the request has
  ``mrope_config.mrope_position_ids``, the UNCHECKED slice
  ``mrope_pos_ids[:, :, begin_compute : begin_compute + len(prompt_tokens)]``
  recorded as ``(start_idx, end_idx, segment)``; the delta goes to
  ``request.py_mrope_position_delta``; context-only requests re-register
  cloned ids/deltas through ``request.py_result.set_mrope_position``.
* the later copy: the scalar positions are broadcast into the ``(3, 1, N)``
  buffer, then for each span: ``ndim != 3`` -> ``RuntimeError``; a ``(..., 3)``
  layout is transposed; ``shape[:2] != (3, 1)`` -> ``RuntimeError``; then
  ``buf[:, :, start:end] = segment[:, :, : end - start]``. So a LONGER segment
  is silently cut, a SHORTER one raises (numpy's broadcast ``ValueError`` is
  re-raised as ``RuntimeError`` like torch's ``copy_``), and a length-1
  segment silently broadcasts.

Simplified: numpy host buffers instead of CUDA tensors; no generation /
extend / speculative / CUDA-graph / attention-metadata work; returns
``(inputs, None, runtime_draft_len)`` with ``inputs["position_ids"]``.
"""

from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from tensorrt_llm.inputs.multimodal import MultimodalParams, MultimodalRuntimeData, check_mm_embed_cumsum_if_needed
from tensorrt_llm.logger import logger


class DecoderRunner:
    def __init__(self, model: Any, *, use_mrope: bool, max_num_tokens: int = 8192) -> None:
        self.model = model
        self._config = SimpleNamespace(use_mrope=use_mrope, max_num_tokens=max_num_tokens, mm_encoder_cache_enabled=False)
        self.mrope_position_ids_cuda = np.zeros((3, 1, max_num_tokens), dtype=np.int64)
        self.position_ids_cuda = np.zeros((max_num_tokens,), dtype=np.int64)
        self.input_ids_cuda = np.zeros((max_num_tokens,), dtype=np.int64)

    def _prepare_tp_inputs(
        self,
        scheduled_requests,
        kv_cache_manager,
        attn_metadata,
        spec_metadata=None,
        new_tensors_device=None,
        cache_indirection_buffer=None,
        resource_manager=None,
        maybe_graph: bool = False,
        promoted_context_request_ids: frozenset = frozenset(),
        use_lora_graph: bool = False,
        *,
        enable_spec_decode: bool,
        runtime_draft_len: int,
        is_dummy: bool,
    ) -> Tuple[Dict[str, Any], Optional[Any], int]:
        """Prepare model inputs (context requests only in the stand-in)."""
        _use_mrope = self._config.use_mrope
        input_ids: List[int] = []
        position_ids: List[int] = []
        multimodal_params_list: List[MultimodalParams] = []
        mrope_position_ids: List[Tuple[int, int, np.ndarray]] = []

        for request in scheduled_requests.context_requests:
            begin_compute = request.context_current_position
            end_compute = begin_compute + request.context_chunk_size
            prompt_tokens = request.get_tokens_range(0, begin_compute, end_compute)
            position_ids.extend(range(begin_compute, begin_compute + len(prompt_tokens)))
            context_start_idx = len(input_ids)
            input_ids.extend(prompt_tokens)
            request.cached_tokens = begin_compute

            check_mm_embed_cumsum_if_needed(
                request.py_multimodal_data,
                begin_compute=begin_compute,
                end_compute=end_compute,
                prompt_len=request.get_num_tokens(0),
            )
            mm_data = request.py_multimodal_data or {}
            cumsum = mm_data.get("multimodal_embed_mask_cumsum")
            runtime = None
            if cumsum is not None:
                runtime = MultimodalRuntimeData(
                    embed_mask_cumsum=cumsum, past_seen_token_num=begin_compute, chunk_end_pos=end_compute
                )
            multimodal_params = MultimodalParams(
                multimodal_data=request.py_multimodal_data,
                multimodal_runtime=runtime,
                input_ids_start_offset=context_start_idx,
            )
            if multimodal_params.has_content():
                multimodal_params.to_device(
                    "multimodal_data",
                    "cuda",
                    pin_memory=True,
                    target_keywords=getattr(self.model, "multimodal_data_device_paths", None),
                )
                if _use_mrope:
                    mrope_config = multimodal_params.multimodal_data.get("mrope_config") or {}
                    mrope_pos_ids = mrope_config.get("mrope_position_ids")
                    if mrope_pos_ids is not None:
                        # No check of mrope_pos_ids.shape[-1] against the prompt length.
                        ctx_mrope_position_ids = mrope_pos_ids[:, :, begin_compute : begin_compute + len(prompt_tokens)]
                        mrope_position_ids.append(
                            (len(position_ids) - len(prompt_tokens), len(position_ids), ctx_mrope_position_ids)
                        )
                    mrope_position_delta = mrope_config.get("mrope_position_deltas")
                    if mrope_position_delta is not None:
                        request.py_mrope_position_delta = mrope_position_delta
                        if request.py_seq_slot is not None:
                            request.py_mrope_delta_cache_slot = request.py_seq_slot
                request.py_multimodal_data = multimodal_params.multimodal_data
                multimodal_params_list.append(multimodal_params)
                if request.is_context_only_request and _use_mrope and "mrope_config" in multimodal_params.multimodal_data:
                    cfg = multimodal_params.multimodal_data["mrope_config"]
                    ids, deltas = cfg.get("mrope_position_ids"), cfg.get("mrope_position_deltas")
                    if ids is not None and deltas is not None:
                        request.py_result.set_mrope_position(np.array(ids, copy=True), np.array(deltas, copy=True))
            request.py_batch_idx = request.py_seq_slot

        total_num_tokens = len(position_ids)
        if total_num_tokens > self._config.max_num_tokens:
            raise ValueError("total_num_tokens should be less than or equal to max_num_tokens")
        host_position_ids = np.asarray(position_ids, dtype=np.int64)
        self.input_ids_cuda[:total_num_tokens] = np.asarray(input_ids, dtype=np.int64)
        if _use_mrope:
            # Seed every span with the scalar positions, then overwrite MRoPE spans.
            self.mrope_position_ids_cuda[:, :, :total_num_tokens] = host_position_ids
            for start_idx, end_idx, segment in mrope_position_ids:
                segment = np.asarray(segment)
                if segment.ndim != 3:
                    raise RuntimeError(f"Expected 3D mrope_position_ids, got shape {tuple(segment.shape)}")
                if segment.shape[0] != 3 and segment.shape[-1] == 3:
                    logger.warning(f"Transposing unexpected mrope_position_ids shape from {tuple(segment.shape)}")
                    segment = np.ascontiguousarray(np.transpose(segment, (2, 1, 0)))
                if tuple(segment.shape[:2]) != (3, 1):
                    raise RuntimeError(
                        f"Unexpected mrope_position_ids shape {tuple(segment.shape)} for span {start_idx}:{end_idx}"
                    )
                try:
                    self.mrope_position_ids_cuda[:, :, start_idx:end_idx] = segment[:, :, : end_idx - start_idx]
                except ValueError as err:  # torch's copy_ raises RuntimeError here
                    raise RuntimeError(
                        f"The size of tensor a ({end_idx - start_idx}) must match the size of tensor b "
                        f"({min(segment.shape[-1], end_idx - start_idx)}) at non-singleton dimension 2"
                    ) from err
            final_position_ids = self.mrope_position_ids_cuda[:, :, :total_num_tokens].copy()
        else:
            self.position_ids_cuda[:total_num_tokens] = host_position_ids
            final_position_ids = self.position_ids_cuda[:total_num_tokens][None, :].copy()

        inputs = {
            "attn_metadata": attn_metadata,
            "input_ids": self.input_ids_cuda[:total_num_tokens].copy(),
            "position_ids": final_position_ids,
            "inputs_embeds": None,
            "multimodal_params": multimodal_params_list,
        }
        return inputs, None, runtime_draft_len
