"""Stand-in for ``tensorrt_llm/executor/request.py`` (``GenerationRequest``)."""

from typing import Any, List, Optional

DEFAULT_REQUEST_PRIORITY = 0.5


class GenerationRequest:
    def __init__(
        self,
        prompt_token_ids: List[int],
        sampling_params: Any,
        query_token_ids: Optional[List[int]] = None,
        lora_request: Any = None,
        prompt_adapter_request: Any = None,
        streaming: bool = False,
        kv_cache_retention_config: Any = None,
        disaggregated_params: Any = None,
        multimodal_params: Any = None,
        scheduling_params: Any = None,
        conversation_params: Any = None,
        cache_salt: Optional[str] = None,
        arrival_time: Optional[float] = None,
        encoder_input_token_ids: Optional[List[int]] = None,
        priority: float = DEFAULT_REQUEST_PRIORITY,
        **kwargs: Any,
    ) -> None:
        self.prompt_token_ids = list(prompt_token_ids)
        self.sampling_params = sampling_params
        self.query_token_ids = query_token_ids
        self.lora_request = lora_request
        self.prompt_adapter_request = prompt_adapter_request
        self.streaming = streaming
        self.kv_cache_retention_config = kv_cache_retention_config
        self.disaggregated_params = disaggregated_params
        self.multimodal_params = multimodal_params
        self.scheduling_params = scheduling_params
        self.conversation_params = conversation_params
        self.cache_salt = cache_salt
        self.arrival_time = arrival_time
        self.encoder_input_token_ids = encoder_input_token_ids
        self.priority = priority
        self.id: Optional[int] = None

    def set_id(self, request_id: int) -> "GenerationRequest":
        self.id = request_id
        return self
