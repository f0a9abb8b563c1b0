"""Bounds on what one request may claim, applied before any work proportional to the claim.

A handoff payload, a grid or a frame list is a few bytes that can describe gigabytes. Every entry
point that expands one (decoding a wire payload, rebuilding or stocking ids from grids, computing
mRoPE ids, reading video metadata) checks it against a :class:`Limits` first and raises a typed
error naming the field. The defaults admit the largest real request of the family with room to
spare, and bound one request's work to well under a second and about 100 MiB:

- ``max_prompt_len`` 1,048,576 ids: Qwen3-VL's longest context (256k native, 1M with its YaRN
  extension);
- ``max_runs`` 16,384 pad runs (images plus video temporal groups): 42 videos of 768 frames (384
  groups each), or 16k images;
- ``max_items`` 1,024 images and videos;
- ``max_payload_chars`` 16 MiB of wire payload: a 1M-id prompt whose ids never repeat encodes to
  about 5 MiB.

Raise them per call (``accept_layout(..., limits=Limits(max_prompt_len=...))``, ``from_wire``,
``derive_layout``, the adapters' ``limits=``) or for a whole process with ``MM_HANDOFF_LIMITS``,
e.g. ``MM_HANDOFF_LIMITS=max_prompt_len=2097152,max_runs=32768``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import attrs

from . import _env
from .errors import HandoffError

__all__ = ["Limits", "limits_from_env", "resolve_limits", "check_frame_total"]


#: the largest value a limit may take (a length any read or allocation can be asked for)
_MOST = 2**62


def _positive(instance, attribute, value) -> None:
    if type(value) is not int or not 1 <= value <= _MOST:
        raise HandoffError(f"limits.{attribute.name}", "an int in [1, 2**62]", value)


@attrs.frozen
class Limits:
    """Upper bounds on one request (see the module doc for what the defaults admit)."""

    #: ids in one prompt (expanded)
    max_prompt_len: int = attrs.field(default=1 << 20, validator=_positive)
    #: images and videos in one prompt
    max_items: int = attrs.field(default=1024, validator=_positive)
    #: pad runs in one prompt: one per image, one per video temporal group
    max_runs: int = attrs.field(default=1 << 14, validator=_positive)
    #: characters (or bytes) of one wire payload
    max_payload_chars: int = attrs.field(default=16 << 20, validator=_positive)
    #: frame indices listed in one request's video metadata, all videos together (two per temporal group)
    max_frames: int = attrs.field(default=1 << 15, validator=_positive)


def limits_from_env(environ=None) -> Limits:
    """:class:`Limits` with the overrides of ``MM_HANDOFF_LIMITS`` (``name=value,...``)."""
    text = (os.environ if environ is None else environ).get(_env.LIMITS, "").strip()
    if not text:
        return Limits()
    fields = {f.name for f in attrs.fields(Limits)}
    values = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in fields or not (value.strip().isascii() and value.strip().isdigit()):
            raise HandoffError(_env.LIMITS, f"name=value pairs with names in {sorted(fields)}", part)
        values[name] = int(value)
    try:
        return Limits(**values)
    except HandoffError as exc:  # a value out of range: named by the variable that set it
        raise HandoffError(_env.LIMITS, f"values in [1, 2**62] ({exc.field})", text) from None


#: the last ``MM_HANDOFF_LIMITS`` text read and its limits (one entry: the setting, not requests)
_FROM_ENV: tuple = ("", Limits())


def _process_limits() -> Limits:
    """The process default: :class:`Limits` with ``MM_HANDOFF_LIMITS`` applied, read where it is used (so
    ``import mm_handoff`` never fails on a setting); a bad setting is a typed error at every use."""
    global _FROM_ENV
    text = os.environ.get(_env.LIMITS, "")
    seen, limits = _FROM_ENV
    if text != seen:
        limits = limits_from_env({_env.LIMITS: text})
        _FROM_ENV = (text, limits)
    return limits


def resolve_limits(limits: Limits | None) -> Limits:
    """``limits``, or the process default (``MM_HANDOFF_LIMITS``); anything else is a typed error."""
    if limits is None:
        return _process_limits()
    if not isinstance(limits, Limits):
        raise HandoffError("limits", "a mm_handoff.Limits", type(limits).__name__)
    return limits


def check_frame_total(video_metadata, limits: Limits | None = None, *, request_id=None) -> None:
    """The frame indices of all of one request's video metadata stay within ``limits.max_frames``, counted
    from their lengths before any list is read (one metadata shared by 256 videos counts 256 times). A
    value that is not a list of metadata is left to the reader of the metadata, which names it."""
    limits = resolve_limits(limits)
    if not isinstance(video_metadata, (list, tuple)):
        return
    if len(video_metadata) > limits.max_items:
        raise HandoffError("video_metadata", f"at most {limits.max_items} entries (limits.max_items)",
                           len(video_metadata), request_id=request_id)
    total = 0
    for j, meta in enumerate(video_metadata):
        total += _frame_count(meta, j, request_id)
        if total > limits.max_frames:
            raise HandoffError(f"video_metadata[{j}].frames_indices", f"at most {limits.max_frames} frame indices "
                               "over all videos (limits.max_frames)", f"{total} up to this video",
                               request_id=request_id, hint="raise the limits for longer videos")


def _frame_count(meta, j: int, request_id) -> int:
    try:
        indices = meta.get("frames_indices") if isinstance(meta, Mapping) else getattr(meta, "frames_indices", None)
        if isinstance(indices, (list, tuple)):
            return len(indices)
        shape = getattr(indices, "shape", None)  # an array or tensor: its size, without reading it
        return math.prod(int(d) for d in shape) if isinstance(shape, tuple) else 0
    except Exception as exc:
        raise HandoffError(f"video_metadata[{j}]", "readable video metadata (fps, frames_indices)",
                           type(exc).__name__, request_id=request_id) from exc
