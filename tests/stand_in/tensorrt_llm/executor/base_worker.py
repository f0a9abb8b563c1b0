"""Stand-in for ``tensorrt_llm/executor/base_worker.py``.

Mirrors ``BaseWorker._enqueue_request(self, request, result_wait_queue=None)``
of a recent NVIDIA/TensorRT-LLM version (``tensorrt_llm/executor/base_worker.py``
@ 7b437aaa73bf5a44b1102aee5c631074da763b8f):
prompt ids from ``request._prompt_token_ids_i32`` or
``list(request.prompt_token_ids)``; ``multimodal_input.to_binding(tllm)`` then
``multimodal_params.multimodal_input = None``; request type / context-phase
params from ``disaggregated_params``; builds the executor request; sets
``py_disaggregated_params``; ``multimodal_params.to_tensor("multimodal_data")``
(handles -> arrays) and ``executor_request.py_multimodal_data``; hands it to
``self.engine.enqueue_request``; any exception becomes ``RequestError``.
Runs in the rank-0 executor worker (another process unless
``TLLM_WORKER_USE_SINGLE_PROCESS=1``).

Simplified: no LoRA / prompt adapters / logits processors / max-token
deduction; the engine is the stand-in ``PyExecutor``.
"""

from typing import Any, Dict

from ..bindings import executor as tllm
from .executor import GenerationExecutor
from .request import GenerationRequest
from .result import GenerationResult
from .utils import RequestError


class BaseWorker(GenerationExecutor):
    def __init__(self, engine: Any = None, hf_model_dir: Any = None, llm_args: Any = None, hf_model_config: Any = None, **kwargs: Any) -> None:
        from .._torch.pyexecutor.py_executor import PyExecutor

        self.llm_args = llm_args
        self._backend = "pytorch"
        self._is_pytorch_backend = True
        self.rank = 0
        self.engine = engine if engine is not None else PyExecutor(hf_model_config, llm_args)
        self._results: Dict[int, GenerationResult] = {}
        self._client_id_to_request_id: Dict[int, int] = {}
        self._last_client_id = 0

    def _get_next_client_id(self) -> int:
        self._last_client_id += 1
        return self._last_client_id

    def _enqueue_request(self, request: GenerationRequest, result_wait_queue=None) -> int:
        i32_buf = getattr(request, "_prompt_token_ids_i32", None)
        prompt_token_ids = i32_buf if i32_buf is not None else list(request.prompt_token_ids)

        multimodal_input = None
        if request.multimodal_params is not None and request.multimodal_params.has_content():
            if request.multimodal_params.multimodal_input is not None:
                multimodal_input = request.multimodal_params.multimodal_input.to_binding(tllm)
            request.multimodal_params.multimodal_input = None

        context_phase_params = None
        request_type = tllm.RequestType.REQUEST_TYPE_CONTEXT_AND_GENERATION
        if request.disaggregated_params is not None:
            request_type = request.disaggregated_params.get_request_type()
            if request_type == tllm.RequestType.REQUEST_TYPE_GENERATION_ONLY:
                context_phase_params = request.disaggregated_params.get_context_phase_params()

        assert request.id is not None
        try:
            executor_request = tllm.Request(
                client_id=request.id,
                input_token_ids=prompt_token_ids,
                max_tokens=getattr(request.sampling_params, "max_tokens", None),
                multimodal_input=multimodal_input,
                multimodal_embedding=None,
                mrope_config=None,
                context_phase_params=context_phase_params,
                type=request_type,
            )
            if self._is_pytorch_backend and request.disaggregated_params is not None:
                executor_request.py_disaggregated_params = request.disaggregated_params
            if self._is_pytorch_backend and request.multimodal_params is not None:
                if request.multimodal_params.multimodal_data is not None:
                    # Handle dicts (incl. E->P embedding handles) -> arrays.
                    request.multimodal_params.to_tensor("multimodal_data")
                    executor_request.py_multimodal_data = request.multimodal_params.multimodal_data
            if request.query_token_ids is not None:
                return self.engine.enqueue_request(executor_request, request.query_token_ids, result_wait_queue=result_wait_queue)
            return self.engine.enqueue_request(executor_request, result_wait_queue=result_wait_queue)
        except Exception as e:
            raise RequestError(str(e)) from e

    def _run_request(self, request: GenerationRequest) -> Dict[str, Any]:
        """Worker side of one request: enqueue, run, and return the response dict."""
        try:
            req_id = self._enqueue_request(request)
            self._client_id_to_request_id[request.id] = req_id
            return self.engine.await_response(req_id)
        except Exception as e:
            return {"client_id": request.id, "error": f"{type(e).__name__}: {e}"}
