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

from .request import GenerationRequest


class GenerationExecutor:
    def generate_async(self, prompt_token_ids: List[int], sampling_params: Any, **kwargs: Any):
        """Upstream's keyword arguments are ``GenerationRequest``'s (``executor/request.py``)."""
        return self.submit(GenerationRequest(prompt_token_ids, sampling_params=sampling_params, **kwargs))

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
