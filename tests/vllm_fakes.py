"""What vLLM's wrapper reads of vLLM's own objects, for the glue's tests without vLLM (tests/glue, tests/vllm_glue)."""

import dataclasses
import types


@dataclasses.dataclass
class Inputs:
    """vLLM's processor inputs: the prompt and the per-request processor kwargs (where a carried layout rides)."""

    prompt: list
    hf_processor_mm_kwargs: dict


class Processor:
    """What the wrapper reads of vLLM's ``Qwen3VLMultiModalProcessor``."""

    info = types.SimpleNamespace(get_hf_config=lambda: "qwen3_vl", get_tokenizer=lambda: None,
                                 get_hf_processor=lambda: None)

    @classmethod
    def _expands_only_video_token(cls, hf_processor):
        return True
