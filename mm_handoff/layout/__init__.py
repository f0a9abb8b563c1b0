"""The contract: what an encoder hands a prefill side, as one frozen, validated value.

:class:`HandoffLayout` (:mod:`.contract`, built directly or by :func:`derive_layout` from the encoder's
expanded ids) holds the expanded token ids and the items (:mod:`.items`: each
image or video with its grid, pad runs, per-group timestamps and their text spans, stored as columns),
with the family's ids and sizes (:mod:`.spec`), mRoPE ids and delta (:mod:`.mrope`), its invariants
(:mod:`.invariants`, checked at construction), and its wire form and fingerprint (:mod:`.wire`).
:mod:`.tokens` keeps ids read-only and compares two id sequences; :mod:`.timestamp_text` reads the
``<t seconds>`` text; :mod:`.summary` describes a layout for people.
"""

from __future__ import annotations

from .contract import HandoffLayout, derive_layout
from .items import IMAGE, VIDEO, MultimodalItem, PlaceholderRun
from .spec import CONVENTIONS, PAD_ONLY, REPLACE_WRAPPER, TimestampVocab, TokenSpec

__all__ = ["HandoffLayout", "derive_layout", "MultimodalItem", "PlaceholderRun", "TokenSpec", "TimestampVocab",
           "IMAGE", "VIDEO", "PAD_ONLY", "REPLACE_WRAPPER", "CONVENTIONS"]
