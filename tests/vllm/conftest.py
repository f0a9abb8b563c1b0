"""The real vLLM engine (CPU build) for the vLLM glue tests; run by ``make test-vllm`` in ``.venv-vllm``.

One engine per family for the whole module (start-up is 1-2 minutes on 2 cores), started on a tiny
random checkpoint saved with the project's own builders. The image processor gets the video
processor's mean/std (0.5), as the released Qwen3-VL checkpoints have: vLLM 0.32 normalizes video
pixels with the image processor's values (``mm_device_do_normalize``), so differing values would
make the aggregated path differ from HF for reasons that are not the handoff's.

Without vLLM (the project's own ``.venv``) the whole directory is skipped.
"""

import gc
import os

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here: run `make test-vllm`")

FAMILIES = ("qwen3_vl", "qwen3_5")
@pytest.fixture(scope="module", params=FAMILIES)
def engine(request, tmp_path_factory):
    """``(llm, model, processor, adapter, family)`` for one family; the engine is shut down afterwards."""
    from vllm import LLM

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["HF_HUB_OFFLINE"] = "1"
    from mm_handoff.vllm.demo import save_tiny_checkpoint

    family = request.param
    directory = tmp_path_factory.mktemp(f"tiny_{family}")
    model, processor, adapter = save_tiny_checkpoint(family, directory)
    try:
        llm = LLM(model=str(directory), dtype="float32", max_model_len=4096, enforce_eager=True, seed=0,
                  enable_mm_embeds=True, gpu_memory_utilization=0.5, skip_mm_profiling=True,
                  limit_mm_per_prompt={"image": {"count": 1, "width": 128, "height": 128},
                                       "video": {"count": 2, "num_frames": 16, "width": 160, "height": 128}})
    except Exception as exc:  # an engine that cannot start this family here is reported, not hidden
        if family == "qwen3_5":
            pytest.skip(f"vLLM's CPU build cannot start tiny Qwen3.5 here: {type(exc).__name__}: {exc}")
        raise
    yield llm, model, processor, adapter, family
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()
