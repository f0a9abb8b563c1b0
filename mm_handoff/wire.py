"""The wire form of a layout: a small, versioned, checksummed, JSON-safe dict.

It rides inside a TensorRT-LLM embedding-handle dict under one extra key, which survives
trtllm-serve's JSON. What it carries: format version, family, convention, tokenizer digest, the
family's token spec, each item's modality and grid, the mRoPE delta, a checksum, and one compact
blob (``arrays``: zlib level 1 of little-endian int32, base64) holding the prompt ids run-length
encoded (values, counts), the pad runs (delta-coded offsets, lengths), and the timestamps
(delta-coded deciseconds) with their text spans: about 0.9 KB for the 12k-id 720p clip, 2.7 KB for
768 frames in 14k ids. What it omits: the mRoPE ids (3 x L int64, megabytes at long prompts), which the
adapter recomputes from ids + grids exactly.

Decoding treats the payload as untrusted, in bounded time and memory: a JSON text's size and
its count of objects and lists are checked before it is parsed; every declared size is checked
against :class:`~mm_handoff.limits.Limits` before anything is allocated; every field must have its
exact JSON type (an int subclass or a dict subclass is not one); and the checksum is verified on the
decoded plain values, before a single layout object is built. Every failure of the payload's form
is a :class:`WireFormatError` subclass naming the field.

This module is the codec only: it knows plain values (:class:`WireContent`), not the layout
class, so the dependency runs one way. :meth:`HandoffLayout.to_wire` and
:meth:`HandoffLayout.from_wire` build and check the layout (a well-formed payload that describes
an invalid layout raises the layout's own :class:`~mm_handoff.errors.LayoutError`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import zlib
from typing import Any

import attrs
import numpy as np

from .errors import HandoffError, WireChecksumError, WireFormatError, WireLimitError, WireVersionError
from .limits import Limits, resolve_limits
from .spec import TokenSpec

__all__ = ["WireLimits", "WireContent", "WireItem", "encode", "decode", "checksum", "FORMAT", "VERSION"]

FORMAT = "mm-handoff.layout"
VERSION = 3  # 2: the checksum is the layout's fingerprint (sha256, what travels); 3: hashed column by column
_KEYS = {"format", "version", "family", "convention", "tokenizer_digest", "spec", "length", "items", "sizes",
         "arrays", "mrope_position_delta", "checksum"}
_ITEM_KEYS = {"modality", "grid_thw", "runs", "timestamps"}
_SIZE_KEYS = {"rle", "runs", "timestamps"}
_SPEC_KEYS = {"image_pad", "video_pad", "vision_start", "vision_end", "merge_size", "temporal_patch_size",
              "timestamps"}
_TS_KEYS = {"open", "close", "dot", "seconds", "digits"}


#: the bounds a payload is decoded under (the same :class:`~mm_handoff.limits.Limits` every entry point uses)
WireLimits = Limits


@attrs.frozen
class WireItem:
    """One item as the wire carries it: modality, grid, its runs, and per-group timestamps + spans.

    Sequences: :func:`encode` takes any; :func:`decode` gives int64 arrays (offsets, lengths, spans
    as ``(k, 2)``) and a float64 array of seconds.
    """

    modality: str
    grid_thw: tuple
    offsets: Any
    lengths: Any
    timestamps: Any = None
    spans: Any = None


@attrs.frozen
class WireContent:
    """Everything a payload carries, as plain values (ids run-length encoded)."""

    family: str
    convention: str
    tokenizer_digest: str | None
    spec: TokenSpec
    values: Any
    counts: Any
    items: tuple
    mrope_position_delta: int | None
    checksum: str


def _delta(values) -> np.ndarray:
    arr = np.asarray(values, dtype=np.int64)
    out = arr.copy()
    out[1:] -= arr[:-1]
    return out


def _joined(parts: list, shape: tuple) -> np.ndarray:
    """Sequences (tuples or arrays) joined into one int64 array of ``shape``."""
    return np.concatenate([np.asarray(p, dtype=np.int64).reshape(shape) for p in parts]) if parts \
        else np.zeros((0,) + shape[1:], dtype=np.int64)


def encode(content: WireContent) -> dict:
    """Encode as a JSON-safe dict (see module doc for what it carries)."""
    values, counts = content.values, content.counts
    offsets = _joined([w.offsets for w in content.items], (-1,))
    lengths = _joined([w.lengths for w in content.items], (-1,))
    stamped = [w for w in content.items if w.timestamps is not None]
    # seconds print with one decimal (the layout checks it), so x10 rounds to the exact deciseconds
    deci = np.round(np.concatenate([np.asarray(w.timestamps, dtype=np.float64) for w in stamped]) * 10) \
        if stamped else np.zeros(0)
    spans = _joined([w.spans for w in stamped], (-1, 2))
    blob = np.concatenate([values, counts, _delta(offsets), lengths, _delta(deci.astype(np.int64)),
                           _delta(spans[:, 0]), spans[:, 1] - spans[:, 0]]).astype("<i4").tobytes()
    items = [{"modality": w.modality, "grid_thw": list(w.grid_thw), "runs": len(w.offsets),
              "timestamps": w.timestamps is not None} for w in content.items]
    return {
        "format": FORMAT,
        "version": VERSION,
        "family": content.family,
        "convention": content.convention,
        "tokenizer_digest": content.tokenizer_digest,
        "spec": content.spec.as_dict(),
        "length": int(np.asarray(counts).sum()),
        "items": items,
        "sizes": {"rle": int(len(values)), "runs": int(offsets.shape[0]), "timestamps": int(deci.shape[0])},
        "arrays": base64.b64encode(zlib.compress(blob, 1)).decode("ascii"),
        "mrope_position_delta": content.mrope_position_delta,
        "checksum": content.checksum,
    }


# ------------------------------------------------------------------------------- decoding
def _fail(field: str, expected: Any, actual: Any, request_id=None) -> WireFormatError:
    return WireFormatError(f"wire.{field}", expected, actual, request_id=request_id)


def _typename(v) -> str:
    return type(v).__name__


def _int(v, field, rid, *, low: int | None = None, high: int | None = None) -> int:
    if type(v) is not int:  # JSON's int: not a bool, not an int subclass with methods of its own
        raise _fail(field, "an int", _typename(v), rid)
    if (low is not None and v < low) or (high is not None and v > high):
        raise _fail(field, f"an int in [{low}, {high}]", v, rid)
    return v


def _dict(v, field, keys, rid, optional=frozenset()) -> dict:
    if type(v) is not dict:
        raise _fail(field, "an object (a plain dict)", _typename(v), rid)
    if len(v) > len(keys):  # before looking at any key: a dict of millions of keys costs nothing here
        raise _fail(field, f"keys {sorted(keys)}", f"{len(v)} keys", rid)
    try:
        missing, extra = keys - optional - set(v), [k for k in v if not (type(k) is str and k in keys)]
    except Exception:  # a key whose hash or comparison raises (an in-process dict of odd keys)
        raise _fail(field, f"keys {sorted(keys)}", "unreadable keys", rid) from None
    if missing:
        raise _fail(field, f"keys {sorted(keys)}", f"missing {sorted(missing)}", rid)
    if extra:
        raise _fail(field, f"keys {sorted(keys)}", f"unknown keys of types {sorted({_typename(k) for k in extra})}"
                    if any(type(k) is not str for k in extra) else f"unknown {sorted(extra)[:8]}", rid)
    return v


def _list(v, field, rid, max_len: int) -> list | tuple:
    if type(v) is not list and type(v) is not tuple:
        raise _fail(field, "a list", _typename(v), rid)
    if len(v) > max_len:
        raise WireLimitError(f"wire.{field}", f"at most {max_len} entries", len(v), request_id=rid)
    return v


def _decode_arrays(v, rid, expected_values: int) -> np.ndarray:
    """base64 -> zlib -> int32, never inflating past the size the declared counts imply."""
    if type(v) is not str:
        raise _fail("arrays", "a base64 string", _typename(v), rid)
    want = 4 * expected_values
    most = 4 * ((want + want // 1000 + 64) // 3 + 1)  # zlib's worst case for ``want`` bytes, in base64
    if len(v) > most:
        raise WireLimitError("wire.arrays", f"at most {most} characters for the declared sizes", len(v),
                             request_id=rid)
    try:
        packed = base64.b64decode(v.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise _fail("arrays", "valid base64", f"undecodable ({exc})", rid) from None
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(packed, want + 1)
    except zlib.error as exc:
        raise _fail("arrays", "a zlib stream", f"corrupt ({exc})", rid) from None
    if len(raw) != want or inflater.unconsumed_tail or not inflater.eof or inflater.unused_data:
        raise _fail("arrays", f"{want} bytes for the declared sizes", f"{len(raw)}+ bytes", rid)
    return np.frombuffer(raw, dtype="<i4").astype(np.int64)


def _decode_spec(v, rid) -> TokenSpec:
    v = _dict(v, "spec", _SPEC_KEYS, rid)
    args = {k: _int(v[k], f"spec.{k}", rid, low=0, high=2**31 - 1) for k in _SPEC_KEYS - {"timestamps"}}
    ts = v["timestamps"]
    if ts is not None:
        ts = _dict(ts, "spec.timestamps", _TS_KEYS, rid)
        digits = _list(ts["digits"], "spec.timestamps.digits", rid, 10)
        ts = dict({k: _int(ts[k], f"spec.timestamps.{k}", rid, low=0, high=2**31 - 1) for k in _TS_KEYS - {"digits"}},
                  digits=[_int(d, "spec.timestamps.digits", rid, low=0, high=2**31 - 1) for d in digits])
    key = (tuple(sorted(args.items())), None if ts is None else (tuple(sorted(
        (k, v) for k, v in ts.items() if k != "digits")), tuple(ts["digits"])))
    try:
        return _spec_of(key)
    except HandoffError as exc:  # ids that no spec may have (two alike, say)
        exc.with_request(rid)
        raise


@functools.lru_cache(maxsize=16)
def _spec_of(key: tuple) -> TokenSpec:
    """The spec a checked field tuple describes. A deployment has one or two specs, so the last 16
    are kept (a few hundred bytes each), not one per request."""
    fields, ts = key
    vocab = None if ts is None else dict(ts[0], digits=list(ts[1]))
    return TokenSpec.from_dict(dict(fields, timestamps=vocab))


def _decode_item(k: int, v, rid) -> tuple:
    f = f"items[{k}]"
    v = _dict(v, f, _ITEM_KEYS, rid)
    modality = v["modality"]
    if type(modality) is not str or modality not in ("image", "video"):
        raise _fail(f"{f}.modality", "'image' or 'video'", modality, rid)
    grid = v["grid_thw"]
    if type(grid) not in (list, tuple) or len(grid) != 3:
        raise _fail(f"{f}.grid_thw", "[t, h, w]", grid, rid)
    grid = tuple(_int(g, f"{f}.grid_thw", rid, low=1, high=2**31 - 1) for g in grid)
    runs = _int(v["runs"], f"{f}.runs", rid, low=1, high=2**31 - 1)
    if type(v["timestamps"]) is not bool:
        raise _fail(f"{f}.timestamps", "a bool", _typename(v["timestamps"]), rid)
    return modality, grid, runs, v["timestamps"]


def _load(obj, limits: Limits, rid) -> dict:
    """The payload as a dict with the right format, version and keys."""
    if type(obj) in (str, bytes, bytearray):
        if len(obj) > limits.max_payload_chars:
            raise WireLimitError("wire", f"at most {limits.max_payload_chars} characters", len(obj), request_id=rid)
        # a payload is one object with a few small ones inside (spec, sizes, one per item): count the
        # objects and lists before parsing, so a text of millions of them costs one scan, not gigabytes
        # (and the values in them: an honest payload has about 8 commas and 4 colons per item)
        text = obj if type(obj) is str else bytes(obj).decode("latin-1")
        opens = text.count("{") + text.count("[")
        most = 2 * limits.max_items + 8
        if opens > most:
            raise WireLimitError("wire.json", f"at most {most} JSON objects and lists (limits.max_items)", opens,
                                 request_id=rid)
        separators, most = text.count(",") + text.count(":"), 16 * limits.max_items + 128
        if separators > most:
            raise WireLimitError("wire.json", f"at most {most} JSON values (limits.max_items)", separators,
                                 request_id=rid)
        try:
            obj = json.loads(obj)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise _fail("json", "a JSON object", f"undecodable ({exc.__class__.__name__})", rid) from None
    if type(obj) is not dict:
        raise _fail("payload", "an object (a plain dict)", _typename(obj), rid)
    if type(obj.get("format")) is not str or obj.get("format") != FORMAT:
        raise _fail("format", FORMAT, obj.get("format"), rid)
    version = obj.get("version")
    if type(version) is not int or version != VERSION:
        raise WireVersionError("wire.version", VERSION, version, request_id=rid,
                               hint="encoder and prefill run different mm-handoff versions")
    return _dict(obj, "payload", _KEYS, rid)


def _header(obj: dict, limits: Limits, rid) -> tuple:
    """Scalar fields and declared sizes, each bounded before anything is allocated."""
    n = _int(obj["length"], "length", rid, low=1)
    if n > limits.max_prompt_len:
        raise WireLimitError("wire.length", f"at most {limits.max_prompt_len} tokens", n, request_id=rid)
    for key in ("family", "convention", "checksum"):
        if type(obj[key]) is not str or len(obj[key]) > 256:
            raise _fail(key, "a string (at most 256 characters)", _typename(obj[key]), rid)
    digest = obj["tokenizer_digest"]
    if digest is not None and (type(digest) is not str or len(digest) > 256):
        raise _fail("tokenizer_digest", "a string or null", _typename(digest), rid)
    delta = obj["mrope_position_delta"]
    if delta is not None:
        delta = _int(delta, "mrope_position_delta", rid, low=-(2**62), high=2**62)
    sizes = _dict(obj["sizes"], "sizes", _SIZE_KEYS, rid)
    n_rle = _int(sizes["rle"], "sizes.rle", rid, low=1, high=n)
    n_runs = _int(sizes["runs"], "sizes.runs", rid, low=0, high=n)
    if n_runs > limits.max_runs:
        raise WireLimitError("wire.sizes.runs", f"at most {limits.max_runs} pad runs (limits.max_runs)", n_runs,
                             request_id=rid)
    n_ts = _int(sizes["timestamps"], "sizes.timestamps", rid, low=0, high=n_runs)
    heads = [_decode_item(k, v, rid) for k, v in enumerate(_list(obj["items"], "items", rid, limits.max_items))]
    if sum(h[2] for h in heads) != n_runs:
        raise _fail("items", f"run counts summing to sizes.runs = {n_runs}", sum(h[2] for h in heads), rid)
    if sum(h[2] for h in heads if h[3]) != n_ts:
        raise _fail("items", f"timestamped groups summing to sizes.timestamps = {n_ts}",
                    sum(h[2] for h in heads if h[3]), rid)
    return n, digest, delta, (n_rle, n_runs, n_ts), heads


def _split_arrays(arrays: np.ndarray, n: int, sizes: tuple, rid) -> tuple:
    """The blob's sections, with run bounds and timestamps checked against the prompt length."""
    n_rle, n_runs, n_ts = sizes
    values, counts, rest = arrays[:n_rle], arrays[n_rle:2 * n_rle], arrays[2 * n_rle:]
    offsets, lengths = np.cumsum(rest[:n_runs]), rest[n_runs:2 * n_runs]
    deci = np.cumsum(rest[2 * n_runs:2 * n_runs + n_ts])
    span_start = np.cumsum(rest[2 * n_runs + n_ts:2 * n_runs + 2 * n_ts])
    span_len = rest[2 * n_runs + 2 * n_ts:]
    if int(counts.min()) < 1:
        raise _fail("arrays.counts", "positive run lengths", int(counts.min()), rid)
    repeats = np.flatnonzero(values[1:] == values[:-1])
    if repeats.size:  # one canonical form, so the checksum of the plain values is the layout's
        k = int(repeats[0])
        raise _fail("arrays.values", "a run-length form whose neighbouring values differ",
                    f"value {int(values[k])} repeated at runs {k} and {k + 1}", rid)
    if int(values.min()) < 0 or int(values.max()) > 2**31 - 1:
        raise _fail("arrays.values", "token ids in [0, 2**31 - 1]", (int(values.min()), int(values.max())), rid)
    total = int(counts.sum())
    if total != n:
        raise _fail("arrays.counts", f"run lengths summing to length {n}", total, rid)
    if n_runs and (int(lengths.min()) < 1 or int(offsets.min()) < 0 or int((offsets + lengths).max()) > n):
        k = int(np.flatnonzero((lengths < 1) | (offsets < 0) | (offsets + lengths > n))[0])
        raise _fail(f"arrays.runs[{k}]", f"a run inside [0, {n})", (int(offsets[k]), int(lengths[k])), rid)
    if n_ts and (int(span_len.min()) < 1 or int(span_start.min()) < 0 or int(deci.min()) < 0):
        k = int(np.flatnonzero((span_len < 1) | (span_start < 0) | (deci < 0))[0])
        raise _fail(f"arrays.timestamps[{k}]", "a non-negative timestamp and a non-empty span",
                    {"deciseconds": int(deci[k]), "span": (int(span_start[k]), int(span_start[k] + span_len[k]))}, rid)
    return values, counts, offsets, lengths, deci, span_start, span_len


