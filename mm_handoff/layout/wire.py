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
against :class:`~mm_handoff.reading.Limits` before anything is allocated; every field must have its
exact JSON type (an int subclass or a dict subclass is not one); and the checksum is verified on the
decoded plain values, before a single layout object is built. Every failure of the payload's form
is a :class:`WireFormatError` subclass naming the field.

What a layout travels as is :class:`WireContent`, in plain values (the ids run-length encoded, the items
as one header each over shared columns, so a 768-frame video's 384 runs are two columns, not 384
objects), and :func:`checksum` of it is the layout's fingerprint. This module is the codec only: it
knows plain values, not the layout class, so the dependency runs one way. :meth:`HandoffLayout.to_wire` and
:meth:`HandoffLayout.from_wire` build and check the layout (a well-formed payload that describes
an invalid layout raises the layout's own :class:`~mm_handoff.errors.LayoutError`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import itertools
import json
import struct
import zlib
from typing import Any

import attrs
import numpy as np

from ..errors import HandoffError, WireFormatError
from ..reading import MAX_COUNT, MAX_ID, Limits, plain_ints, resolve_limits
from .spec import MAX_MERGED_OPENS, TokenSpec, canonical_spec
from .tokens import FEW_VALUES, read_only

FORMAT = "mm-handoff.layout"
VERSION = 3  # 2: the checksum is the layout's fingerprint (sha256, what travels); 3: hashed column by column
_KEYS = {"format", "version", "family", "convention", "tokenizer_digest", "spec", "length", "items", "sizes",
         "arrays", "mrope_position_delta", "checksum"}
_ITEM_KEYS = {"modality", "grid_thw", "runs", "timestamps"}
_SIZE_KEYS = {"rle", "runs", "timestamps"}
_SPEC_KEYS = {"image_pad", "video_pad", "vision_start", "vision_end", "merge_size", "temporal_patch_size",
              "timestamps"}
_TS_KEYS = {"open", "close", "dot", "seconds", "digits"}


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


def encode(content: WireContent, *, checksum: str | None = None) -> dict:
    """Encode as a JSON-safe dict (see module doc for what it carries); ``checksum``: the one to carry,
    when it is not ``content.checksum`` (the layout passes its fingerprint)."""
    values, counts = content.values, content.counts
    n_runs, n_ts = len(content.offsets), len(content.seconds)
    # one int64 column of every section, delta-coding the offsets, the deciseconds and the span starts
    # (seconds print with one decimal, which the layout checks, so x10 rounds to the exact deciseconds)
    cols = np.empty(2 * len(values) + 2 * n_runs + 3 * n_ts, dtype=np.int64)
    at = 2 * len(values)
    cols[:len(values)], cols[len(values):at] = values, counts
    _delta_into(cols[at:at + n_runs], content.offsets)
    cols[at + n_runs:at + 2 * n_runs] = content.lengths
    if n_ts:
        at += 2 * n_runs
        spans = np.asarray(content.spans, dtype=np.int64).reshape(-1, 2)
        _delta_into(cols[at:at + n_ts], np.round(np.asarray(content.seconds, dtype=np.float64) * 10))
        _delta_into(cols[at + n_ts:at + 2 * n_ts], spans[:, 0])
        np.subtract(spans[:, 1], spans[:, 0], out=cols[at + 2 * n_ts:])
    blob = cols.astype("<i4").tobytes()
    items = [{"modality": m, "grid_thw": list(g), "runs": k, "timestamps": stamped} for m, g, k, stamped
             in content.heads]
    return {
        "format": FORMAT,
        "version": VERSION,
        "family": content.family,
        "convention": content.convention,
        "tokenizer_digest": content.tokenizer_digest,
        "spec": content.spec.as_dict(),
        "length": int(np.asarray(counts).sum(dtype=np.int64)),
        "items": items,
        "sizes": {"rle": len(values), "runs": n_runs, "timestamps": n_ts},
        "arrays": base64.b64encode(zlib.compress(blob, 1)).decode("ascii"),
        "mrope_position_delta": content.mrope_position_delta,
        "checksum": content.checksum if checksum is None else checksum,
    }


def _delta_into(out: np.ndarray, values) -> None:
    """``out[0] = values[0]``, ``out[i] = values[i] - values[i - 1]``."""
    if len(out):
        out[0] = values[0]
        np.subtract(values[1:], values[:-1], out=out[1:], casting="unsafe")


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


def _dict(v, field, keys, rid) -> dict:
    if type(v) is dict and v.keys() == keys:  # the honest payload: one set comparison (str keys only can equal)
        return v
    if type(v) is not dict:
        raise _fail(field, "an object (a plain dict)", _typename(v), rid)
    if len(v) > len(keys):  # before looking at any key: a dict of millions of keys costs nothing here
        raise _fail(field, f"keys {sorted(keys)}", f"{len(v)} keys", rid)
    try:
        missing, extra = keys - set(v), [k for k in v if not (type(k) is str and k in keys)]
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
        raise WireFormatError(f"wire.{field}", f"at most {max_len} entries", len(v), request_id=rid)
    return v


def _decode_arrays(v, rid, expected_values: int) -> np.ndarray:
    """base64 -> zlib -> read-only int32, never inflating past the size the declared counts imply."""
    if type(v) is not str:
        raise _fail("arrays", "a base64 string", _typename(v), rid)
    want = 4 * expected_values
    most = 4 * ((want + want // 1000 + 64) // 3 + 1)  # zlib's worst case for ``want`` bytes, in base64
    if len(v) > most:
        raise WireFormatError("wire.arrays", f"at most {most} characters for the declared sizes", len(v),
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
    return np.frombuffer(raw, dtype="<i4")  # read-only: a view of the inflated bytes


_SPEC_ORDER = tuple(sorted(_SPEC_KEYS - {"timestamps"}))
_TS_ORDER = tuple(sorted(_TS_KEYS - {"digits"}))


def _spec_ints(v: dict, names: tuple, field: str, rid) -> tuple:
    """``v``'s values under ``names``, each a plain int in [0, 2**31 - 1] (the first bad one is named)."""
    values = tuple(map(v.__getitem__, names))
    if plain_ints(values, 0, MAX_ID):
        return values
    for k, x in zip(names, values, strict=True):
        _int(x, f"{field}{k}", rid, low=0, high=MAX_ID)
    return values  # (unreachable: one of them failed)


def _decode_spec(v, rid) -> TokenSpec:
    v = _dict(v, "spec", _SPEC_KEYS, rid)
    ts = v["timestamps"]
    key: tuple = (_spec_ints(v, _SPEC_ORDER, "spec.", rid), None)
    if ts is not None:
        ts = _dict(ts, "spec.timestamps", _TS_KEYS | {"open_merged"} if type(ts) is dict and "open_merged" in ts
                   else _TS_KEYS, rid)
        digits = _list(ts["digits"], "spec.timestamps.digits", rid, 10)
        if digits and not plain_ints(tuple(digits), 0, MAX_ID):
            for d in digits:
                _int(d, "spec.timestamps.digits", rid, low=0, high=MAX_ID)
        merged = ts.get("open_merged")  # (absent: the released vocabulary's own, or none)
        if merged is not None:
            merged = tuple(_list(merged, "spec.timestamps.open_merged", rid, MAX_MERGED_OPENS))
            if merged and not plain_ints(merged, 0, MAX_ID):
                for d in merged:
                    _int(d, "spec.timestamps.open_merged", rid, low=0, high=MAX_ID)
        key = (key[0], (_spec_ints(ts, _TS_ORDER, "spec.timestamps.", rid), tuple(digits), merged))
    try:
        return _spec_of(key)
    except HandoffError as exc:  # ids that no spec may have (two alike, say)
        raise exc.with_request(rid)  # noqa: B904


@functools.lru_cache(maxsize=16)
def _spec_of(key: tuple) -> TokenSpec:
    """The spec a checked field tuple describes. A deployment has one or two specs, so the last 16
    are kept (a few hundred bytes each), not one per request."""
    fields, ts = key
    vocab = None if ts is None else dict(zip(_TS_ORDER, ts[0], strict=True), digits=list(ts[1]),
                                         **({} if ts[2] is None else {"open_merged": list(ts[2])}))
    return canonical_spec(TokenSpec.from_dict(dict(zip(_SPEC_ORDER, fields, strict=True), timestamps=vocab)))


def _decode_items(items, rid) -> list:
    """Every item's header, read in one pass when each is an honest one (the common case: a few type
    sets and one min and max over all grids and run counts), else item by item, naming the first bad one."""
    if len(items) <= _FEW_ITEMS:  # one or two images: item by item costs less than the sets below
        return [_decode_item(k, v, rid) for k, v in enumerate(items)]
    if {*map(type, items)} == _DICT_ONLY and all(v.keys() == _ITEM_KEYS for v in items):
        modalities = [v["modality"] for v in items]
        grids = [v["grid_thw"] for v in items]
        runs = [v["runs"] for v in items]
        stamped = [v["timestamps"] for v in items]
        if {*map(type, modalities)} == _STR_ONLY and {*modalities} <= _MODALITY_SET \
                and {*map(type, grids)} <= _SEQUENCES and {*map(len, grids)} == _THREE \
                and {*map(type, stamped)} == _BOOL_ONLY \
                and plain_ints((*itertools.chain.from_iterable(grids), *runs), 1, MAX_ID):
            return list(zip(modalities, map(tuple, grids), runs, stamped, strict=True))
    return [_decode_item(k, v, rid) for k, v in enumerate(items)]


_DICT_ONLY, _STR_ONLY, _SEQUENCES, _BOOL_ONLY, _THREE = {dict}, {str}, {list, tuple}, {bool}, {3}
_FEW_ITEMS = 2
_MODALITY_SET = {"image", "video"}


def _decode_item(k: int, v, rid) -> tuple:
    """``(modality, grid, runs, stamped)`` of one item's header, each of its exact type and in range."""
    if type(v) is dict and v.keys() == _ITEM_KEYS:
        modality, grid, runs, stamped = v["modality"], v["grid_thw"], v["runs"], v["timestamps"]
        if type(modality) is str and modality in _MODALITIES and type(grid) in (list, tuple) and len(grid) == 3 \
                and plain_ints((*grid, runs), 1, MAX_ID) and type(stamped) is bool:
            return modality, tuple(grid), runs, stamped
    _explain_item(k, v, rid)
    raise _fail(f"items[{k}]", "an item header", v, rid)  # (unreachable: the explanation raised)


_MODALITIES = ("image", "video")


def _explain_item(k: int, v, rid) -> None:
    """Name the first field of a bad item header."""
    f = f"items[{k}]"
    v = _dict(v, f, _ITEM_KEYS, rid)
    modality = v["modality"]
    if type(modality) is not str or modality not in _MODALITIES:
        raise _fail(f"{f}.modality", "'image' or 'video'", modality, rid)
    grid = v["grid_thw"]
    if type(grid) not in (list, tuple) or len(grid) != 3:
        raise _fail(f"{f}.grid_thw", "[t, h, w]", grid, rid)
    for g in grid:
        _int(g, f"{f}.grid_thw", rid, low=1, high=MAX_ID)
    _int(v["runs"], f"{f}.runs", rid, low=1, high=MAX_ID)
    if type(v["timestamps"]) is not bool:
        raise _fail(f"{f}.timestamps", "a bool", _typename(v["timestamps"]), rid)


def _load(obj, limits: Limits, rid) -> dict:
    """The payload as a dict with the right format, version and keys."""
    if type(obj) in (str, bytes, bytearray):
        if len(obj) > limits.max_payload_chars:
            raise WireFormatError("wire", f"at most {limits.max_payload_chars} characters", len(obj), request_id=rid)
        # a payload is one object with a few small ones inside (spec, sizes, one per item): count the
        # objects and lists before parsing, so a text of millions of them costs one scan, not gigabytes
        # (and the values in them: an honest payload has about 8 commas and 4 colons per item)
        text = obj if type(obj) is str else bytes(obj).decode("latin-1")
        opens = text.count("{") + text.count("[")
        most = 2 * limits.max_items + 8
        if opens > most:
            raise WireFormatError("wire.json", f"at most {most} JSON objects and lists (limits.max_items)", opens,
                                 request_id=rid)
        separators, most = text.count(",") + text.count(":"), 16 * limits.max_items + 128
        if separators > most:
            raise WireFormatError("wire.json", f"at most {most} JSON values (limits.max_items)", separators,
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
        raise WireFormatError("wire.version", VERSION, version, request_id=rid,
                               hint="encoder and prefill run different mm-handoff versions")
    return _dict(obj, "payload", _KEYS, rid)


def _header(obj: dict, limits: Limits, rid) -> tuple:
    """Scalar fields and declared sizes, each bounded before anything is allocated."""
    n = _int(obj["length"], "length", rid, low=1)
    if n > limits.max_prompt_len:
        raise WireFormatError("wire.length", f"at most {limits.max_prompt_len} tokens", n, request_id=rid)
    for key in ("family", "convention", "checksum"):
        if type(obj[key]) is not str or len(obj[key]) > 256:
            raise _fail(key, "a string (at most 256 characters)", _typename(obj[key]), rid)
    digest = obj["tokenizer_digest"]
    if digest is not None and (type(digest) is not str or len(digest) > 256):
        raise _fail("tokenizer_digest", "a string or null", _typename(digest), rid)
    delta = obj["mrope_position_delta"]
    if delta is not None:
        delta = _int(delta, "mrope_position_delta", rid, low=-MAX_COUNT, high=MAX_COUNT)
    sizes = _dict(obj["sizes"], "sizes", _SIZE_KEYS, rid)
    n_rle = _int(sizes["rle"], "sizes.rle", rid, low=1, high=n)
    n_runs = _int(sizes["runs"], "sizes.runs", rid, low=0, high=n)
    if n_runs > limits.max_runs:
        raise WireFormatError("wire.sizes.runs", f"at most {limits.max_runs} pad runs (limits.max_runs)", n_runs,
                             request_id=rid)
    n_ts = _int(sizes["timestamps"], "sizes.timestamps", rid, low=0, high=n_runs)
    heads = _decode_items(_list(obj["items"], "items", rid, limits.max_items), rid)
    if sum(h[2] for h in heads) != n_runs:
        raise _fail("items", f"run counts summing to sizes.runs = {n_runs}", sum(h[2] for h in heads), rid)
    if sum(h[2] for h in heads if h[3]) != n_ts:
        raise _fail("items", f"timestamped groups summing to sizes.timestamps = {n_ts}",
                    sum(h[2] for h in heads if h[3]), rid)
    return n, digest, delta, (n_rle, n_runs, n_ts), heads


def _split_arrays(arrays: np.ndarray, n: int, sizes: tuple, rid) -> tuple:
    """The blob's sections as read-only columns; the ids' run-length form checked here (positive counts
    summing to the prompt length, so the ids cost what the header declared; one canonical form; ids
    >= 0). The runs, timestamps and spans are the items' and the layout's to check."""
    n_rle, n_runs, n_ts = sizes
    values, counts = arrays[:n_rle], arrays[n_rle:2 * n_rle]
    if n_rle <= FEW_VALUES:  # the same checks on lists: a few values beat numpy's per-call overhead
        head = arrays[:2 * n_rle].tolist()
        vals, cnts = head[:n_rle], head[n_rle:]
        least = min(cnts)
        if least < 1:
            raise _fail("arrays.counts", "positive run lengths", least, rid)
        least = min(vals)
        if least < 0:
            raise _fail("arrays.values", f"token ids in [0, {MAX_ID}]", least, rid)
        total = sum(cnts)
        if total != n:
            raise _fail("arrays.counts", f"run lengths summing to length {n}", total, rid)
        k = next((k for k in range(n_rle - 1) if vals[k] == vals[k + 1]), None)
        if k is not None:
            raise _fail("arrays.values", "a run-length form whose neighbouring values differ",
                        f"value {vals[k]} repeated at runs {k} and {k + 1}", rid)
        return _columns(arrays, sizes, values, counts)
    if int(counts.min()) < 1:
        raise _fail("arrays.counts", "positive run lengths", int(counts.min()), rid)
    if int(values.min()) < 0:
        raise _fail("arrays.values", f"token ids in [0, {MAX_ID}]", int(values.min()), rid)
    total = int(counts.sum(dtype=np.int64))
    if total != n:
        raise _fail("arrays.counts", f"run lengths summing to length {n}", total, rid)
    if n_rle > 1 and (values[1:] == values[:-1]).any():  # one canonical form: its checksum is the layout's
        k = int(np.flatnonzero(values[1:] == values[:-1])[0])
        raise _fail("arrays.values", "a run-length form whose neighbouring values differ",
                    f"value {int(values[k])} repeated at runs {k} and {k + 1}", rid)
    return _columns(arrays, sizes, values, counts)


def _columns(arrays: np.ndarray, sizes: tuple, values, counts) -> tuple:
    """The run and timestamp sections as read-only columns (offsets and seconds and span starts summed)."""
    n_rle, n_runs, n_ts = sizes
    at = 2 * n_rle
    if n_runs <= FEW_VALUES:  # summed on a list, packed straight into bytes (read-only, as read_only makes them)
        runs = arrays[at:at + 2 * n_runs].tolist()
        offsets = _packed(list(itertools.accumulate(runs[:n_runs])))
        lengths = _packed(runs[n_runs:])
    else:
        offsets = read_only(np.cumsum(arrays[at:at + n_runs], dtype=np.int64))
        lengths = read_only(arrays[at + n_runs:at + 2 * n_runs].astype(np.int64))
    if not n_ts:
        return values, counts, offsets, lengths, _NO_SECONDS, _NO_SPANS
    at += 2 * n_runs
    seconds = read_only(np.cumsum(arrays[at:at + n_ts], dtype=np.int64) / 10)
    spans = np.empty((n_ts, 2), dtype=np.int64)
    np.cumsum(arrays[at + n_ts:at + 2 * n_ts], out=spans[:, 0])
    np.add(spans[:, 0], arrays[at + 2 * n_ts:], out=spans[:, 1])
    return values, counts, offsets, lengths, seconds, read_only(spans)


def _packed(values: list) -> np.ndarray:
    """A list of ints as a read-only int64 array over ``bytes`` (no one can make it writable)."""
    return np.frombuffer(struct.pack(f"={len(values)}q", *values), dtype=np.int64)


_NO_SECONDS = read_only(np.zeros(0))
_NO_SPANS = read_only(np.zeros((0, 2), dtype=np.int64))


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
    values, counts, offsets, lengths, seconds, spans = _split_arrays(arrays, n, sizes, rid)
    content = WireContent(family=obj["family"], convention=obj["convention"], tokenizer_digest=digest, spec=spec,
                          values=values, counts=counts, heads=tuple(heads), offsets=offsets, lengths=lengths,
                          seconds=seconds, spans=spans, mrope_position_delta=delta, checksum=obj["checksum"])
    actual = checksum(content)
    if actual != content.checksum:
        raise WireFormatError("wire.checksum", content.checksum, actual, request_id=rid,
                                hint="the payload was altered in transit")
    return content
