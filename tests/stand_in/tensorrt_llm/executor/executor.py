"""Stand-in for ``tensorrt_llm/executor/executor.py`` (``GenerationExecutor``).

``generate_async`` wraps its arguments into a ``GenerationRequest`` and calls
``submit``. ``create`` picks the worker placement like upstream's LLM API:
by default the worker runs in ANOTHER process (``GenerationExecutorProxy``,
started with ``multiprocessing`` spawn; upstream uses MpiPoolSession even for
one GPU); with ``TLLM_WORKER_USE_SINGLE_PROCESS=1`` it runs in this process
(``GenerationExecutorWorker``).
"""

import os
from typing import Any, List, Optional

from .request import DEFAULT_REQUEST_PRIORITY, GenerationRequest


class GenerationExecutor:
    def generate_async(
        self,
        prompt_token_ids: List[int],
        sampling_params: Any,
        query_token_ids: Optional[List[int]] = None,
        lora_request: Any = None,
        prompt_adapter_request: Any = None,
        streaming: bool = False,
        kv_cache_retention_config: Any = None,
        disaggregated_params: Any = None,
        trace_headers: Any = None,
        postproc_params: Any = None,
        multimodal_params: Any = None,
        scheduling_params: Any = None,
        conversation_params: Any = None,
        cache_salt: Optional[str] = None,
        arrival_time: Optional[float] = None,
        encoder_input_token_ids: Optional[List[int]] = None,
        priority: float = DEFAULT_REQUEST_PRIORITY,
    ):
        request = GenerationRequest(
            prompt_token_ids,
            sampling_params=sampling_params,
            query_token_ids=query_token_ids,
            lora_request=lora_request,
            prompt_adapter_request=prompt_adapter_request,
            streaming=streaming,
            kv_cache_retention_config=kv_cache_retention_config,
            disaggregated_params=disaggregated_params,
            multimodal_params=multimodal_params,
            scheduling_params=scheduling_params,
            conversation_params=conversation_params,
            cache_salt=cache_salt,
            arrival_time=arrival_time,
            encoder_input_token_ids=encoder_input_token_ids,
            priority=priority,
        )
        return self.submit(request)

    def shutdown(self) -> None:
        pass

    def is_shutdown(self) -> bool:
        return False

    @staticmethod
    def create(engine=None, executor_config=None, model_world_size: int = 1, mpi_session=None, reuse_mpi_comm: bool = False, is_llm_executor: Optional[bool] = None, hf_model_dir=None, tokenizer=None, llm_args=None, hf_model_config=None, **kwargs):
        worker_kwargs = dict(engine=engine, hf_model_dir=hf_model_dir, llm_args=llm_args, hf_model_config=hf_model_config)
        if os.getenv("TLLM_WORKER_USE_SINGLE_PROCESS", "0") == "1":
            from .worker import GenerationExecutorWorker

            return GenerationExecutorWorker(**worker_kwargs)
        from .proxy import GenerationExecutorProxy

        return GenerationExecutorProxy(worker_kwargs)
