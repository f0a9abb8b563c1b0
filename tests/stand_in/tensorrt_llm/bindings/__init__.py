"""Stand-in for the C++ bindings package ``tensorrt_llm.bindings`` (pure Python)."""
