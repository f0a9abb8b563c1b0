"""The real vLLM engine (CPU build) for the vLLM glue tests; run by ``make test-vllm`` in ``.venv-vllm``.

One engine per family for the whole module (start-up is 1-2 minutes on 2 cores), started on a tiny
random checkpoint saved with the project's own builders. The image processor gets the video
processor's mean/std (0.5), as the released Qwen3-VL checkpoints have: vLLM 0.32 normalizes video
pixels with the image processor's values (``mm_device_do_normalize``), so differing values would
make the aggregated path differ from HF for reasons that are not the handoff's.

Without vLLM (the project's own ``.venv``) the directory's tests are not collected. (The folder is
not named ``vllm``: pytest puts ``tests/`` on ``sys.path``, and a ``tests/vllm`` folder would be
importable as a namespace package ``vllm`` where the real one is missing.)
"""

import gc
import importlib.util

import pytest


def _real_vllm() -> bool:
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None


#: the project's own venv has no vLLM: nothing here can run there (``make test-vllm`` runs it)
collect_ignore_glob = [] if _real_vllm() else ["test_*.py"]

FAMILIES = ("qwen3_vl", "qwen3_5")


@pytest.fixture(scope="module", params=FAMILIES)
def engine(request, tmp_path_factory):
    """``(llm, model, processor, adapter, family)`` for one family; the engine is shut down afterwards."""
    from mm_handoff.vllm.demo import save_tiny_checkpoint, start_engine

    family = request.param
    directory = tmp_path_factory.mktemp(f"tiny_{family}")
    model, processor, adapter = save_tiny_checkpoint(family, directory)
    llm = start_engine(directory, family, videos=2, images=1)
    yield llm, model, processor, adapter, family
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()
