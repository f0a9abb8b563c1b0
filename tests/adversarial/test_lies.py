"""Adversarial inputs, one test per class of lie: payloads whose checksum is recomputed to match, grids and
metadata that describe gigabytes, exotic objects, silent coercions and hostile plugins. Every input ends in
a typed HandoffError naming its field (or in the correct answer), printed in under 1,000 characters,
within 100 MiB (``adversary.answer`` holds every call to that bound, with a hang guard)."""

from __future__ import annotations

import json
import logging
from functools import partial

import attrs
import numpy as np
import pytest
from adversary import answer, content_of, forged, items_of, refused, resealed, with_item
from handoff_strategies import prompts
from hypothesis import given
from hypothesis import strategies as st

from mm_handoff import HandoffError, HandoffLayout, LayoutError, MultimodalItem, SkewError, accept_layout, get_adapter
from mm_handoff import layout as layout_module
from mm_handoff.adapters import FAMILIES, Qwen3VLAdapter
from mm_handoff.adapters.registry import AdapterRegistry
from mm_handoff.errors import (
    AdapterError,
    AdapterRegistrationError,
    GridMismatchError,
    TokenMismatchError,
    WireFormatError,
)
from mm_handoff.layout.mrope import PATTERNS, mrope_positions
from mm_handoff.layout.spec import TokenSpec
from mm_handoff.reading import Limits

ADAPTER = Qwen3VLAdapter(convention="pad_only")
S = ADAPTER.spec
TEXT = [100, 101, 198]  # (ending in a newline: without a tokenizer a '<' after it is known to stand alone)
RAW = [*TEXT, S.vision_start, S.video_pad, S.vision_end, 103, S.vision_start, S.image_pad, S.vision_end, 104]
VIDEO, IMAGE = [(2, 4, 4)], [(1, 4, 4)]
META = [{"fps": 2.0, "frames_indices": [0, 1, 2, 3]}]
IDS = ADAPTER.rebuild_token_ids(RAW, image_grid_thw=IMAGE, video_grid_thw=VIDEO, video_metadata=META)
LAYOUT = ADAPTER.derive_layout(IDS, image_grid_thw=IMAGE, video_grid_thw=VIDEO)  # carries its mRoPE delta
SHAPES = [(n, ADAPTER.handle_row_width) for n in LAYOUT.multimodal_embedding_lengths]


def accept(payload, **kw):
    kw.setdefault("prompt_token_ids", RAW)
    kw.setdefault("embedding_shapes", SHAPES)
    return accept_layout(payload, ADAPTER, request_id="r1", **kw)


def test_the_honest_handoff_is_accepted():
    """The baseline every lie below departs from (so a refusal below is the lie's, not the set-up's)."""
    back, exc = answer(lambda: accept(LAYOUT.to_wire(), image_grid_thw=IMAGE, video_grid_thw=VIDEO))
    assert exc is None and back == LAYOUT and LAYOUT.items[0].timestamps == (0.2, 1.2)


def _shifted(item, at: int, by: int):
    """An item's runs and spans with every position >= ``at`` moved by ``by`` (an id inserted before them)."""
    off = np.where(item.offsets >= at, item.offsets + by, item.offsets)
    spans = None if item.spans is None else np.where(item.spans >= at, item.spans + by, item.spans)
    return attrs.evolve(item, offsets=off, spans=spans)


def _inserted(content, at: int, token: int):
    ids = np.insert(LAYOUT.token_ids, at, token)
    return forged(content, ids, [_shifted(w, at, 1) for w in items_of(content)])


