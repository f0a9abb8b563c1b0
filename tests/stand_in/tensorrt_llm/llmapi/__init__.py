"""Stand-in for ``tensorrt_llm/llmapi/__init__.py`` (lazy, to keep imports light)."""


def __getattr__(name):
    if name in ("LLM", "BaseLLM", "RequestOutput", "PreprocessedInputs"):
        from . import llm

        return getattr(llm, name)
    if name == "MultimodalEncoder":
        from .mm_encoder import MultimodalEncoder

        return MultimodalEncoder
    raise AttributeError(name)
