"""Stand-in for ``tensorrt_llm/llmapi/__init__.py``: empty (import ``llmapi.llm`` / ``llmapi.mm_encoder``)."""