# ---------------------------------------------------------------- 1. claims checked against the ids
def test_claims_are_checked_against_the_ids():
    c = content_of(LAYOUT)
    video = items_of(c)[0]
    end0 = int(video.offsets[0] + video.lengths[0])  # group 0's <|vision_end|>
    digit = int(video.spans[1][0]) + 1  # group 1's first digit ('1' of "<1.2 seconds>")
    relabelled = LAYOUT.token_ids.copy()
    relabelled[digit] = S.timestamps.digits[7]  # the text now says 7.2, the claim still 1.2
    lies = [
        (resealed(c, items=with_item(c, 0, timestamps=np.array([9.0, 3.0]))), "items[0].timestamps[0]"),
        (resealed(c, items=with_item(c, 0, spans=np.array([[0, 1], [0, 1]]))), "items[0].timestamp_spans[0]"),
        (forged(c, relabelled, items_of(c)), "items[0].timestamps[1]"),
        (_inserted(c, end0 + 1, 777), "items[0].token_ids between groups 0 and 1"),  # a foreign token
        (_inserted(c, digit, S.timestamps.digits[0]), "items[0].timestamps"),  # "<01.2 seconds>": not :.1f
        (resealed(c, mrope_position_delta=10**9), "mrope_position_delta"),
        (resealed(c, items=with_item(c, 1, grid_thw=(1, 8, 2))), "mrope_position_delta"),  # same pads, other delta
    ]
    for payload, field in lies:
        refused(partial(accept, payload), field=field)
    transposed = resealed(c, items=with_item(c, 1, grid_thw=(1, 4, 4)))  # the honest grid: accepted
    assert answer(lambda: accept(transposed, image_grid_thw=IMAGE))[0] == LAYOUT
    wide = TokenSpec(**{**S.as_dict(), "timestamps": S.timestamps})
    other = ADAPTER.derive_layout(ADAPTER.rebuild_token_ids(
        RAW, image_grid_thw=[(1, 4, 8)], video_grid_thw=VIDEO, video_metadata=META),
        image_grid_thw=[(1, 4, 8)], video_grid_thw=VIDEO)
    assert other.spec == wide
    swapped = resealed(content_of(other), items=with_item(content_of(other), 1, grid_thw=(1, 8, 4)))
    # (1, 8, 4) has the pads and the delta of (1, 4, 8): only this request's own grids tell them apart
    refused(lambda: accept_layout(swapped, ADAPTER, image_grid_thw=[(1, 4, 8)], video_grid_thw=VIDEO),
            GridMismatchError, "image_grid_thw")


# ---------------------------------------------------------------- 2. the carried spec is this side's
def test_the_carried_spec_must_equal_this_sides():
    c = content_of(LAYOUT)
    merge1 = TokenSpec(**{**S.as_dict(), "timestamps": S.timestamps, "merge_size": 1})
    no_vocab = TokenSpec(**{**S.as_dict(), "timestamps": None})
    lies = [
        # a spec that changes how pads map to rows, with grids that agree with it (a consistent lie)
        (resealed(c, spec=merge1,
                  items=(with_item(c, 0, grid_thw=(2, 2, 2))[0], with_item(c, 1, grid_thw=(1, 2, 2))[1]),
                  mrope_position_delta=None), SkewError, "spec.merge_size"),
        (resealed(c, spec=no_vocab, items=tuple(attrs.evolve(w, timestamps=None, spans=None) for w in items_of(c))),
         SkewError, "spec.timestamps"),
        (resealed(c, tokenizer_digest=None), SkewError, "tokenizer_digest"),
        (resealed(c, spec=TokenSpec(**{**S.as_dict(), "timestamps": S.timestamps, "image_pad": S.video_pad,
                                       "video_pad": S.image_pad})), HandoffError, ""),
        (resealed(c, convention="replace_wrapper"), SkewError, "convention"),
        (resealed(c, family="qwen3_5"), SkewError, "family"),
    ]
    for payload, error, field in lies:
        refused(partial(accept, payload, prompt_token_ids=None), error, field)


# ---------------------------------------------------------------- 3. the raw prompt is checked exactly
def test_a_deleted_marker_or_text_before_a_placeholder_is_refused():
    """The cases a prefix comparison let through: the token right before a placeholder deleted."""
    for convention in ("pad_only", "replace_wrapper"):
        adapter = Qwen3VLAdapter(convention=convention)
        ids = adapter.rebuild_token_ids(RAW, image_grid_thw=IMAGE, video_grid_thw=VIDEO, video_metadata=META)
        lay = adapter.derive_layout(ids, image_grid_thw=IMAGE, video_grid_thw=VIDEO)
        for at in (3, 2, 7, 6):  # the <|vision_start|> before the video / image, and the text before them
            edited = RAW[:at] + RAW[at + 1:]
            refused(partial(accept_layout, lay.to_wire(), adapter, prompt_token_ids=edited), HandoffError, "prompt")


