"""An adversary's tools: payloads that lie while carrying a valid checksum, and a meter that holds
every answer to the bounds the package promises (a typed error naming its field, a message under
1,000 characters, within 1 s and 100 MiB)."""

from __future__ import annotations

import time
import tracemalloc

import attrs
import numpy as np

from mm_handoff import HandoffError, HandoffLayout, wire

#: what one answer may cost (the issue's bounds; the measured costs are far below)
MAX_SECONDS = 1.0
MAX_BYTES = 100 << 20
MAX_MESSAGE = 1000


def content_of(layout: HandoffLayout) -> wire.WireContent:
    """The plain values a layout travels as (decoded from its own wire form)."""
    return wire.decode(layout.to_wire())


def resealed(content: wire.WireContent, **changes) -> dict:
    """``content`` with ``changes`` (``items``: :class:`~mm_handoff.wire.WireItem` values, joined into the
    content's columns), encoded with its checksum recomputed: the lie verifies."""
    if "items" in changes:
        changes.update(wire.columns_of(changes.pop("items")))
    content = attrs.evolve(content, **changes)
    return wire.encode(attrs.evolve(content, checksum=wire.checksum(content)))


def with_item(content: wire.WireContent, k: int, **changes) -> tuple:
    """The items with item ``k`` changed."""
    items = list(content.items)
    items[k] = attrs.evolve(items[k], **changes)
    return tuple(items)


def rle(ids) -> tuple:
    ids = np.asarray(ids, dtype=np.int32)
    starts = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
    return ids[starts], np.diff(np.append(starts, ids.shape[0])).astype(np.int32)


def forged(content: wire.WireContent, ids, items) -> dict:
    """A payload of other ids and items, sealed like an honest one."""
    values, counts = rle(ids)
    return resealed(content, values=values, counts=counts, items=tuple(items))


def answer(call):
    """Run ``call`` under the meter: ``(result, error)``, with the time and memory bounds held."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        return call(), None
    except HandoffError as exc:
        return None, exc
    finally:
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert seconds < MAX_SECONDS, f"{seconds:.2f} s"
        assert peak < MAX_BYTES, f"{peak / 2**20:.0f} MiB"


def refused(call, error=HandoffError, field=None):
    """``call`` ends in a typed error that names its field and prints short, within the bounds."""
    result, exc = answer(call)
    assert exc is not None, f"accepted: {result!r}"[:300]
    assert isinstance(exc, error), repr(exc)[:300]
    text = str(exc)
    assert exc.field and str(exc.field)[:40] in text and len(text) <= MAX_MESSAGE, text[:300]
    if field is not None:
        assert exc.field.startswith(field), (exc.field, field)
    return exc
