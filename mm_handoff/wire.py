"""The wire form of a layout: a small, versioned, checksummed, JSON-safe dict.

It rides inside a TensorRT-LLM embedding-handle dict under one extra key, which survives
trtllm-serve's JSON. What it carries: format version, family, convention, tokenizer digest, the
family's token spec, the prompt ids run-length encoded (int32 values and counts, base64), each
item's grid, pad runs and timestamps, the mRoPE delta, and a checksum. What it omits: the mRoPE ids
(3 x L int64, megabytes at long prompts), which the adapter recomputes from ids + grids exactly.

Decoding treats the payload as untrusted: every declared size is checked against
:class:`WireLimits` before anything is allocated, every field's type is checked, and every failure
is a :class:`WireFormatError` subclass naming the field.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any, Optional

import attrs
import numpy as np

from .errors import HandoffError, WireChecksumError, WireFormatError, WireLimitError, WireVersionError
from .layout import HandoffLayout, MultimodalItem, PlaceholderRun
from .spec import TokenSpec

__all__ = ["WireLimits", "to_wire", "from_wire", "wire_checksum", "FORMAT", "VERSION"]

FORMAT = "mm-handoff.layout"
VERSION = 1
_KEYS = {"format", "version", "family", "convention", "tokenizer_digest", "spec", "length", "ids", "items",
         "mrope_position_delta", "checksum"}
_ITEM_KEYS = {"modality", "grid_thw", "runs", "timestamps", "timestamp_spans"}
_SPEC_KEYS = {"image_pad", "video_pad", "vision_start", "vision_end", "merge_size", "temporal_patch_size",
              "timestamps"}
_TS_KEYS = {"open", "close", "dot", "seconds", "digits"}


@attrs.frozen
class WireLimits:
    """Upper bounds applied before allocation; raise them for very long prompts."""

    max_prompt_len: int = 4 * 1024 * 1024
    max_items: int = 1024
    max_runs: int = 1 << 20
    max_payload_chars: int = 64 * 1024 * 1024


DEFAULT_LIMITS = WireLimits()


def wire_checksum(layout: HandoffLayout) -> str:
    """Digest of ids + layout + delta: what the wire form promises to deliver."""
    h = hashlib.blake2b(digest_size=16)
    h.update(layout.fingerprint(include_mrope=False).encode())
    h.update(repr(layout.mrope_position_delta).encode())
    return h.hexdigest()


def _b64(arr: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(arr, dtype="<i4").tobytes()).decode("ascii")


def to_wire(layout: HandoffLayout) -> dict:
    """Encode a layout as a JSON-safe dict (see module doc for what it carries)."""
    n = layout.prompt_len
    values, counts = layout.rle()
    items = []
    for item in layout.items:
        items.append({
            "modality": item.modality,
            "grid_thw": list(item.grid_thw),
            "runs": [[r.offset, r.length] for r in item.runs],
            "timestamps": None if item.timestamps is None else list(item.timestamps),
            "timestamp_spans": None if item.timestamp_spans is None else [list(s) for s in item.timestamp_spans],
        })
    return {
        "format": FORMAT,
        "version": VERSION,
        "family": layout.family,
        "convention": layout.convention,
        "tokenizer_digest": layout.tokenizer_digest,
        "spec": layout.spec.as_dict(),
        "length": int(n),
        "ids": {"values": _b64(values), "counts": _b64(counts)},
        "items": items,
        "mrope_position_delta": layout.mrope_position_delta,
        "checksum": wire_checksum(layout),
    }


# ------------------------------------------------------------------------------- decoding
def _fail(field: str, expected: Any, actual: Any, request_id=None) -> WireFormatError:
    return WireFormatError(f"wire.{field}", expected, actual, request_id=request_id)


def _typename(v) -> str:
    return type(v).__name__


def _int(v, field, rid, *, low: Optional[int] = None, high: Optional[int] = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _fail(field, "an int", _typename(v), rid)
    if (low is not None and v < low) or (high is not None and v > high):
        raise _fail(field, f"an int in [{low}, {high}]", v, rid)
    return v


def _dict(v, field, keys, rid, optional=frozenset()) -> dict:
    if not isinstance(v, dict):
        raise _fail(field, "an object", _typename(v), rid)
    missing = keys - optional - set(v)
    if missing:
        raise _fail(field, f"keys {sorted(keys)}", f"missing {sorted(missing)}", rid)
    extra = set(v) - keys
    if extra:
        raise _fail(field, f"keys {sorted(keys)}", f"unknown {sorted(str(k) for k in extra)}", rid)
    return v


def _list(v, field, rid, max_len: int) -> list:
    if not isinstance(v, list):
        raise _fail(field, "a list", _typename(v), rid)
    if len(v) > max_len:
        raise WireLimitError(f"wire.{field}", f"at most {max_len} entries", len(v), request_id=rid)
    return v


def _decode_b64_i32(v, field, rid, max_count: int) -> np.ndarray:
    if not isinstance(v, str):
        raise _fail(field, "a base64 string", _typename(v), rid)
    if len(v) // 4 * 3 // 4 > max_count:
        raise WireLimitError(f"wire.{field}", f"at most {max_count} int32 values", len(v) // 4 * 3 // 4,
                             request_id=rid)
    try:
        raw = base64.b64decode(v.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise _fail(field, "valid base64", f"undecodable ({exc})", rid) from None
    if len(raw) % 4:
        raise _fail(field, "a multiple of 4 bytes (int32)", len(raw), rid)
    return np.frombuffer(raw, dtype="<i4")


def _decode_spec(v, rid) -> TokenSpec:
    v = _dict(v, "spec", _SPEC_KEYS, rid)
    args = {k: _int(v[k], f"spec.{k}", rid, low=0, high=2**31 - 1) for k in _SPEC_KEYS - {"timestamps"}}
    ts = v["timestamps"]
    if ts is not None:
        ts = _dict(ts, "spec.timestamps", _TS_KEYS, rid)
        digits = _list(ts["digits"], "spec.timestamps.digits", rid, 10)
        ts = dict({k: _int(ts[k], f"spec.timestamps.{k}", rid, low=0, high=2**31 - 1) for k in _TS_KEYS - {"digits"}},
                  digits=[_int(d, "spec.timestamps.digits", rid, low=0, high=2**31 - 1) for d in digits])
    args["timestamps"] = ts
    return TokenSpec.from_dict(args)


def _decode_item(k: int, v, rid, limits: WireLimits, runs_left: int) -> MultimodalItem:
    f = f"items[{k}]"
    v = _dict(v, f, _ITEM_KEYS, rid)
    modality = v["modality"]
    if modality not in ("image", "video"):
        raise _fail(f"{f}.modality", "'image' or 'video'", modality, rid)
    grid = _list(v["grid_thw"], f"{f}.grid_thw", rid, 3)
    if len(grid) != 3:
        raise _fail(f"{f}.grid_thw", "[t, h, w]", grid, rid)
    grid = [_int(g, f"{f}.grid_thw", rid, low=1, high=2**31 - 1) for g in grid]
    runs_raw = _list(v["runs"], f"{f}.runs", rid, runs_left)
    runs = []
    for j, r in enumerate(runs_raw):
        if not isinstance(r, list) or len(r) != 2:
            raise _fail(f"{f}.runs[{j}]", "[offset, length]", r, rid)
        runs.append(PlaceholderRun(_int(r[0], f"{f}.runs[{j}][0]", rid, low=0, high=limits.max_prompt_len),
                                   _int(r[1], f"{f}.runs[{j}][1]", rid, low=1, high=limits.max_prompt_len)))
    ts = v["timestamps"]
    if ts is not None:
        ts = _list(ts, f"{f}.timestamps", rid, len(runs))
        for j, t in enumerate(ts):
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not np.isfinite(t):
                raise _fail(f"{f}.timestamps[{j}]", "a finite number", t, rid)
    spans = v["timestamp_spans"]
    if spans is not None:
        spans = _list(spans, f"{f}.timestamp_spans", rid, len(runs))
        for j, s in enumerate(spans):
            if not isinstance(s, list) or len(s) != 2:
                raise _fail(f"{f}.timestamp_spans[{j}]", "[start, end]", s, rid)
            for x in s:
                _int(x, f"{f}.timestamp_spans[{j}]", rid, low=0, high=limits.max_prompt_len)
    return MultimodalItem(modality, tuple(runs), sum(r.length for r in runs), tuple(grid), ts, spans)


def from_wire(obj, *, limits: WireLimits = DEFAULT_LIMITS, request_id=None) -> HandoffLayout:
    """Decode and re-validate a wire payload (dict, JSON str or bytes) into a :class:`HandoffLayout`."""
    rid = request_id
    if isinstance(obj, (str, bytes, bytearray)):
        if len(obj) > limits.max_payload_chars:
            raise WireLimitError("wire", f"at most {limits.max_payload_chars} characters", len(obj), request_id=rid)
        try:
            obj = json.loads(obj)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _fail("json", "a JSON object", f"undecodable ({exc.__class__.__name__})", rid) from None
    if not isinstance(obj, dict):
        raise _fail("payload", "an object", _typename(obj), rid)
    if obj.get("format") != FORMAT:
        raise _fail("format", FORMAT, obj.get("format"), rid)
    version = obj.get("version")
    if version != VERSION:
        raise WireVersionError("wire.version", VERSION, version, request_id=rid,
                               hint="encoder and prefill run different mm-handoff versions")
    obj = _dict(obj, "payload", _KEYS, rid)
    n = _int(obj["length"], "length", rid, low=1)
    if n > limits.max_prompt_len:
        raise WireLimitError("wire.length", f"at most {limits.max_prompt_len} tokens", n, request_id=rid)
    for key in ("family", "convention", "checksum"):
        if not isinstance(obj[key], str):
            raise _fail(key, "a string", _typename(obj[key]), rid)
    digest = obj["tokenizer_digest"]
    if digest is not None and not isinstance(digest, str):
        raise _fail("tokenizer_digest", "a string or null", _typename(digest), rid)
    delta = obj["mrope_position_delta"]
    if delta is not None:
        delta = _int(delta, "mrope_position_delta", rid, low=-(2**62), high=2**62)
    spec = _decode_spec(obj["spec"], rid)

    ids_obj = _dict(obj["ids"], "ids", {"values", "counts"}, rid)
    values = _decode_b64_i32(ids_obj["values"], "ids.values", rid, n)
    counts = _decode_b64_i32(ids_obj["counts"], "ids.counts", rid, n)
    if values.shape != counts.shape:
        raise _fail("ids", "as many counts as values", (int(values.shape[0]), int(counts.shape[0])), rid)
    if counts.size and int(counts.min()) < 1:
        raise _fail("ids.counts", "positive run lengths", int(counts.min()), rid)
    if values.size and int(values.min()) < 0:
        raise _fail("ids.values", "non-negative token ids", int(values.min()), rid)
    total = int(counts.sum(dtype=np.int64))
    if total != n:
        raise _fail("ids.counts", f"run lengths summing to length {n}", total, rid)

    items_raw = _list(obj["items"], "items", rid, limits.max_items)
    items, runs_left = [], limits.max_runs
    for k, v in enumerate(items_raw):
        item = _decode_item(k, v, rid, limits, runs_left)
        runs_left -= len(item.runs)
        items.append(item)

    ids = np.repeat(values.astype(np.int32), counts)
    ids.flags.writeable = False
    try:
        layout = HandoffLayout(ids, tuple(items), spec, family=obj["family"], convention=obj["convention"],
                               mrope_position_delta=delta, tokenizer_digest=digest)
    except HandoffError as exc:
        raise exc.with_request(rid)
    except (TypeError, ValueError, OverflowError) as exc:  # pragma: no cover - defensive
        raise _fail("payload", "a valid layout", f"{exc.__class__.__name__}: {exc}", rid) from None
    if values.size and (values[1:] != values[:-1]).all():  # canonical run-length form: reuse it
        layout.seed_rle(values, counts)
    actual = wire_checksum(layout)
    if actual != obj["checksum"]:
        raise WireChecksumError("wire.checksum", obj["checksum"], actual, request_id=rid,
                                hint="the payload was altered in transit")
    return layout
