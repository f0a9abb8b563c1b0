"""Every caller reaches an adapter through the protocol: whatever kind of member fails, and however it was
put on the adapter (a mixin outside the Adapter tree, a patched instance, a cached or class or static
method, a partial, a mock, a duck-typed object), an engine's check point and the accept step end in a typed
error that names the member and the request, or in the answer a sound adapter gives."""

from __future__ import annotations

import functools
import pickle
from unittest import mock

import numpy as np
import pytest

from mm_handoff import HandoffError, accept_layout, errors
from mm_handoff.adapters import Qwen3VLAdapter
from mm_handoff.adapters.base import ENTRY_METHODS, typed_adapter
from mm_handoff.errors import AdapterError, GridMismatchError, LayoutError, TokenMismatchError
from mm_handoff.glue.policy import Policy
from mm_handoff.sglang._checks import check_derived
from mm_handoff.trtllm._encoder import build_carried
from mm_handoff.vllm._checks import check_raw_prompt


class Boom(Exception):
    """The failure planted in an adapter member (never a HandoffError)."""


def _raise(*args, **kwargs):
    raise Boom("planted")


SPEC = Qwen3VLAdapter().spec
IDS = np.array([1, SPEC.vision_start, SPEC.image_pad, SPEC.image_pad, SPEC.image_pad, SPEC.image_pad,
                SPEC.vision_end, 2], dtype=np.int32)
GRID = [[1, 4, 4]]
LAYOUT = Qwen3VLAdapter().derive_layout(IDS, image_grid_thw=GRID)


def _made(cls, member):
    """An instance of ``cls`` holding a sound adapter's state, less ``member`` (which ``cls`` supplies)."""
    adapter = cls.__new__(cls)
    adapter.__dict__.update({k: v for k, v in vars(Qwen3VLAdapter()).items() if k != member})
    return adapter


def _mixin_method(member):
    mixin = type("Mixin", (), {member: _raise})
    return _made(type("Mixed", (mixin, Qwen3VLAdapter), {}), member)


def _mixin_property(member):
    mixin = type("Mixin", (), {member: property(_raise)})
    return _made(type("Mixed", (mixin, Qwen3VLAdapter), {}), member)


def _instance_patch(member):
    adapter = Qwen3VLAdapter()
    adapter.__dict__[member] = _raise
    return adapter


def _cached_property(member):
    return _made(type("Cached", (Qwen3VLAdapter,), {member: functools.cached_property(_raise)}), member)


def _class_method(member):
    return type("ClassMethod", (Qwen3VLAdapter,), {member: classmethod(_raise)})()


def _static_method(member):
    return type("StaticMethod", (Qwen3VLAdapter,), {member: staticmethod(_raise)})()


def _partial(member):
    cls = type("Partial", (Qwen3VLAdapter,), {})
    setattr(cls, member, functools.partial(_raise))
    return cls()


def _none(member):
    cls = type("Unset", (Qwen3VLAdapter,), {})
    setattr(cls, member, None)
    return cls()


def _mock(member):
    adapter = mock.Mock(spec=Qwen3VLAdapter, wraps=Qwen3VLAdapter())
    for name in ("family", "convention", "spec", "tokenizer_digest", "handle_row_width", "deepstack_levels",
                 "hidden_size"):
        setattr(adapter, name, getattr(Qwen3VLAdapter(), name))
    if member in ENTRY_METHODS:
        getattr(adapter, member).side_effect = Boom("planted")
    else:
        setattr(type(adapter), member, mock.PropertyMock(side_effect=Boom("planted")))
    return adapter


class _Duck:
    """A duck-typed adapter: the protocol's members of a sound adapter, one of them failing."""

    def __init__(self, member):
        self._sound, self._member = Qwen3VLAdapter(), member

    def __getattr__(self, name):
        if name == self._member:
            raise Boom("planted")
        return getattr(self._sound, name)


KINDS = {"mixin method": _mixin_method, "mixin property": _mixin_property, "instance patch": _instance_patch,
         "cached property": _cached_property, "class method": _class_method, "static method": _static_method,
         "partial": _partial, "None": _none, "mock": _mock, "duck": _Duck}
METHODS = ("derive_layout", "check_prompt", "mrope_positions", "layout_mrope_delta")
ATTRIBUTES = ("spec", "family", "handle_row_width")