@given(prompts(), st.data())
def test_every_one_token_edit_of_the_raw_prompt_is_refused(case, data):
    """Accepted exactly when the edited prompt re-expands (with the request's own grids and metadata) to the
    layout's ids; any deletion, insertion or substitution of one token is refused."""
    adapter, raw, image_grids, video_grids, metas, expanded = case
    layout = adapter.derive_layout(expanded, image_grid_thw=image_grids, video_grid_thw=video_grids, mrope=False)
    spec = adapter.spec
    kind = data.draw(st.sampled_from(["delete", "insert", "replace"]))
    at = data.draw(st.integers(0, len(raw) - (kind != "insert")))
    token = data.draw(st.sampled_from([spec.vision_start, spec.vision_end, spec.image_pad, spec.video_pad, 100, 4999]))
    edited = {"delete": raw[:at] + raw[at + 1:], "insert": raw[:at] + [token] + raw[at:],
              "replace": raw[:at] + [token] + raw[at + 1:]}[kind]
    try:
        same = np.array_equal(adapter.rebuild_token_ids(edited, image_grid_thw=image_grids, video_grid_thw=video_grids,
                                                        video_metadata=metas), expanded)
    except HandoffError:
        same = False
    if len(edited) == len(expanded):  # read as an expanded prompt: equal ids or refused
        same = edited == list(expanded)
    result, exc = answer(lambda: accept_layout(layout.to_wire(), adapter, prompt_token_ids=edited))
    assert (exc is None) == same, (kind, at, token, exc)


# ---------------------------------------------------------------- 4. bounded work from small inputs
def test_small_inputs_that_describe_huge_work_are_refused_cheaply(monkeypatch):
    c = content_of(LAYOUT)
    for groups, field in ((1 << 20, "wire.length"), (1 << 18, "wire.sizes.runs")):  # 3M and 786k ids
        unit = [S.vision_start, S.video_pad, S.vision_end]  # one video of one-pad groups: ~220 / 55 KB of payload
        ids = np.concatenate([[100], np.tile(np.asarray(unit, dtype=np.int32), groups)])
        offs = np.arange(groups, dtype=np.int64) * 3 + 2
        video = attrs.evolve(items_of(c)[0], grid_thw=(groups, 2, 2), offsets=offs, lengths=np.ones(groups, np.int64),
                             timestamps=None, spans=None)
        bomb = forged(c, ids, [video])
        assert len(json.dumps(bomb)) < 300_000
        refused(partial(HandoffLayout.from_wire, bomb), WireFormatError, field)
    for text, field in (("[" + "{}," * 22_000_000 + "{}]", "wire"), ("[" + "{}," * 5_000_000 + "{}]", "wire.json")):
        refused(partial(HandoffLayout.from_wire, text), WireFormatError, field)  # 66 MB, 15 MB of empty objects
    # the largest payload the limits admit, altered in transit: refused before a single item is built
    g = Limits().max_runs
    meta = [{"fps": 1.0, "frames_indices": list(range(2 * g))}]
    raw = [100, S.vision_start, S.video_pad, S.vision_end]
    big = ADAPTER.derive_layout(ADAPTER.rebuild_token_ids(raw, video_grid_thw=[(g, 2, 2)], video_metadata=meta),
                                video_grid_thw=[(g, 2, 2)], mrope=False).to_wire()
    never = classmethod(lambda *a, **k: pytest.fail("an item was built before the checksum was verified"))
    monkeypatch.setattr(layout_module.MultimodalItem, "from_arrays", never)
    refused(lambda: HandoffLayout.from_wire(dict(big, checksum="0" * 32)), WireFormatError)
    monkeypatch.undo()
    huge = [[2, 2, 2_000_000_000]]
    for call in (lambda: ADAPTER.rebuild_token_ids(raw, video_grid_thw=huge, video_metadata=meta),
                 lambda: ADAPTER.stock_token_ids(raw, video_grid_thw=huge),
                 lambda: ADAPTER.mrope_positions(raw, video_grid_thw=huge),
                 lambda: ADAPTER.derive_layout(raw, video_grid_thw=huge)):
        refused(call, GridMismatchError, "video_grid_thw[0]")
    small = Limits(max_prompt_len=LAYOUT.prompt_len - 1)
    refused(lambda: accept(LAYOUT.to_wire(), limits=small), WireFormatError, "wire.length")
    assert answer(lambda: accept(LAYOUT.to_wire(), limits=Limits(max_prompt_len=LAYOUT.prompt_len)))[0] == LAYOUT


