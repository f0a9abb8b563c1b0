"""The engine suite (``vllm_engine/engine_cases.py``) on the Qwen3.5 engine. One module per family, so
that ``make test-vllm``'s workers (``--dist loadscope``: a module's tests in one worker, its engine
started once) start the two families' engines side by side."""

import pytest
from vllm_engine.engine_cases import *  # noqa: F403 (the suite's tests, collected in this module)


@pytest.fixture(scope="module")
def family():
    return "qwen3_5"
