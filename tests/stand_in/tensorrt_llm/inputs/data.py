"""Stand-in for ``tensorrt_llm/inputs/data.py``: prompt TypedDicts and ``prompt_inputs``."""

from typing import Any, Dict, List, TypedDict, Union


class TextPrompt(TypedDict, total=False):
    prompt: str
    multi_modal_data: Dict[str, Any]
    multi_modal_uuids: Dict[str, Any]
    multi_modal_embeddings: Dict[str, Any]
    mm_processor_kwargs: Dict[str, Any]
    query: str


class TokensPrompt(TypedDict, total=False):
    prompt_token_ids: List[int]
    multi_modal_data: Dict[str, Any]
    multi_modal_embeddings: Dict[str, Any]
    mm_processor_kwargs: Dict[str, Any]
    query_token_ids: List[int]


PromptInputs = Union[str, List[int], TextPrompt, TokensPrompt]


def prompt_inputs(inputs: PromptInputs) -> Union[TextPrompt, TokensPrompt]:
    if isinstance(inputs, str):
        return TextPrompt(prompt=inputs)
    if isinstance(inputs, list):
        return TokensPrompt(prompt_token_ids=inputs)
    if isinstance(inputs, dict):
        if "prompt" not in inputs and "prompt_token_ids" not in inputs:
            raise TypeError("inputs must contain 'prompt' or 'prompt_token_ids'")
        return inputs
    raise TypeError(f"Invalid type of inputs for llm.generate: {type(inputs)}")
