"""Stand-in for ``tensorrt_llm/llmapi/mm_encoder.py``.

Mirrors NVIDIA/TensorRT-LLM @ 83ab45a50d169b08e29e9bf2f46fc66b3838cc37:
``MultimodalEncoder(_TorchLLM)`` sets ``args.mm_encoder_only = True`` (default
``max_num_tokens`` 16384) and its ``generate_async(inputs,
sampling_params=None)`` only calls ``super().generate_async``, so
``BaseLLM._preprocess`` (aggregated branch) runs in the encoder's user
process. The returned ``RequestOutput`` has ``prompt_token_ids`` = the
HF-expanded aggregated ids and ``disaggregated_params`` with one
``multimodal_embedding_handles`` dict per item (``tensor_size`` ``[rows,
width]``, ``method_key`` 2) plus the mRoPE handles (``tensor_size`` ``[3, 1, L]``
and ``[1, 1]``).
"""

from typing import Any, Optional

from ..sampling_params import SamplingParams
from .llm import RequestOutput, _TorchLLM


class MultimodalEncoder(_TorchLLM):
    def __init__(self, model, trust_remote_code: bool = False, tensor_parallel_size: int = 1, dtype: str = "auto", **kwargs: Any) -> None:
        if kwargs.get("max_num_tokens") is None:
            kwargs["max_num_tokens"] = 16384
        super().__init__(model, trust_remote_code=trust_remote_code, tensor_parallel_size=tensor_parallel_size, dtype=dtype, **kwargs)

    def _build_model(self) -> None:
        self.args.mm_encoder_only = True
        super()._build_model()

    def generate_async(self, inputs, sampling_params: Optional[SamplingParams] = None) -> RequestOutput:
        result = super().generate_async(inputs, sampling_params)
        return result