# ---------------------------------------------------------------- 5. caches hold no request's data
def test_caches_stay_bounded_over_large_and_varied_requests():
    import tracemalloc

    adapter = Qwen3VLAdapter(convention="pad_only")
    raw = [100, S.vision_start, S.video_pad, S.vision_end]
    tracemalloc.start()
    try:
        for k in range(40):  # large images, each of another shape
            grid = [(1, 2 * (40 + k), 2 * (64 - k))]
            img = [100, S.vision_start, S.image_pad, S.vision_end]
            mrope_positions(adapter.stock_token_ids(img, image_grid_thw=grid), S, image_grid_thw=grid)
        first = tracemalloc.get_traced_memory()[0]
        for k in range(20):  # long videos at other frame rates: new timestamp texts each time
            meta = [{"fps": 1.0 + k / 7, "frames_indices": list(range(0, 1536, 2))}]
            adapter.rebuild_token_ids(raw, video_grid_thw=[(384, 2, 2)], video_metadata=meta)
        grown = tracemalloc.get_traced_memory()[0] - first
    finally:
        tracemalloc.stop()
    assert PATTERNS.nbytes <= PATTERNS.max_bytes and adapter._ts_cache.nbytes <= adapter._ts_cache.max_bytes
    assert grown < 2 << 20, grown  # the timestamp texts are bounded to 256 KiB of ids (plus their keys)


# ---------------------------------------------------------------- 6. no untyped escapes
class EvilInt(int):
    """An int whose comparisons and conversions raise (a plugin's or a transport's odd type)."""

    def _boom(self, *a):
        raise RuntimeError("evil")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __int__ = __index__ = __float__ = _boom
    __hash__ = int.__hash__


class EvilDict(dict):
    def _boom(self, *a, **k):
        raise RuntimeError("evil")

    get = __getitem__ = keys = items = values = __iter__ = _boom


def test_exotic_inputs_end_in_typed_errors_or_correct_answers():
    torch = pytest.importorskip("torch")
    video_raw = [100, S.vision_start, S.video_pad, S.vision_end]
    frames = {"frames_indices": [0, 1, 2, 3]}
    tiny_fps = [dict(frames, fps=1e-320)]
    refused(lambda: ADAPTER.rebuild_token_ids(video_raw, video_grid_thw=VIDEO, video_metadata=tiny_fps),
            HandoffError, "video_metadata[0].fps")
    refused(lambda: ADAPTER.rebuild_token_ids(video_raw, video_grid_thw=VIDEO,
                                              video_metadata=[{"fps": 2.0, "frames_indices": [0, 10**400]}]),
            HandoffError, "video_metadata[0].frames_indices")
    refused(lambda: ADAPTER.rebuild_token_ids(video_raw, video_grid_thw=VIDEO, video_metadata=[EvilDict(fps=2.0)]),
            HandoffError, "video_metadata[0]")
    refused(lambda: ADAPTER.rebuild_token_ids(video_raw, video_grid_thw=5, video_metadata=META), GridMismatchError,
            "video_grid_thw")
    refused(lambda: ADAPTER.stock_token_ids(video_raw, video_grid_thw=[[2, 2**64, 2]]), GridMismatchError,
            "video_grid_thw[0]")
    grad = torch.ones(LAYOUT.prompt_len, requires_grad=True)
    refused(lambda: accept(LAYOUT.to_wire(), prompt_token_ids=grad), LayoutError, "prompt_token_ids")
    refused(lambda: HandoffLayout.from_wire(EvilDict(LAYOUT.to_wire())), WireFormatError, "wire.payload")
    refused(lambda: HandoffLayout.from_wire(dict(LAYOUT.to_wire(), length=EvilInt(5))), WireFormatError, "wire.length")
    refused(lambda: accept(LAYOUT.to_wire(), mrope_position_ids=(3, 10**5000)), HandoffError, "mrope_position_ids")
    # an int subclass that misbehaves is read as the int it is: the correct answer, not an escape
    evil_grid = [(EvilInt(2), EvilInt(4), 4)]
    assert answer(lambda: ADAPTER.stock_token_ids(video_raw, video_grid_thw=evil_grid))[0].shape == (11,)
    assert answer(lambda: accept(LAYOUT.to_wire(), embedding_shapes=[(EvilInt(8), 16384), (4, 16384)]))[0] == LAYOUT
    handle = EvilDict(tensor_size=[8, 16384])  # a handle dict whose get() raises: its stored size is read
    assert answer(lambda: accept(LAYOUT.to_wire(), embeddings=[handle, {"tensor_size": [4, 16384]}],
                                 embedding_shapes=None))[0] == LAYOUT
    refused(lambda: accept(LAYOUT.to_wire(), embeddings=[EvilDict(tensor_size=[9, 16384]), {"tensor_size": [4, 16384]}],
                           embedding_shapes=None),
            HandoffError, "embedding_rows")
    for value in (10**5000, _nested(50_000), list(range(3_000_000)), EvilDict(a=1)):  # messages always print short
        exc = LayoutError(value, value, value, request_id=value)
        assert len(str(exc)) <= 1000 and str(exc)


