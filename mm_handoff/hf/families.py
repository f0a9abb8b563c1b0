"""Family names as the HF helpers accept them: one normalisation for tokenizers, processors, models."""

from __future__ import annotations

from collections.abc import Iterable


def normalize_family(family: str, known: Iterable[str]) -> str:
    """``"Qwen3-VL"`` / ``"qwen3.5"`` style spellings to the registry's ``qwen3_vl`` / ``qwen3_5``."""
    fam = str(family).strip().lower().replace("-", "_").replace(".", "_")
    known = tuple(known)
    if fam not in known:
        raise ValueError(f"unknown family {family!r}; expected one of {known}")
    return fam
