"""Hugging Face transformers helpers: offline real tokenizers, tiny random models, real processors.

Nothing is imported here on purpose; import the submodules (``mm_handoff.hf.tokenizers``,
``mm_handoff.hf.tiny``, ``mm_handoff.hf.processors``), which import transformers/torch lazily.
"""
