"""Stand-in for ``tensorrt_llm/executor/proxy.py`` (``GenerationExecutorProxy``).

Upstream's proxy lives in the user process and talks over ZMQ IPC to MPI
executor workers. Here the worker is one ``multiprocessing`` **spawn** child
running ``worker.worker_main``; requests are pickled to it and responses come
back over a queue. Class-level patches applied in the parent are therefore
NOT present in the worker unless the worker imports the plugin itself.
Simplified: one worker, synchronous request/response.
"""

import multiprocessing
import pickle
import queue
import threading
from typing import Any, Dict

from .executor import GenerationExecutor
from .request import GenerationRequest
from .result import GenerationResult
from .utils import RequestError

_START_TIMEOUT_S = 120.0
_REQUEST_TIMEOUT_S = 300.0


class GenerationExecutorProxy(GenerationExecutor):
    def __init__(self, worker_kwargs: Dict[str, Any]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._request_queue = ctx.Queue()
        self._response_queue = ctx.Queue()
        self._process = ctx.Process(
            target=_worker_entry, args=(self._request_queue, self._response_queue, worker_kwargs), daemon=True
        )
        self._process.start()
        self._lock = threading.Lock()
        self._last_client_id = 0
        self._shutdown = False
        ready = self._get_response(_START_TIMEOUT_S)
        if not ready.get("ready"):
            self.shutdown()
            raise RequestError(ready.get("error", "worker failed to start"))

    def submit(self, request: GenerationRequest) -> GenerationResult:
        if self._shutdown:
            raise RuntimeError("executor is shut down")
        with self._lock:
            if request.id is None:
                self._last_client_id += 1
                request.set_id(self._last_client_id)
            result = GenerationResult(request, executor=self, disaggregated_params=request.disaggregated_params)
            self._request_queue.put(pickle.dumps(request))
            response = self._get_response(_REQUEST_TIMEOUT_S)
        result._handle_response(response)
        return result

    def _get_response(self, timeout_s: float) -> Dict[str, Any]:
        """Wait for the worker's answer; a dead worker is reported instead of waited on."""
        waited = 0.0
        while True:
            try:
                return self._response_queue.get(timeout=0.5)
            except queue.Empty:
                waited += 0.5
                if not self._process.is_alive():
                    return {"error": f"executor worker exited with code {self._process.exitcode}"}
                if waited >= timeout_s:
                    return {"error": "timed out waiting for the executor worker"}

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._request_queue.put(None)
            self._process.join(timeout=30)
        finally:
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(timeout=5)

    def is_shutdown(self) -> bool:
        return self._shutdown


def _worker_entry(request_queue, response_queue, worker_kwargs) -> None:
    from .worker import worker_main

    worker_main(request_queue, response_queue, worker_kwargs)