def _nested(depth: int) -> list:
    out = inner = []
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return out


# ---------------------------------------------------------------- 7. nothing is coerced silently
def test_nothing_is_coerced_silently():
    refused(lambda: ADAPTER.derive_layout([100, True, 101]), LayoutError, "token_ids")
    refused(lambda: accept(LAYOUT.to_wire(), prompt_token_ids=[*RAW[:-1], True]), LayoutError, "prompt_token_ids")
    refused(lambda: ADAPTER.mrope_positions(np.ma.masked_array(IDS, mask=np.zeros(len(IDS))), image_grid_thw=IMAGE,
                                            video_grid_thw=VIDEO), LayoutError, "token_ids")
    refused(lambda: ADAPTER.derive_layout(bytearray(b"\x01\x02")), LayoutError, "token_ids")
    refused(lambda: ADAPTER.mrope_positions([100, 101], video_grid_thw=VIDEO), GridMismatchError, "video_grid_thw")
    refused(lambda: ADAPTER.mrope_positions(IDS, image_grid_thw=IMAGE * 2, video_grid_thw=VIDEO), GridMismatchError,
            "image_grid_thw")
    refused(lambda: ADAPTER.rebuild_token_ids([100, S.vision_start, S.image_pad, S.vision_end],
                                              image_grid_thw=[(1, 3, 3)]), GridMismatchError, "image_grid_thw[0]")
    refused(lambda: ADAPTER.stock_token_ids([100, 101], image_grid_thw=IMAGE), GridMismatchError, "image placeholders")
    ids_with_0_and_1 = [0, 1, *IDS]  # ids 0 and 1 are ids ('!' and '"'), not bools
    kept = answer(lambda: ADAPTER.derive_layout(ids_with_0_and_1, image_grid_thw=IMAGE, video_grid_thw=VIDEO))
    assert kept[1] is None and kept[0].token_ids[:2].tolist() == [0, 1]


# ---------------------------------------------------------------- 8. the registry
class _EntryPoint:
    def __init__(self, name, value, hook):
        self.name, self.value, self._hook = name, value, hook

    def load(self):
        return self._hook


def _loaded(monkeypatch, *plugins):
    import importlib.metadata

    from mm_handoff.adapters import register_builtin

    eps = [_EntryPoint(n, f"plugin_{n}:register", hook) for n, hook in plugins]
    eps.append(_EntryPoint("builtin", "mm_handoff.adapters:register_builtin", register_builtin))  # listed last
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: eps)
    reg = AdapterRegistry()
    reg.families()  # loads the group
    return reg


def test_plugins_cannot_take_built_in_names_or_leave_half_of_themselves(monkeypatch, caplog):
    def squatter(registry):  # registers a new family, then a built-in name: neither may stay
        registry.register("new_family", lambda **kw: Qwen3VLAdapter(**kw))
        registry.register("qwen3_vl", lambda **kw: None)

    def broken(registry):
        registry.register("half_done", lambda **kw: Qwen3VLAdapter(**kw))
        raise RuntimeError("plugin bug")

    with caplog.at_level(logging.WARNING, logger="mm_handoff"):
        reg = _loaded(monkeypatch, ("squatter", squatter), ("broken", broken))
    assert set(FAMILIES) <= set(reg.families()) and not {"new_family", "half_done"} & set(reg.families())
    assert type(reg.get("qwen3_vl")) is Qwen3VLAdapter
    assert "squatter" in caplog.text and "broken" in caplog.text


def test_registry_misuse_and_bad_factories_are_typed():
    reg = AdapterRegistry(load_entry_points=False)
    for key in (5, None, "", 1.5):
        refused(partial(reg.unregister, key), AdapterRegistrationError, "key")
    reg.register("none", lambda **kw: None)
    refused(lambda: reg.get("none"), AdapterError, "adapter")
    reg.register("ignores", lambda *, tokenizer=None, config=None, convention=None: ADAPTER)  # always pad_only
    refused(lambda: reg.get("ignores", convention="replace_wrapper"), AdapterError, "adapter.convention")

    class Tok:
        unk_token_id = None

        def convert_tokens_to_ids(self, token):
            return 1.5 if token == "<|image_pad|>" else None

    refused(lambda: get_adapter("qwen3_vl", tokenizer=Tok()), AdapterError)
    with pytest.raises(AdapterError) as info:
        get_adapter("qwen3_vl", tokenizer=Tok())
    assert "tokenizer id of <|image_pad|>" in str(info.value) and "1.5" in str(info.value)


