"""The real vLLM engine (CPU build) for the vLLM glue tests; run by ``make test-vllm`` in ``.venv-vllm``.

One engine per module (its ``family``: ``test_engine_<family>.py``), in this process (see ``IN_PROCESS``),
started on a tiny random checkpoint saved with the project's own builders. The image processor gets the video
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

#: the engine core and its worker in this process (vLLM's ``VLLM_ENABLE_V1_MULTIPROCESSING=0``; on CPU it also keeps
#: the single worker in process, the ``uni`` executor): each of the two other processes vLLM starts by default is a
#: fresh interpreter that imports torch, transformers and vLLM again, most of an engine's start on 2 cores. What
#: the tests check runs where it runs either way: vLLM's processor, its expansion and the installed check in the
#: front end (this process), the model wherever the engine core is. The server (test_server.py) and the offline
#: example (test_offline_example.py) keep vLLM's default processes.
IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


@pytest.fixture(scope="module")
def family():
    """The family a module's engine runs (each ``test_engine_<family>.py`` names its own)."""
    raise pytest.UsageError("a module that uses the engine names its family (a module-scoped `family` fixture)")


@pytest.fixture(scope="module")
def engine(family, tmp_path_factory):
    """``(llm, model, processor, adapter, family)`` for the module's family; the engine is shut down afterwards."""
    from mm_handoff.vllm.demo import save_tiny_checkpoint, start_engine

    directory = tmp_path_factory.mktemp(f"tiny_{family}")
    model, processor, adapter = save_tiny_checkpoint(family, directory)
    with pytest.MonkeyPatch.context() as env:  # set while this engine lives, not for the later subprocess tests
        for key, value in IN_PROCESS.items():
            env.setenv(key, value)
        llm = start_engine(directory, family, videos=2, images=1)
        yield llm, model, processor, adapter, family
        llm.llm_engine.engine_core.shutdown()
        del llm
        from vllm.distributed import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()  # the process group the in-process worker set up, before the next family's
        gc.collect()