def _items(heads, offsets, lengths, deci, span_start, span_len) -> tuple:
    """Per item, slices of the decoded arrays (the layout builds its runs from them in one pass)."""
    seconds = deci / 10
    spans = np.column_stack((span_start, span_start + span_len))
    items, r, t = [], 0, 0
    for modality, grid, k, stamped in heads:
        ts = sp = None
        if stamped:
            ts, sp = seconds[t:t + k], spans[t:t + k]
            t += k
        items.append(WireItem(modality, grid, offsets[r:r + k], lengths[r:r + k], ts, sp))
        r += k
    return tuple(items)


def decode(obj, *, limits: Limits | None = None, request_id=None) -> WireContent:
    """Decode a payload (dict, JSON str or bytes) and verify its checksum on the plain values; the
    layout checks are the caller's (see module doc)."""
    rid = request_id
    limits = resolve_limits(limits)
    obj = _load(obj, limits, rid)
    n, digest, delta, sizes, heads = _header(obj, limits, rid)
    spec = _decode_spec(obj["spec"], rid)
    n_rle, n_runs, n_ts = sizes
    arrays = _decode_arrays(obj["arrays"], rid, 2 * n_rle + 2 * n_runs + 3 * n_ts)
    values, counts, offsets, lengths, deci, span_start, span_len = _split_arrays(arrays, n, sizes, rid)
    content = WireContent(family=obj["family"], convention=obj["convention"], tokenizer_digest=digest, spec=spec,
                          values=values.astype(np.int32), counts=counts.astype(np.int32),
                          items=_items(heads, offsets, lengths, deci, span_start, span_len),
                          mrope_position_delta=delta, checksum=obj["checksum"])
    actual = checksum(content)
    if actual != content.checksum:
        raise WireChecksumError("wire.checksum", content.checksum, actual, request_id=rid,
                                hint="the payload was altered in transit")
    return content


