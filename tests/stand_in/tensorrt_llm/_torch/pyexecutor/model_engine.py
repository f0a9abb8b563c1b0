"""Stand-in for the OLDER ``tensorrt_llm/_torch/pyexecutor/model_engine.py``.

Mirrors ``PyTorchModelEngine._prepare_tp_inputs`` at NVIDIA/TensorRT-LLM @
1a0dc5f70054f66d892df6a964996fc5ead6f81e (signature ``(self,
scheduled_requests, kv_cache_manager, attn_metadata, spec_metadata=None,
new_tensors_device=None, cache_indirection_buffer=None)``), context loop
only: for a request with content, when ``use_mrope`` it does the UNCHECKED
``multimodal_data['mrope_config']['mrope_position_ids'][:, :,
begin_compute:begin_compute + len(prompt_tokens)]``; the segments are
concatenated and ``buf[:, :, :total] = cat[:, :, :total]`` copied, so a longer
array is silently cut and a shorter one fails at the copy. Returns
``(inputs, None)``. numpy host buffers instead of CUDA tensors.
"""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from tensorrt_llm.inputs.multimodal import MultimodalParams


class PyTorchModelEngine:
    def __init__(self, model: Any = None, *, use_mrope: bool = True, max_num_tokens: int = 8192) -> None:
        self.model = model
        self.use_mrope = use_mrope
        self.max_num_tokens = max_num_tokens
        self.mrope_position_ids_cuda = np.zeros((3, 1, max_num_tokens), dtype=np.int64)
        self.position_ids_cuda = np.zeros((max_num_tokens,), dtype=np.int64)

    def _prepare_tp_inputs(
        self,
        scheduled_requests,
        kv_cache_manager,
        attn_metadata,
        spec_metadata=None,
        new_tensors_device=None,
        cache_indirection_buffer=None,
    ) -> Tuple[Dict[str, Any], Optional[Any]]:
        input_ids: List[int] = []
        position_ids: List[int] = []
        multimodal_params_list: List[MultimodalParams] = []
        mrope_position_ids: List[np.ndarray] = []
        for request in scheduled_requests.context_requests:
            all_prompt_tokens = request.get_tokens(0)
            begin_compute = request.context_current_position
            end_compute = begin_compute + request.context_chunk_size
            prompt_tokens = all_prompt_tokens[begin_compute:end_compute]
            position_ids.extend(range(begin_compute, begin_compute + len(prompt_tokens)))
            input_ids.extend(prompt_tokens)
            request.cached_tokens = begin_compute
            multimodal_params = MultimodalParams(multimodal_data=request.py_multimodal_data)
            if multimodal_params.has_content():
                if self.use_mrope:
                    ctx_mrope_position_ids = multimodal_params.multimodal_data["mrope_config"]["mrope_position_ids"][
                        :, :, begin_compute : begin_compute + len(prompt_tokens)
                    ]
                    mrope_position_ids.append(ctx_mrope_position_ids)
                request.py_multimodal_data = multimodal_params.multimodal_data
                multimodal_params_list.append(multimodal_params)
            request.py_batch_idx = request.py_seq_slot

        total_num_tokens = len(position_ids)
        if self.use_mrope and mrope_position_ids:
            cat = np.concatenate([np.asarray(m) for m in mrope_position_ids], axis=-1)
            try:
                self.mrope_position_ids_cuda[:, :, :total_num_tokens] = cat[:, :, :total_num_tokens]
            except ValueError as err:
                raise RuntimeError(
                    f"The size of tensor a ({total_num_tokens}) must match the size of tensor b "
                    f"({cat.shape[-1]}) at non-singleton dimension 2"
                ) from err
            final_position_ids = self.mrope_position_ids_cuda[:, :, :total_num_tokens].copy()
        else:
            self.position_ids_cuda[:total_num_tokens] = np.asarray(position_ids, dtype=np.int64)
            final_position_ids = self.position_ids_cuda[:total_num_tokens][None, :].copy()
        inputs = {
            "attn_metadata": attn_metadata,
            "input_ids": np.asarray(input_ids, dtype=np.int64),
            "position_ids": final_position_ids,
            "inputs_embeds": None,
            "multimodal_params": multimodal_params_list,
        }
        return inputs, None
