"""Stand-in for ``tensorrt_llm/_torch/pyexecutor/engine/runners/mm_encoder.py``.

Mirrors ``MultimodalEncoderRunner._forward_step`` at NVIDIA/TensorRT-LLM @
49bdb46aa07ed2d1f08925a3f4f3747e86188d77 in what it returns: per request with
``multimodal_embedding_lengths``, the embeddings split per item, plus the
request's ``mrope_config`` ids/deltas copied UNCHANGED (computed in the user
process on the aggregated layout). The encoder returns neither prompt ids nor
layout.

Simplified: no vision tower; the "embeddings" are zero arrays of shape
``(rows, hidden_size * (1 + len(deepstack_visual_indexes)))``.
"""

from typing import Any, Dict, List

import numpy as np


class MultimodalEncoderRunner:
    def __init__(self, embedding_width: int) -> None:
        self.embedding_width = int(embedding_width)

    def _forward_step(self, inputs: Dict[str, Any], scheduled_requests) -> Dict[str, Any]:
        embeddings: List[List[np.ndarray]] = []
        indices: List[int] = []
        lengths: List[List[int]] = []
        mrope_ids: List[Any] = []
        mrope_deltas: List[Any] = []
        for idx, request in enumerate(scheduled_requests.context_requests):
            data = request.py_multimodal_data or {}
            item_lengths = data.get("multimodal_embedding_lengths")
            if not item_lengths:
                continue
            indices.append(idx)
            lengths.append(list(item_lengths))
            embeddings.append([np.zeros((int(n), self.embedding_width), dtype=np.float16) for n in item_lengths])
            cfg = data.get("mrope_config") or {}
            mrope_ids.append(cfg.get("mrope_position_ids"))
            mrope_deltas.append(cfg.get("mrope_position_deltas"))
        return {
            "mm_embeddings": embeddings,
            "logits": None,
            "mm_embedding_request_indices": indices,
            "mm_embedding_lengths": lengths,
            "mrope_position_ids": mrope_ids,
            "mrope_position_deltas": mrope_deltas,
        }