# ---------------------------------------------------------------- an adversarial probe's findings, one class each
def test_a_one_group_video_must_close_and_items_must_not_overlap():
    """1: a timestamped video of one group still claims its <|vision_end|>; two expansions cannot share a token."""
    for convention in ("pad_only", "replace_wrapper"):
        adapter = Qwen3VLAdapter(convention=convention)
        s = adapter.spec
        raw, vg = [198, s.vision_start, s.video_pad, s.vision_end, 101], [(1, 4, 4)]
        ids = adapter.rebuild_token_ids(raw, video_grid_thw=vg, video_metadata=[{"fps": 2.0, "frames_indices": [0, 1]}])
        end = adapter.derive_layout(ids, video_grid_thw=vg).items[0].end
        replaced = np.concatenate([ids[:end], [4999], ids[end + 1:]])
        refused(partial(adapter.derive_layout, replaced, video_grid_thw=vg), LayoutError, "items[0].runs[0]")
        deleted = np.delete(ids, end)  # under pad_only the template's own <|vision_end|> then closes the group:
        try:  # a consistent layout, which this request's raw prompt refuses
            lay = adapter.derive_layout(deleted, video_grid_thw=vg)
        except LayoutError:
            continue
        refused(partial(accept_layout, lay.to_wire(), adapter, prompt_token_ids=raw, video_grid_thw=vg),
                TokenMismatchError, "prompt text after the last item")
    two = [198, S.vision_start, S.video_pad, S.vision_end, S.vision_start, S.video_pad, S.vision_end, 100]
    adapter = Qwen3VLAdapter(convention="replace_wrapper")
    meta = [{"fps": 2.0, "frames_indices": [0, 1]}] * 2
    ids = adapter.rebuild_token_ids(two, video_grid_thw=vg * 2, video_metadata=meta)
    first_end = adapter.derive_layout(ids, video_grid_thw=vg * 2).items[0].end
    refused(partial(adapter.derive_layout, np.delete(ids, first_end), video_grid_thw=vg * 2), LayoutError)


def test_timestamps_are_checked_against_the_requests_video_metadata():
    """1: the ids cannot tell an honest timestamp from a forged one; this request's metadata can."""
    raw, vg = [100, S.vision_start, S.video_pad, S.vision_end, 103], [(4, 4, 4)]
    honest_meta = [{"fps": 2.0, "frames_indices": list(range(8))}]
    other_meta = [{"fps": 0.01, "frames_indices": list(range(0, 8000, 1000))}]

    def made(meta):
        return ADAPTER.derive_layout(ADAPTER.rebuild_token_ids(raw, video_grid_thw=vg, video_metadata=meta),
                                     video_grid_thw=vg)
    shapes = [(16, ADAPTER.handle_row_width)]
    lie = made(other_meta).to_wire()
    assert answer(partial(accept_layout, lie, ADAPTER, prompt_token_ids=raw, embedding_shapes=shapes))[1] is None
    refused(partial(accept_layout, lie, ADAPTER, prompt_token_ids=raw, embedding_shapes=shapes,
                    video_metadata=honest_meta), HandoffError, "items[0].timestamps")
    back = answer(partial(accept_layout, made(honest_meta).to_wire(), ADAPTER, video_metadata=honest_meta))[0]
    assert back == made(honest_meta)


def test_arrays_the_caller_can_still_write_are_copied():
    """1: a layout cannot change after it was checked, through any array its caller keeps."""
    off, ln = np.array([9], dtype=np.int64), np.array([4], dtype=np.int64)
    item = MultimodalItem.from_arrays("image", off, ln, (1, 4, 4))
    ids = np.array([100] * 9 + [S.image_pad] * 4 + [101], dtype=np.int32)
    view = ids.view()
    view.flags.writeable = False
    lay = HandoffLayout(view, (item,), S, family="qwen3_vl", convention="pad_only")
    off[0], ids[0] = 0, 7
    assert lay.items[0].first_offset == 9 and lay.token_ids[0] == 100
    assert HandoffLayout.from_wire(lay.to_wire()) == lay


