"""What a layout travels as, in plain values (:class:`WireContent`), and its fingerprint.

The codec (:mod:`mm_handoff.wire`) encodes and decodes these values; the layout builds them
(:meth:`~mm_handoff.layout.HandoffLayout.fingerprint` is :func:`checksum` of them). The items travel
as one header each over shared columns, so neither side builds per-item arrays: a 768-frame video's
384 runs are two columns, not 384 objects.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
import numpy as np

from .spec import TokenSpec

__all__ = ["WireContent", "checksum"]


@attrs.frozen
class WireContent:
    """Everything a payload carries, as plain values: the ids run-length encoded, the items as one
    header each (``(modality, grid_thw, runs, stamped)``) over shared columns (every run's offset and
    length; every stamped group's seconds and ``(start, end)`` span), item after item.

    :func:`decode` gives read-only arrays: int32 ``values``/``counts``, int64 ``offsets``/``lengths``
    and ``(k, 2)`` ``spans``, float64 ``seconds``; :func:`encode` takes any sequences.
    """

    family: str
    convention: str
    tokenizer_digest: str | None
    spec: TokenSpec
    values: Any
    counts: Any
    heads: tuple
    offsets: Any
    lengths: Any
    seconds: Any
    spans: Any
    mrope_position_delta: int | None
    checksum: str


def _bytes(column, dtype: str) -> bytes:
    arr = np.asarray(column)
    return (arr if arr.dtype == np.dtype(dtype) else arr.astype(dtype)).tobytes()


def checksum(content: WireContent) -> str:
    """The layout's fingerprint, from plain values: a sha256 of what travels (ids in their canonical
    run-length form, items with their runs, timestamps and spans, spec, family, convention, tokenizer
    digest, mRoPE delta). :meth:`HandoffLayout.fingerprint` is this function of the layout."""
    h = hashlib.sha256()  # hardware-accelerated on current CPUs: ~2x blake2b over the ~45 KB of 384 groups
    h.update(b"mm-handoff-layout/4\0")
    h.update(repr((content.family, content.convention, content.tokenizer_digest, content.spec.digest(),
                   content.mrope_position_delta, list(content.heads))).encode())
    # the ids' run-length form, every item's runs, then every stamped group's seconds and spans, one
    # column at a time (the headers above say where each item's part begins)
    h.update(_bytes(content.values, "<i4"))
    h.update(_bytes(content.counts, "<i4"))
    h.update(_bytes(content.offsets, "<i8"))
    h.update(_bytes(content.lengths, "<i8"))
    if len(content.seconds):
        h.update(_bytes(content.seconds, "<f8"))
        h.update(_bytes(content.spans, "<i8"))
    return h.hexdigest()[:32]