class _Output:
    """SGLang's ``MultimodalProcessorOutput`` for IDS as its own processor builds it: one image item on the
    pad run, the mRoPE ids and delta of the layout."""

    input_ids = IDS.tolist()
    mm_items = [type("Item", (), {"modality": "image", "offsets": [(2, 5)]})()]
    mrope_positions, mrope_position_delta = Qwen3VLAdapter().mrope_positions(IDS, image_grid_thw=GRID)


def _calls(rid):
    """Every engine's entry to an adapter, for request ``rid``."""
    return {
        "accept_layout": lambda a: accept_layout(LAYOUT.to_wire(), a, embedding_shapes=[(4, 16384)],
                                                 prompt_token_ids=[1, SPEC.vision_start, SPEC.image_pad,
                                                                   SPEC.vision_end, 2], request_id=rid),
        "vllm check_raw_prompt": lambda a: check_raw_prompt(IDS[:3], a, images=1, videos=0, request_id=rid),
        "sglang check_derived": lambda a: check_derived(_Output(), a, img_grid_thw=GRID, request_id=rid),
        "trtllm build_carried": lambda a: build_carried(a, IDS, {"image_grid_thw": GRID}, {},
                                                        policy=Policy("raise"), request_id=rid),
    }


CALLS = _calls("r1")


def _planted(exc) -> bool:
    while exc is not None:
        if isinstance(exc, Boom):
            return True
        exc = exc.__cause__
    return False


#: (kind, member): a property stands for an attribute, a class or static method or a partial for a method
ODD = [(kind, member) for kind in KINDS for member in METHODS + ATTRIBUTES
       if not (kind in ("mixin property", "cached property") and member in METHODS)
       and not (kind in ("class method", "static method", "partial") and member in ATTRIBUTES)]


@pytest.mark.parametrize("kind, member", ODD)
@pytest.mark.parametrize("call", CALLS)
def test_an_odd_adapter_member_ends_typed_naming_member_and_request(call, kind, member):
    adapter = KINDS[kind](member)
    try:
        answer = CALLS[call](adapter)
    except HandoffError as exc:
        assert exc.request_id == "r1", (exc.field, exc.request_id)
        assert repr(exc).startswith(type(exc).__name__)  # printable, whatever the adapter's values are
        if _planted(exc):  # the planted failure: the adapter's error, naming what of it failed
            assert isinstance(exc, AdapterError) and exc.field.startswith("adapter."), (type(exc), exc.field)
        else:  # a member of the wrong kind (a method for a name, None): named, as the adapter's or the layout's
            assert exc.field in (f"adapter.{member}", "adapter.tokenizer_digest", member), (type(exc), exc.field)
    except Exception as exc:  # the one thing that must never happen: an untyped escape
        pytest.fail(f"{call} with a {kind} {member}: untyped {type(exc).__name__}: {exc}")
    else:  # the odd member was not reached: the answer is a sound adapter's
        assert answer == CALLS[call](Qwen3VLAdapter()), (call, kind, member)


def test_a_sound_adapter_passes_every_call():
    """The calls above are requests a sound adapter accepts, so a refusal there is the odd member's."""
    for call in CALLS.values():
        call(Qwen3VLAdapter())


def test_a_layout_method_must_give_a_layout():
    """An entry method that answers with something else than the protocol's type is named, not used."""
    cls = type("Wrong", (Qwen3VLAdapter,), {"derive_layout": lambda self, *a, **k: "not a layout"})
    with pytest.raises(AdapterError) as info:
        check_derived(_Output(), cls(), img_grid_thw=GRID, request_id="r1")
    assert info.value.field == "adapter.derive_layout" and info.value.request_id == "r1"


def test_protocol_attributes_are_read_as_their_types():
    """A width, a family or a spec of another type is the adapter's error, not the embeddings'."""
    class AnyEqual:
        def __ne__(self, other):
            return False

        def __eq__(self, other):
            return True

    for name, value in (("handle_row_width", AnyEqual()), ("handle_row_width", "16384"), ("family", b"qwen3_vl"),
                        ("spec", {"image_pad": 1})):
        adapter = _made(type("Odd", (Qwen3VLAdapter,), {name: value}), name)
        with pytest.raises(AdapterError) as info:
            accept_layout(LAYOUT.to_wire(), adapter, embedding_shapes=[(4, 7)], request_id="r1")
        read_first = ("adapter.tokenizer_digest",) if name == "spec" else ()  # a digest of the spec is read first
        assert info.value.field in (f"adapter.{name}", *read_first) and info.value.request_id == "r1", info.value.field


ERRORS = [cls for cls in vars(errors).values()
          if isinstance(cls, type) and issubclass(cls, HandoffError)]