def test_constructors_and_readers_are_bounded_and_typed():
    """2, 3, 4: every odd value at a constructor or reader is a typed error, in bounded time and memory."""
    image = lambda runs: MultimodalItem("image", runs, 1, (1, 2, 2))  # noqa: E731
    for call, field in [
        (partial(image, [(2**70, 1)]), "PlaceholderRun.offset"),
        (partial(MultimodalItem.from_arrays, "image", [2**62], [1], (1, 2, 2)), "MultimodalItem.run_offsets"),
        (partial(MultimodalItem.from_arrays, "image", np.ma.masked_array([0]), [1], (1, 2, 2)), "MultimodalItem"),
        (partial(MultimodalItem, "video", [(1, 1)], 1, (1, 2, 2), np.array([True]), [(0, 1)]), "MultimodalItem"),
        (partial(MultimodalItem, "image", [(1, 1)], 1, b"\x01\x02\x02"), "MultimodalItem.grid_thw"),
        (partial(MultimodalItem, "image", iter(range(10**12)), 1, (1, 2, 2)), "MultimodalItem.runs"),
        (partial(HandoffLayout, [1, 2], 5, S, family="f", convention="pad_only"), "items"),
        (partial(HandoffLayout, [1, 2], (), S, family="f", convention="pad_only", mrope_position_ids=[[0], [0, 1]]),
         "mrope_position_ids"),
        (partial(HandoffLayout, [1, 2], (), S, family="f", convention="pad_only", mrope_position_delta=2**70),
         "mrope_position_delta"),
        (partial(TokenSpec.from_dict, {}), "spec"),
        (partial(TokenSpec.from_dict, {**S.as_dict(), "timestamps": [1]}), "spec.timestamps"),
    ]:
        refused(call, LayoutError, field)
    from mm_handoff.layout.spec import TimestampVocab

    refused(partial(TimestampVocab, 27, 29, 13, 6486, iter(range(10**12))), LayoutError, "spec.timestamps.digits")
    refused(partial(TimestampVocab, 27, 29, 13, 6486, bytes(range(15, 25))), LayoutError, "spec.timestamps.digits")
    video_raw = [100, S.vision_start, S.video_pad, S.vision_end]
    refused(partial(ADAPTER.rebuild_token_ids, video_raw, video_grid_thw=VIDEO,
                    video_metadata=[{"fps": 10**400, "frames_indices": [0, 1, 2, 3]}]), HandoffError,
            "video_metadata[0].fps")
    refused(partial(ADAPTER.derive_layout, IDS, image_grid_thw=np.ones((3_000_000, 3), dtype=np.int64)),
            GridMismatchError, "image_grid_thw")
    refused(partial(ADAPTER.derive_layout, IDS, limits=Limits(max_prompt_len=10)), LayoutError, "token_ids")
    refused(partial(accept, LAYOUT.to_wire(), embedding_shapes=[(4, 16384)] * 2_000_000), HandoffError, "embeddings")
    from mm_handoff.reading import limits_from_env

    refused(partial(limits_from_env, {"MM_HANDOFF_LIMITS": "max_items=\u00b2"}), HandoffError, "MM_HANDOFF_LIMITS")


def test_payloads_of_many_small_values_or_keys_are_refused_cheaply():
    """3: a JSON text or dict within the size limit but made of millions of values or keys."""
    keys = "{" + ",".join(f'"k{i}":1' for i in range(1_000_000)) + "}"
    numbers = "[" + ",".join(["1e5"] * 3_000_000) + "]"
    for text in (keys, numbers, numbers.encode()):
        refused(partial(HandoffLayout.from_wire, text), WireFormatError, "wire.json")
    many = dict(LAYOUT.to_wire(), **{f"extra{i}": 0 for i in range(2_000_000)})
    refused(partial(HandoffLayout.from_wire, many), WireFormatError, "wire.payload")
    import base64
    import zlib

    payload = LAYOUT.to_wire()  # bytes after the end of the zlib stream: not a payload this package wrote
    blob = base64.b64decode(payload["arrays"]) + zlib.compress(b"more")
    refused(partial(HandoffLayout.from_wire, dict(payload, arrays=base64.b64encode(blob).decode())),
            WireFormatError, "wire.arrays")


def test_error_messages_print_huge_containers_cheaply():
    """6: a message never builds the whole repr of a huge value before cutting it."""
    import collections

    for value in (frozenset(range(2_000_000)), collections.deque(range(2_000_000)), b"x" * 50_000_000):
        result, _ = answer(lambda value=value: str(LayoutError("f", value, value)))
        assert len(result) <= 1000


