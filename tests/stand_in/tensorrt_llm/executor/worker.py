"""Stand-in for ``tensorrt_llm/executor/worker.py`` (``GenerationExecutorWorker``, ``worker_main``).

In-process placement (``TLLM_WORKER_USE_SINGLE_PROCESS=1``): ``submit``
pickles the request (as the IPC would), runs it through ``_enqueue_request``
and hands the response to the user-side ``GenerationResult``.
``worker_main`` is the entry point of the spawned worker process used by
``GenerationExecutorProxy``; like upstream it imports NO plugin: only
``sitecustomize`` / ``.pth`` files, or classes unpickled from the request,
can bring extra code into it.
"""

import pickle
from typing import Any, Dict

from .base_worker import BaseWorker
from .request import GenerationRequest
from .result import GenerationResult


class GenerationExecutorWorker(BaseWorker):
    def submit(self, request: GenerationRequest) -> GenerationResult:
        if request.id is None:
            request.set_id(self._get_next_client_id())
        result = GenerationResult(request, executor=self, disaggregated_params=request.disaggregated_params)
        self._results[request.id] = result
        wire_copy = pickle.loads(pickle.dumps(request))
        result._handle_response(self._run_request(wire_copy))
        return result


def worker_main(request_queue, response_queue, worker_kwargs: Dict[str, Any]) -> None:
    try:
        worker = BaseWorker(**worker_kwargs)
    except Exception as e:  # report start-up failure to the proxy
        response_queue.put({"error": f"worker start-up failed: {type(e).__name__}: {e}"})
        return
    response_queue.put({"ready": True})
    while True:
        payload = request_queue.get()
        if payload is None:
            break
        try:
            request = pickle.loads(payload)
        except Exception as e:
            response_queue.put({"error": f"unpickling failed: {type(e).__name__}: {e}"})
            continue
        response_queue.put(worker._run_request(request))
