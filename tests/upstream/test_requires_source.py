"""The one test collected without ``MM_HANDOFF_TRTLLM_SRC``: a skip that says how to run the suite."""

import os

import pytest

HOW = ("upstream conformance needs TensorRT-LLM's Python files: "
       "MM_HANDOFF_TRTLLM_SRC=<checkout or dir holding tensorrt_llm/>[:<another>...] make conformance")


def test_upstream_source_given():
    source = os.environ.get("MM_HANDOFF_TRTLLM_SRC")
    if not source:
        pytest.skip(HOW)
    assert os.path.isdir(os.path.join(source, "tensorrt_llm")), f"{source} holds no tensorrt_llm/"
