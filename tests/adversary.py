"""An adversary's tools: payloads that lie while carrying a valid checksum, and a meter that holds
every answer to the bounds the package promises (a typed error naming its field, a message under
1,000 characters, within 100 MiB: work refused before it is done never allocates it).

Memory is the bound the tests hold, because it is deterministic; wall time on a shared two-core CI
machine is not (a case measured in milliseconds took 1.2 s under load), and performance is measured in
``benchmarks/``, not asserted here. The clock below is a hang guard only: the CPU time of this process,
with a bound no honest answer comes near."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import attrs
import numpy as np

from mm_handoff import HandoffError, HandoffLayout
from mm_handoff.layout import wire

#: what one answer may allocate (the measured peaks are far below)
MAX_BYTES = 100 << 20
#: a hang guard, not a performance goal: CPU seconds of this process for one answer
HANG_CPU_SECONDS = 30.0
MAX_MESSAGE = 1000


@attrs.frozen
class WireItem:
    """One item as the wire carries it: modality, grid, its runs, and per-group timestamps + spans (a view
    of :class:`~mm_handoff.layout.wire.WireContent`'s columns; :func:`columns_of` joins them back)."""

    modality: str
    grid_thw: tuple
    offsets: Any
    lengths: Any
    timestamps: Any = None
    spans: Any = None


def items_of(content: wire.WireContent) -> tuple:
    """The items of ``content`` as :class:`WireItem` views of its columns."""
    out, r, t = [], 0, 0
    for modality, grid, k, stamped in content.heads:
        ts = sp = None
        if stamped:
            ts, sp = content.seconds[t:t + k], content.spans[t:t + k]
            t += k
        out.append(WireItem(modality, grid, content.offsets[r:r + k], content.lengths[r:r + k], ts, sp))
        r += k
    return tuple(out)


def columns_of(items) -> dict:
    """``heads``, ``offsets``, ``lengths``, ``seconds`` and ``spans`` of :class:`WireItem` values (the
    fields :class:`~mm_handoff.layout.wire.WireContent` holds them in)."""
    items = tuple(items)
    stamped = [w for w in items if w.timestamps is not None]
    return {"heads": tuple((w.modality, tuple(w.grid_thw), len(w.offsets), w.timestamps is not None) for w in items),
            "offsets": _joined([w.offsets for w in items], (-1,)),
            "lengths": _joined([w.lengths for w in items], (-1,)),
            "seconds": np.concatenate([np.asarray(w.timestamps, dtype=np.float64) for w in stamped]) if stamped
            else np.zeros(0), "spans": _joined([w.spans for w in stamped], (-1, 2))}


def _joined(parts: list, shape: tuple) -> np.ndarray:
    """Sequences (tuples or arrays) joined into one int64 array of ``shape``."""
    return np.concatenate([np.asarray(p, dtype=np.int64).reshape(shape) for p in parts]) if parts \
        else np.zeros((0,) + shape[1:], dtype=np.int64)


def content_of(layout: HandoffLayout) -> wire.WireContent:
    """The plain values a layout travels as (decoded from its own wire form)."""
    return wire.decode(layout.to_wire())


def resealed(content: wire.WireContent, **changes) -> dict:
    """``content`` with ``changes`` (``items``: :class:`WireItem` values, joined into the
    content's columns), encoded with its checksum recomputed: the lie verifies."""
    if "items" in changes:
        changes.update(columns_of(changes.pop("items")))
    content = attrs.evolve(content, **changes)
    return wire.encode(attrs.evolve(content, checksum=wire.checksum(content)))


def with_item(content: wire.WireContent, k: int, **changes) -> tuple:
    """The items with item ``k`` changed."""
    items = list(items_of(content))
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
    """Run ``call`` under the meter: ``(result, error)``, with the memory bound and the hang guard held."""
    tracemalloc.start()
    t0 = time.process_time()
    try:
        return call(), None
    except HandoffError as exc:
        return None, exc
    finally:
        seconds = time.process_time() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert seconds < HANG_CPU_SECONDS, f"{seconds:.2f} CPU s"
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