def checksum(content: WireContent) -> str:
    """The layout's fingerprint, from plain values: a sha256 of what travels (ids in their canonical
    run-length form, items with their runs, timestamps and spans, spec, family, convention, tokenizer
    digest, mRoPE delta). :meth:`HandoffLayout.fingerprint` is this function of the layout."""
    h = hashlib.sha256()  # hardware-accelerated on current CPUs: ~2x blake2b over the ~45 KB of 384 groups
    h.update(b"mm-handoff-layout/4\0")
    stamped = [w for w in content.items if w.timestamps is not None]
    heads = [(w.modality, tuple(w.grid_thw), len(w.offsets), w.timestamps is not None) for w in content.items]
    h.update(repr((content.family, content.convention, content.tokenizer_digest, content.spec.digest(),
                   content.mrope_position_delta, heads)).encode())
    for column in (content.values, content.counts):
        h.update(np.ascontiguousarray(column, dtype="<i4").tobytes())
    # every item's runs, then every stamped group's seconds and spans, one column at a time (the
    # headers above say where each item's part begins)
    h.update(_joined([w.offsets for w in content.items], (-1,)).astype("<i8").tobytes())
    h.update(_joined([w.lengths for w in content.items], (-1,)).astype("<i8").tobytes())
    if stamped:
        h.update(np.concatenate([np.asarray(w.timestamps, dtype="<f8") for w in stamped]).tobytes())
        h.update(_joined([w.spans for w in stamped], (-1, 2)).astype("<i8").tobytes())
    return h.hexdigest()[:32]