def _prebuilt(cls):
    """One instance of ``cls``, made once (an adapter's module-level error, say)."""
    if cls is TokenMismatchError:
        return cls("token_ids", 1, 2, index=3)
    return cls("adapter's own check", "what it wanted", "what it got")


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("member", METHODS + ATTRIBUTES)
@pytest.mark.parametrize("call", CALLS)
def test_one_error_instance_raised_for_two_requests_names_each(call, member, cls):
    """An adapter that raises one prebuilt error for every request: each request's error names that request
    (the instance named the first request once it had been raised for it)."""
    shared = _prebuilt(cls)

    def fail(*args, **kwargs):
        raise shared

    adapter = _made(type("Shared", (Qwen3VLAdapter,), {member: property(fail) if member in ATTRIBUTES else fail}),
                    member)
    seen = []
    for rid in ("r1", "r2", "r1"):
        try:
            _calls(rid)[call](adapter)
        except HandoffError as exc:
            seen.append(exc)
            assert exc.request_id == rid and f"request '{rid}'" in str(exc), (rid, exc.request_id)
            assert type(exc) is cls and (exc.field, exc.expected, exc.actual) == (shared.field, shared.expected,
                                                                                 shared.actual)
        else:  # this call does not reach the member: the sound adapter's answer
            assert not seen
            return
    assert seen[0].request_id == "r1"  # the earlier error still names its own request


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_with_request_copies_an_error_naming_another_request(cls):
    """The copy keeps the class, the values, the message, the cause and the traceback; only the request differs."""
    try:
        try:
            raise KeyError("underneath")
        except KeyError as cause:
            raise _prebuilt(cls).with_request("first") from cause
    except HandoffError as exc:
        original = exc
    same = original.with_request("first")
    other = original.with_request("second")
    assert same is original and original.request_id == "first"
    assert other is not original and type(other) is cls and other.request_id == "second"
    assert str(other) == str(original).replace("request 'first'", "request 'second'")
    assert isinstance(other.__cause__, KeyError) and other.__traceback__ is original.__traceback__
    assert original.with_request(None) is original


class _OwnInit(LayoutError):  # an adapter's own errors: constructors unlike the base's
    def __init__(self, what):
        super().__init__("adapter.check", what, None)


class _OwnNew(LayoutError):
    def __new__(cls, field, *args, code, **kwargs):
        return super().__new__(cls, field, *args)

    def __init__(self, field, *, code, request_id=None):
        super().__init__(field, "x", "y", request_id=request_id)
        self.code = code


class _Slots(LayoutError):
    __slots__ = "code"  # (a string names one slot)

    def __init__(self, field, code):
        super().__init__(field, "x", "y")
        self.code = code


@pytest.mark.parametrize("make", [lambda: _OwnInit("x"), lambda: _OwnNew("f", code=7), lambda: _Slots("f", 7),
                                  lambda: TokenMismatchError("ids", 1, 2, index=3, hint="h")])
def test_with_request_copies_and_pickles_a_subclass_whatever_its_constructor(make):
    """A copy (and a pickled error: a worker's crosses processes) keeps the class and every value, slots and
    notes included, whatever the subclass's constructor takes; the notes are the copy's own."""
    original = make()
    original.add_note("seen")
    for other in (original.with_request("b"), pickle.loads(pickle.dumps(original.with_request("b")))):
        assert type(other) is type(original) and other.request_id == "b" and other.args == original.args
        assert (other.field, other.expected, other.actual, other.hint) == \
            (original.field, original.expected, original.actual, original.hint)
        assert getattr(other, "code", None) == getattr(original, "code", None)
        assert getattr(other, "index", None) == getattr(original, "index", None)
        other.add_note("the copy's")
        assert original.__notes__ == ["seen"] and original.request_id is None


def test_a_prebuilt_error_is_never_changed_by_the_requests_it_is_raised_for():
    prebuilt = GridMismatchError("image_grid_thw", "grids", "none")

    def fail(self, *args, **kwargs):
        raise prebuilt

    adapter = _made(type("Prebuilt", (Qwen3VLAdapter,), {"derive_layout": fail}), "derive_layout")
    for rid in ("A", None, "B"):
        with pytest.raises(GridMismatchError) as info:
            typed_adapter(adapter, request_id=rid).derive_layout(IDS, image_grid_thw=GRID, request_id=rid)
        assert info.value.request_id == rid
    assert prebuilt.request_id is None