def test_misused_checks_and_misbehaving_adapters_are_typed():
    """6, 8: the public checks called wrongly, and a third-party adapter whose repr, errors or answers misbehave."""
    from mm_handoff import check_skew, validate

    refused(partial(check_skew, LAYOUT, family="qwen3_vl", convention="pad_only", tokenizer_digest=None, spec={}),
            SkewError, "prefill side")
    refused(partial(check_skew, LAYOUT, family=["qwen3_vl"], convention="pad_only", tokenizer_digest=None),
            SkewError, "prefill side")
    refused(partial(validate, {}), HandoffError, "layout")

    class Odd(Qwen3VLAdapter):
        def __repr__(self):
            raise RuntimeError("repr")

        def check_prompt(self, *a, **k):
            class Loud(Exception):
                def __str__(self):
                    raise RuntimeError("str")
            raise Loud

        def layout_mrope_delta(self, *a, **k):
            return np.array([1, 2])

    odd = Odd(convention="pad_only")
    refused(partial(accept_layout, LAYOUT.to_wire(), odd), AdapterError, "adapter.layout_mrope_delta")
    refused(partial(accept_layout, LAYOUT.with_mrope(None, None).to_wire(), odd, prompt_token_ids=RAW), AdapterError,
            "adapter.check_prompt")

    class Config:
        @property
        def model_type(self):
            raise RuntimeError("config")

        def to_dict(self):
            return {}

    refused(partial(get_adapter, Config()), AdapterError)
    reg = AdapterRegistry(load_entry_points=False)
    reg.register(Qwen3VLAdapter, lambda **kw: Qwen3VLAdapter(**kw))
    for k in range(600):  # lookups by many classes keep a bounded cache
        reg.get(type(f"Sub{k}", (Qwen3VLAdapter,), {}), convention="pad_only")
    assert len(reg._cache) <= 256


# ------------------------------------------------- the columnar round's differential probe (old vs new)
def test_item_columns_refuse_heads_that_do_not_match():
    """``from_columns`` reads its heads strictly: a stamped head without timestamps, a head of the
    wrong shape, no heads at all, an endless iterator of heads, timestamps without a stamped head."""
    endless = iter(lambda: ("image", (1, 2, 2), 1, False), None)
    cols = MultimodalItem.from_columns
    for call, field in (
            (partial(cols, [("video", (1, 2, 2), 1, True)], [0], [1]), "MultimodalItem.timestamps"),
            (partial(cols, [("video", (1, 2, 2))], [0], [1]), "MultimodalItem heads"),
            (partial(cols, [("video", (1, 2, 2), 1, 1)], [0], [1]), "MultimodalItem heads"),
            (partial(cols, None, [0], [1]), "MultimodalItem heads"),
            (partial(cols, endless, [0], [1]), "MultimodalItem.runs"),
            (partial(cols, [], [], [], np.array([1.0]), np.array([[0, 1]])), "MultimodalItem.timestamps")):
        refused(call, LayoutError, field)


def test_negative_zero_seconds_are_not_what_the_processor_prints():
    """-0.0 would print as "-0.0" and hash unlike 0.0 (its wire form then failed its own checksum)."""
    refused(partial(MultimodalItem, "video", [(0, 1)], 1, (1, 2, 2), [-0.0], [(0, 1)]), LayoutError,
            "MultimodalItem.timestamps[0]")
    refused(partial(MultimodalItem.from_arrays, "video", [0], [1], (1, 2, 2), np.array([-0.0]), np.array([[0, 1]])),
            LayoutError, "MultimodalItem.timestamps[0]")


def test_run_length_counts_are_read_strictly():
    """Counts that are text, ragged, bools or beyond an int32 are the layout's error, not numpy's."""
    make = partial(HandoffLayout.from_rle, items=(), spec=S, family="qwen3_vl", convention="pad_only")
    for counts, field in ((["1", "2"], "rle.counts"), ([[1], [1, 2]], "rle"), ([True, True], "rle.counts"),
                          ([1, 2**31], "rle.counts"), ([0, 1], "rle.counts")):
        refused(partial(make, [1, 2], counts), LayoutError, field)
    assert make([1, 2], np.array([1, 2], np.uint64)).token_ids.tolist() == [1, 2, 2]


def test_a_grid_given_as_a_tuple_in_an_in_process_payload_reads_as_a_list():
    """JSON gives lists; an in-process dict may hold a tuple: the same grid either way."""
    s = ADAPTER.spec
    layout = ADAPTER.derive_layout([100, s.vision_start, *[s.image_pad] * 4, s.vision_end], image_grid_thw=[(1, 4, 4)],
                                   mrope=False)
    payload = layout.to_wire()
    payload["items"][0]["grid_thw"] = tuple(payload["items"][0]["grid_thw"])
    assert HandoffLayout.from_wire(payload) == layout
