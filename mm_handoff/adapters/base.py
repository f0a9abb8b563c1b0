"""The adapter protocol: what a family must provide for an exact handoff.

An adapter knows one family's ids and processor convention. It turns the encoder's expanded ids
into a :class:`~mm_handoff.layout.HandoffLayout`, rebuilds the exact aggregated ids on the prefill
side from the un-expanded prompt + grids + video metadata, computes mRoPE ids, and says what the
encoder must ship (deepstack levels, handle row width). Adapters are registered in
:mod:`mm_handoff.registry`; third-party ones through the ``mm_handoff.adapters`` entry-point group.
"""

from __future__ import annotations

import abc
from typing import Optional, Sequence

from ..layout import HandoffLayout
from ..spec import TokenSpec

__all__ = ["Adapter"]


class Adapter(abc.ABC):
    """Base class of family adapters. Instances are immutable after construction."""

    #: family name (also the registry key)
    family: str
    #: the family's ids and sizes
    spec: TokenSpec
    #: processor convention (:data:`mm_handoff.spec.CONVENTIONS`)
    convention: str
    #: deepstack feature levels the encoder must ship per visual row (0 without deepstack)
    deepstack_levels: int
    #: text hidden size, when known
    hidden_size: Optional[int]

    @property
    def tokenizer_digest(self) -> str:
        """Identity of every id this adapter relies on; differs across tokenizers."""
        return self.spec.digest()

    @property
    def handle_row_width(self) -> Optional[int]:
        """Width of one embedding-handle row: hidden * (1 + deepstack levels)."""
        if self.hidden_size is None:
            return None
        return self.hidden_size * (1 + self.deepstack_levels)

    @abc.abstractmethod
    def derive_layout(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, mrope: bool = True,
                      request_id=None) -> HandoffLayout:
        """Layout of the encoder-side expanded ids (the primary path)."""

    @abc.abstractmethod
    def rebuild_token_ids(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                          video_metadata: Optional[Sequence] = None, request_id=None):
        """The exact aggregated ids from the un-expanded prompt, grids and video metadata."""

    @abc.abstractmethod
    def mrope_positions(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, request_id=None):
        """``(positions (3, L) int64, delta)``, bitwise equal to HF ``get_rope_index``."""

    def rebuild_layout(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                       video_metadata: Optional[Sequence] = None, mrope: bool = True,
                       request_id=None) -> HandoffLayout:
        """Prefill-side fallback: rebuild the ids, then derive their layout."""
        ids = self.rebuild_token_ids(prompt_token_ids, image_grid_thw=image_grid_thw,
                                     video_grid_thw=video_grid_thw, video_metadata=video_metadata,
                                     request_id=request_id)
        return self.derive_layout(ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                                  mrope=mrope, request_id=request_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(family={self.family!r}, convention={self.convention!r})"
