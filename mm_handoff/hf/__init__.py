"""Hugging Face transformers helpers: offline real tokenizers, tiny random models, real processors, and the
reference E/PD engine (:mod:`.engine`: :mod:`.encode`, :mod:`.prefill`, :mod:`.aggregated`, :mod:`.report`).

Nothing is imported here on purpose; import the submodules, which import transformers/torch themselves.
"""
