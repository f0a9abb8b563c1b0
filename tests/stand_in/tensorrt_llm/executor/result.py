"""Stand-in for ``tensorrt_llm/executor/result.py`` (``GenerationResult``, ``CompletionOutput``).

Mirrors what the handoff reads (NVIDIA/TensorRT-LLM @
005bc848893f575ec14b45d6b13139360d67c790 / a678b91aafbeff265cd0b764abb59d7def624ac2):
``prompt_token_ids`` returns ``self._generation_request.prompt_token_ids``
(on the encoder that is the HF-expanded aggregated layout), and
``_handle_response`` builds ``self.disaggregated_params`` with
``multimodal_embedding_handles``, ``multimodal_hashes`` and the mRoPE handles
from an encoder response. Simplified: responses are plain dicts and arrive
synchronously; ``_stand_in_trace`` exposes worker-side facts for tests
(worker pid, context-phase position ids, mRoPE delta).
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..disaggregated_params import DisaggregatedParams
from .utils import RequestError


@dataclass
class CompletionOutput:
    index: int
    text: str = ""
    token_ids: List[int] = field(default_factory=list)


class GenerationResult:
    def __init__(self, generation_request, background_error_handler=None, executor=None, disaggregated_params=None, logprob_params=None) -> None:
        self._generation_request = generation_request
        self.request_id = generation_request.id
        self.disaggregated_params = disaggregated_params
        self.outputs: List[CompletionOutput] = [CompletionOutput(index=0)]
        self.finished = False
        self._streaming = False
        self._error: Optional[str] = None
        self._stand_in_trace: Dict[str, Any] = {}

    @property
    def prompt_token_ids(self) -> List[int]:
        return self._generation_request.prompt_token_ids

    def _handle_response(self, response: Dict[str, Any]) -> None:
        self.finished = True
        if response.get("error"):
            self._error = response["error"]
            return
        self.outputs[0].token_ids = list(response.get("output_token_ids") or [])
        self._stand_in_trace = dict(response.get("trace") or {})
        handles = response.get("mm_embedding_handles")
        if handles is not None:
            mm_params = self._generation_request.multimodal_params
            mm_input = getattr(mm_params, "multimodal_input", None)
            hashes = getattr(mm_input, "multimodal_hashes", None)
            if hashes is not None and len(hashes) != len(handles):
                hashes = None
            self.disaggregated_params = DisaggregatedParams(
                multimodal_embedding_handles=handles,
                multimodal_hashes=hashes,
                mrope_position_ids_handle=response.get("mrope_position_ids_handle"),
                mrope_position_deltas_handle=response.get("mrope_position_deltas_handle"),
            )
        elif response.get("mrope_position_ids_handle") is not None and self.disaggregated_params is not None:
            # Context-only P -> D: hand the re-registered mRoPE handles to D.
            self.disaggregated_params = DisaggregatedParams(
                request_type="generation_only",
                first_gen_tokens=self.outputs[0].token_ids,
                ctx_request_id=self.request_id,
                mrope_position_ids_handle=response.get("mrope_position_ids_handle"),
                mrope_position_deltas_handle=response.get("mrope_position_deltas_handle"),
            )

    def result(self, timeout: Optional[float] = None) -> "GenerationResult":
        if self._error is not None:
            raise RequestError(self._error)
        return self
