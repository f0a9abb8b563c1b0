"""Stand-in for ``tensorrt_llm._torch`` (the PyTorch backend package); torch-free."""
