"""Checks on token ids alone, no layout needed: the floor of the checking room (:mod:`mm_handoff.checks`).

Two id sequences equal (the first difference named, with the tokens around it), one placeholder per
item before an engine expands a prompt, and a prompt's pads vs the encoder's rows. The accept step
compares a request's own prompt through them, and the room re-exports them: the engine glue calls
them as ``mm_handoff.checks`` names. Each failure is a typed :class:`~mm_handoff.errors.HandoffError`.
"""

from __future__ import annotations

import numpy as np

from .errors import EmbeddingCountError, HandoffError, TokenMismatchError, typed_failures
from .limits import resolve_limits
from .shapes import read_count
from .spec import TokenSpec
from .tokens import readonly_ids

__all__ = ["first_difference", "check_token_ids", "check_placeholders", "check_prompt_pads", "STOCK_HINT"]

#: the likely cause when the prefill side has fewer ids (or runs) than the encoder
STOCK_HINT = ("the prefill side likely rebuilt the prompt from text (one pad run per item, no timestamps); "
              "ship the encoder's layout or rebuild it with the family adapter")


def first_difference(expected_ids, actual_ids, *, field: str = "token_ids", limits=None) -> int | None:
    """The first index where two id sequences differ (the shorter length if one is a prefix); None if equal."""
    most = resolve_limits(limits).max_prompt_len
    a = readonly_ids(expected_ids, field, max_len=most)
    b = readonly_ids(actual_ids, field, max_len=most)
    if a.shape == b.shape and np.array_equal(a, b):
        return None
    n = min(a.shape[0], b.shape[0])
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


@typed_failures("token_ids")
def check_token_ids(expected_ids, actual_ids, *, request_id=None, field: str = "prompt_token_ids",
                    context: int = 3, limits=None) -> None:
    """Token ids equal; otherwise name the first differing index and the tokens around it."""
    most = resolve_limits(limits).max_prompt_len
    a = readonly_ids(expected_ids, field, max_len=most)
    b = readonly_ids(actual_ids, field, max_len=most)
    index = first_difference(a, b, field=field, limits=limits)
    if index is None:
        return
    lo = max(0, index - context)
    raise TokenMismatchError(f"{field} (length)" if a.shape != b.shape else field,
                             f"{a.shape[0]} ids", f"{b.shape[0]} ids", index=index,
                             expected_context=a[lo:index + context + 1].tolist(),
                             actual_context=b[lo:index + context + 1].tolist(),
                             request_id=request_id,
                             hint=STOCK_HINT if a.shape[0] > b.shape[0] else None)


@typed_failures("prompt_token_ids", EmbeddingCountError)
def check_prompt_pads(prompt_token_ids, spec: TokenSpec, rows: int, *, request_id=None, limits=None) -> None:
    """Without a layout: the image/video pads in a prompt are as many as the encoder's embedding rows."""
    rows = read_count(rows, "rows", request_id, EmbeddingCountError)
    ids = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=resolve_limits(limits).max_prompt_len)
    found = int(np.count_nonzero((ids == spec.image_pad) | (ids == spec.video_pad)))
    if found != rows:
        raise EmbeddingCountError("prompt_token_ids (image/video pads)", f"{rows} (rows of the encoder's embeddings)",
                                  found, request_id=request_id)


@typed_failures("prompt_token_ids")
def check_placeholders(prompt_token_ids, spec: TokenSpec, *, images: int, videos: int,
                       field: str = "prompt_token_ids before expansion", hint: str | None = None,
                       request_id=None, limits=None) -> None:
    """Before an engine expands a prompt: one ``<|image_pad|>`` per image and one ``<|video_pad|>`` per
    video (a prompt that was already expanded fails at its first surplus pad)."""
    images = read_count(images, "images", request_id, HandoffError)
    videos = read_count(videos, "videos", request_id, HandoffError)
    raw = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=resolve_limits(limits).max_prompt_len)
    for name, pad, count in (("<|image_pad|>", spec.image_pad, images), ("<|video_pad|>", spec.video_pad, videos)):
        places = np.flatnonzero(raw == pad)
        if len(places) <= count:
            continue
        index = int(places[count])
        lo = max(0, index - 3)
        raise TokenMismatchError(
            field, f"{count} {name} (one per item)", f"{len(places)} {name}",
            index=index, expected_context=f"no {name} after the item's placeholder",
            actual_context=raw[lo:index + 4].tolist(), request_id=request_id, hint=hint)
