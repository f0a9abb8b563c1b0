"""Hugging Face transformers helpers and the reference E/PD engine on CPU, the parity oracle.

One request runs through :func:`.encode.encode` (the E side: processor, vision tower, layout),
:func:`.encode.handoff` (the wire form after a JSON round trip, plus the tensors),
:func:`.prefill.prefill_decode` / :func:`.prefill.pd_from_encoder` (the PD side in ``"epd"``,
``"epd-rebuild"`` or ``"epd-stock"`` mode) and :func:`.aggregated.aggregated` (the plain HF model, the
reference); :func:`.report.run_three_modes` runs them all and reports, and :mod:`.demo` is ``mm-handoff
demo``. Offline real tokenizers (:mod:`.tokenizers`), tiny random models (:mod:`.tiny`) and real
processors (:mod:`.processors`) serve them and the tests.

Nothing is imported here on purpose (``import mm_handoff`` never imports torch or transformers); the
submodules import them themselves.
"""
