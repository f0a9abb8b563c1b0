"""The Hugging Face reference E/PD engine on CPU: the parity oracle for the handoff, in one import.

One request runs through :func:`encode` (the E side: processor, vision tower, layout), :func:`handoff`
(the wire form after a JSON round trip, plus the tensors), :func:`prefill_decode` /
:func:`pd_from_encoder` (the PD side in ``"epd"``, ``"epd-rebuild"`` or ``"epd-stock"`` mode) and
:func:`aggregated` (the plain HF model, the reference); :func:`run_three_modes` runs them all and reports.
The code lives in :mod:`.encode`, :mod:`.prefill`, :mod:`.aggregated` and :mod:`.report`.

torch and transformers are imported here; ``import mm_handoff`` never imports this module.
"""

from __future__ import annotations

from .aggregated import aggregated
from .encode import EncoderOutput, encode, handoff
from .prefill import DEFAULT_MAX_NEW_TOKENS, MODES, PDResult, pd_from_encoder, prefill_decode
from .report import default_request, load_family, run_three_modes

__all__ = [
    "MODES",
    "EncoderOutput",
    "PDResult",
    "encode",
    "handoff",
    "prefill_decode",
    "pd_from_encoder",
    "aggregated",
    "run_three_modes",
    "load_family",
    "default_request",
    "DEFAULT_MAX_NEW_TOKENS",
]
