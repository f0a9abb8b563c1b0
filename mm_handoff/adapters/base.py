"""The adapter protocol: everything mm-handoff calls on a family adapter, in one place.

An adapter knows one family's ids and processor convention. It turns the encoder's expanded ids
into a :class:`~mm_handoff.layout.HandoffLayout`, rebuilds the exact aggregated ids on the prefill
side from the un-expanded prompt + grids + video metadata, computes mRoPE ids, checks that a raw
prompt is the one a layout was expanded from, and says what the encoder must ship (deepstack
levels, handle row width). A subclass must set the attributes and implement the three abstract
methods; the rest has working defaults.

Adapters are built by factories registered in :mod:`mm_handoff.registry` (third-party ones through
the ``mm_handoff.adapters`` entry-point group), called as
``factory(*, tokenizer=None, config=None, convention=None)``; a factory without ``convention`` works
too (:func:`mm_handoff.registry.build_adapter`).
"""

from __future__ import annotations

import abc
from typing import Optional, Sequence

import numpy as np

from ..checks import check_token_ids
from ..errors import GridMismatchError
from ..layout import HandoffLayout, readonly_ids
from ..spec import TokenSpec, item_lengths, normalize_grids

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

    def check_prompt(self, layout: HandoffLayout, prompt_token_ids, *, request_id=None) -> None:
        """Raise unless the un-expanded ``prompt_token_ids`` is the prompt ``layout`` was expanded from.

        The default checks what holds for any family: one placeholder per item, in item order, and
        the text before the first item and after the last one. Families override it to check every
        text segment (see :class:`~mm_handoff.adapters.qwen_layout.QwenLayoutAdapter`).
        """
        spec = self.spec
        raw = readonly_ids(prompt_token_ids, "prompt_token_ids")
        places = np.flatnonzero((raw == spec.image_pad) | (raw == spec.video_pad))
        kinds = ["image" if raw[p] == spec.image_pad else "video" for p in places.tolist()]
        if kinds != [item.modality for item in layout.items]:
            raise GridMismatchError("prompt placeholders", [i.modality for i in layout.items], kinds,
                                    request_id=request_id, hint="the prompt is not the one the encoder expanded")
        if not layout.items:
            check_token_ids(layout.token_ids, raw, request_id=request_id)
            return
        first, last = layout.items[0].runs[0].offset, layout.items[-1].runs[-1].end
        head = raw[:int(places[0])]
        tail = raw[int(places[-1]) + 1:]
        check_token_ids(layout.token_ids[:min(len(head), first)], head[:first], request_id=request_id,
                        field="prompt text before the first item")
        ids_tail = layout.token_ids[last:]
        check_token_ids(ids_tail[len(ids_tail) - min(len(tail), len(ids_tail)):],
                        tail[len(tail) - min(len(tail), len(ids_tail)):], request_id=request_id,
                        field="prompt text after the last item")

    def stock_token_ids(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                        request_id=None) -> np.ndarray:
        """What a stock prefill that ignores the layout builds: each placeholder becomes one pad run.

        This is TensorRT-LLM's ``build_disagg_prefill_multimodal_inputs`` layout (no timestamps, no
        per-group markers); the demo, the CLI and the tests use it to show what goes wrong.
        """
        ids = readonly_ids(prompt_token_ids, "prompt_token_ids")
        spec = self.spec
        counts = iter(item_lengths(normalize_grids(image_grid_thw, "image_grid_thw"), spec.merge_size))
        vcounts = iter(item_lengths(normalize_grids(video_grid_thw, "video_grid_thw"), spec.merge_size))
        reps = np.ones(len(ids), dtype=np.int64)
        try:
            for p in np.flatnonzero(ids == spec.image_pad).tolist():
                reps[p] = next(counts)
            for p in np.flatnonzero(ids == spec.video_pad).tolist():
                reps[p] = next(vcounts)
        except StopIteration:
            raise GridMismatchError("placeholders", "one grid per placeholder", "more placeholders than grids",
                                    request_id=request_id) from None
        result = np.repeat(ids, reps).astype(np.int32)
        result.flags.writeable = False
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}(family={self.family!r}, convention={self.convention!r})"
