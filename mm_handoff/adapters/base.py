"""The adapter protocol: everything mm-handoff calls on a family adapter, in one place.

An adapter knows one family's ids and processor convention. It turns the encoder's expanded ids
into a :class:`~mm_handoff.layout.HandoffLayout`, rebuilds the exact aggregated ids on the prefill
side from the un-expanded prompt + grids + video metadata, computes mRoPE ids, checks that a raw
prompt is the one a layout was expanded from, and says what the encoder must ship (deepstack
levels, handle row width). A subclass must set the attributes and implement the three abstract
methods; the rest has working defaults.

Adapters are built by factories registered in :mod:`mm_handoff.adapters.registry` (third-party ones through
the ``mm_handoff.adapters`` entry-point group), called as
``factory(*, tokenizer=None, config=None, convention=None)``; a factory without ``convention`` works
too (:func:`mm_handoff.adapters.registry.build_adapter`).
"""

from __future__ import annotations

import abc
import types
from collections.abc import Sequence

import numpy as np

from ..errors import AdapterError, GridMismatchError, HandoffError, TokenMismatchError, typed_failures
from ..layout import HandoffLayout
from ..layout.spec import REPLACE_WRAPPER, TokenSpec, item_lengths, normalize_grids
from ..layout.tokens import check_token_ids, read_only, readonly_ids
from ..reading import Limits, resolve_limits

#: the methods an engine or a user calls on an adapter once per request: each raises only HandoffError (an
#: untyped failure of any adapter, this package's or a third party's, becomes an AdapterError naming it)
ENTRY_METHODS = ("derive_layout", "rebuild_token_ids", "stock_token_ids", "rebuild_layout", "mrope_positions",
                 "mrope_delta", "layout_mrope_delta", "layout_mrope_positions", "check_prompt", "video_timestamps",
                 "check_video_metadata", "settle_first_timestamp")

_ENTRY_SET = frozenset(ENTRY_METHODS)

#: what an engine reads from an adapter, and the types it must have (read through :func:`typed_adapter`)
ATTRIBUTES = {"family": (str,), "convention": (str,), "spec": (TokenSpec,), "tokenizer_digest": (str, type(None)),
              "deepstack_levels": (int,), "hidden_size": (int, type(None)), "handle_row_width": (int, type(None))}


def _described(obj) -> str:
    """``repr`` of an object, or ``Type: message`` of an exception, even when those raise themselves."""
    try:
        return f"{type(obj).__name__}: {obj}" if isinstance(obj, BaseException) else repr(obj)
    except Exception:
        return f"<{type(obj).__name__}>"


def typed_adapter(adapter, *, request_id=None):
    """``adapter`` seen through the protocol, for one use: every entry method it is asked for raises only
    :class:`~mm_handoff.errors.HandoffError` (another failure becomes an :class:`~mm_handoff.errors.AdapterError`
    naming the method and the request), and every attribute of :data:`ATTRIBUTES` is read as the type the
    protocol says (or an AdapterError naming it). Every caller in the package reaches an adapter this way,
    whatever its class: an :class:`Adapter` subclass, a mixin's method, a patched instance, a duck-typed
    third-party object. Cheap: one small object per call site."""
    if type(adapter) is TypedAdapter:
        if adapter._request_id is request_id:
            return adapter
        adapter = adapter._inner
    return TypedAdapter(adapter, request_id)


class TypedAdapter:
    """An adapter seen through the protocol (see :func:`typed_adapter`); immutable."""

    __slots__ = ("_inner", "_request_id")

    def __init__(self, inner, request_id=None) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_request_id", request_id)

    def __getattr__(self, name: str):  # every protocol member: the proxy has only its two slots
        inner, rid = self._inner, self._request_id
        try:
            value = getattr(inner, name)
        except HandoffError as exc:
            raise exc.with_request(rid)  # noqa: B904
        except Exception as exc:
            raise AdapterError(f"adapter.{name}", f"{name} of {_described(inner)}", _described(exc),
                               request_id=rid, hint="the family adapter failed; see the chained exception") from exc
        if name in _ENTRY_SET:
            if not callable(value):
                raise AdapterError(f"adapter.{name}", "a method", type(value).__name__, request_id=rid)
            return _entry(name, value, rid)
        expected = ATTRIBUTES.get(name)
        if expected is not None and type(value) not in expected \
                and not (name == "spec" and isinstance(value, TokenSpec)):
            raise AdapterError(f"adapter.{name}", " or ".join(t.__name__ for t in expected), type(value).__name__,
                               request_id=rid, hint="the adapter does not follow the protocol")
        return value

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("an adapter is immutable")

    def __repr__(self) -> str:
        return _described(self._inner)


#: the entry methods whose answer the package uses as a layout: anything else is the adapter's error
_GIVES_A_LAYOUT = ("derive_layout", "rebuild_layout")


def _entry(name: str, method, request_id):
    """``method`` raising only HandoffError, naming the request it is called for."""
    def entry(*args, **kwargs):
        rid = kwargs.get("request_id", request_id)
        try:
            result = method(*args, **kwargs)
        except HandoffError as exc:
            raise exc.with_request(rid)  # noqa: B904
        except Exception as exc:
            raise AdapterError(f"adapter.{name}", f"{name}() to succeed", _described(exc), request_id=rid,
                               hint="the family adapter failed; see the chained exception") from exc
        if name in _GIVES_A_LAYOUT and not isinstance(result, HandoffLayout):
            raise AdapterError(f"adapter.{name}", "a HandoffLayout", type(result).__name__, request_id=rid,
                               hint="the adapter does not follow the protocol")
        return result
    return entry


def _typed_member(name: str, value):
    """``value`` set on an adapter class under ``name``: a plain function, static or class method among the
    entry methods, or a plain property among the attributes, wrapped so that a direct call raises only
    HandoffError (once: a wrapped one is marked); anything else as it is (callers in the package reach it
    through :func:`typed_adapter`, which types every kind)."""
    if name in ENTRY_METHODS:
        if isinstance(value, (staticmethod, classmethod)) and isinstance(value.__func__, types.FunctionType):
            return type(value)(_typed_function(name, value.__func__))
        if isinstance(value, types.FunctionType):
            return _typed_function(name, value)
    elif name in ATTRIBUTES and type(value) is property and isinstance(value.fget, types.FunctionType):
        return property(_typed_function(name, value.fget), value.fset, value.fdel, value.__doc__)
    return value


def _typed_function(name: str, fn):
    if getattr(fn, "_mm_handoff_typed", False):
        return fn
    wrapped = typed_failures(f"adapter.{name}", AdapterError)(fn)
    wrapped._mm_handoff_typed = True
    return wrapped


class _TypedClass(abc.ABCMeta):
    """The metaclass of :class:`Adapter`: the entry methods and protocol properties an adapter class defines
    are wrapped when the class is made, and whenever one is set on it later (a patch, a plugin's late fix),
    so a user's direct call is typed too."""

    def __init__(cls, name, bases, namespace, **kwargs) -> None:
        super().__init__(name, bases, namespace, **kwargs)
        for member in (*ENTRY_METHODS, *ATTRIBUTES):
            if member in namespace:
                setattr(cls, member, namespace[member])

    def __setattr__(cls, name: str, value) -> None:
        super().__setattr__(name, _typed_member(name, value))


class Adapter(metaclass=_TypedClass):
    """Base class of family adapters. Instances are immutable after construction.

    Every class's :data:`ENTRY_METHODS` and :data:`ATTRIBUTES` properties are wrapped when the class is made
    (and when one is set on the class later), so whatever an adapter raises reaches the caller as a
    :class:`~mm_handoff.errors.HandoffError`.
    """

    #: family name (also the registry key)
    family: str
    #: the family's ids and sizes
    spec: TokenSpec
    #: processor convention (:data:`mm_handoff.layout.spec.CONVENTIONS`)
    convention: str
    #: deepstack feature levels the encoder must ship per visual row (0 without deepstack)
    deepstack_levels: int
    #: text hidden size, when known
    hidden_size: int | None

    @property
    def tokenizer_digest(self) -> str:
        """Identity of every id this adapter relies on; differs across tokenizers."""
        return self.spec.digest()

    @property
    def handle_row_width(self) -> int | None:
        """Width of one embedding-handle row: hidden * (1 + deepstack levels)."""
        if self.hidden_size is None:
            return None
        return self.hidden_size * (1 + self.deepstack_levels)

    @abc.abstractmethod
    def derive_layout(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, mrope: bool = True,
                      limits=None, request_id=None) -> HandoffLayout:
        """Layout of the encoder-side expanded ids (the primary path). Every method that reads a request's
        data takes ``limits`` (:class:`~mm_handoff.reading.Limits`; None: the process default) and checks
        sizes against it before it converts or expands anything."""

    @abc.abstractmethod
    def rebuild_token_ids(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                          video_metadata: Sequence | None = None, limits=None, request_id=None):
        """The exact aggregated ids from the un-expanded prompt, grids and video metadata."""

    @abc.abstractmethod
    def mrope_positions(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                        request_id=None):
        """``(positions (3, L) int64, delta)``, bitwise equal to HF ``get_rope_index``."""

    def rebuild_layout(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                       video_metadata: Sequence | None = None, mrope: bool = True, limits=None,
                       request_id=None) -> HandoffLayout:
        """Prefill-side fallback: rebuild the ids, then derive their layout."""
        ids = self.rebuild_token_ids(prompt_token_ids, image_grid_thw=image_grid_thw,
                                     video_grid_thw=video_grid_thw, video_metadata=video_metadata,
                                     limits=limits, request_id=request_id)
        return self.derive_layout(ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                                  mrope=mrope, limits=limits, request_id=request_id)

    def mrope_delta(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                    request_id=None) -> int:
        """The delta :meth:`mrope_positions` gives (what the prefill side checks a carried delta against);
        families override it with a cheaper computation."""
        return int(self.mrope_positions(token_ids, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                                        limits=limits, request_id=request_id)[1])

    def layout_mrope_delta(self, layout: HandoffLayout, *, limits=None, request_id=None) -> int:
        """:meth:`mrope_delta` of a checked layout's ids and grids (what the accept step compares a
        carried delta with); families override it with a computation from the runs alone."""
        grids = {m: [i.grid_thw for i in layout.items if i.modality == m] for m in ("image", "video")}
        return self.mrope_delta(layout.token_ids, image_grid_thw=grids["image"], video_grid_thw=grids["video"],
                                limits=limits, request_id=request_id)

    def layout_mrope_positions(self, layout: HandoffLayout, *, limits=None, request_id=None) -> tuple:
        """:meth:`mrope_positions` of a checked layout's ids and grids, ``(positions, delta)`` (what an engine
        that receives no mRoPE ids is handed); families override it with a computation planned from the
        runs."""
        grids = {m: [i.grid_thw for i in layout.items if i.modality == m] or None for m in ("image", "video")}
        return self.mrope_positions(layout.token_ids, image_grid_thw=grids["image"], video_grid_thw=grids["video"],
                                    limits=limits, request_id=request_id)

    def check_prompt(self, layout: HandoffLayout, prompt_token_ids, *, request_id=None) -> None:
        """Raise unless the un-expanded ``prompt_token_ids``, re-expanded with ``layout``'s items, is
        exactly ``layout``'s ids (a TokenMismatchError naming the first difference otherwise).

        Placeholders must match the items one for one, in order; the text between them must sit in the
        layout exactly between the previous item's expansion and the next one's, and nothing else may
        be there. What a placeholder covers in the prompt and what an item covers in the ids are the
        family's (:meth:`placeholder_span`, :meth:`expansion_span`); the layout itself guarantees the
        inside of an item's expansion (its pads, markers and timestamps follow from its ids).
        """
        spec = self.spec
        # an un-expanded prompt is never longer than its expansion: bounded by the accepted layout
        raw = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=layout.prompt_len,
                           bound=("the layout's length: a prompt is never longer than its expansion",
                                  "the prompt is not the one the encoder expanded"))
        places = np.nonzero((raw == spec.image_pad) | (raw == spec.video_pad))[0]
        if (raw[places] == spec.video_pad).tolist() != layout.item_types:  # 0 image, 1 video, in order
            raise GridMismatchError("prompt placeholders", [i.modality for i in layout.items],
                                    ["video" if raw[p] == spec.video_pad else "image" for p in places.tolist()],
                                    request_id=request_id, hint="the prompt is not the one the encoder expanded")
        ids = layout.token_ids
        markers = (spec.image_pad, spec.video_pad, spec.vision_start, spec.vision_end)
        open_id = spec.timestamps.open if spec.timestamps is not None else -1
        cursor = anchor = 0  # where the next text segment starts, in the prompt and in the layout's ids
        segments = []  # (the item it precedes, the layout's ids, the prompt's ids as they expand) per text segment
        for k, (p, item) in enumerate(zip(places.tolist(), layout.items, strict=True)):
            lo, hi = self.placeholder_span(raw, p, item.modality, cursor, layout.convention)
            start, end = self.expansion_span(layout, k, request_id=request_id)
            if start < anchor:
                raise GridMismatchError(f"items[{k}]", f"an expansion starting at or after {anchor} (the end of "
                                        "the previous item's)", start, request_id=request_id,
                                        hint="two items' expansions overlap: a marker between them is missing")
            text = raw[cursor:lo]
            if item.modality == "video" and not (  # (after a marker, or at the start, a '<' stands alone)
                    (text.shape[0] == 0 or int(text[-1]) in markers) and int(ids[start]) == open_id):
                # the first timestamp's '<' as HF's tokenizer reads it after this text
                n, first_open = self.settle_first_timestamp(text, field=f"prompt text before item {k}",
                                                            request_id=request_id)
                if first_open and (n or ids[start] != first_open[-1]):
                    text = np.concatenate([text[:text.shape[0] - n], np.asarray(first_open[:-1], dtype=text.dtype)])
                    if ids[start] != first_open[-1]:
                        raise TokenMismatchError(f"items[{k}] first timestamp", f"'<' as token {first_open[-1]} "
                                                 "(HF's tokenizer on this prompt's text)", int(ids[start]),
                                                 index=start, request_id=request_id,
                                                 hint="the layout's ids are not what this prompt expands to")
            segments.append((k, ids[anchor:start], text))
            cursor, anchor = hi, end
        segments.append((len(places), ids[anchor:], raw[cursor:]))
        # one comparison of all the text (as bytes) when every segment has its length; else, or on a
        # difference, the first segment that differs names it
        if all(a.shape[0] == b.shape[0] for _, a, b in segments) and b"".join(
                [a.astype(np.int32, copy=False).tobytes() for _, a, _ in segments]) == b"".join(
                [b.astype(np.int32, copy=False).tobytes() for _, _, b in segments]):
            return
        for k, a, b in segments:
            field = ("prompt text before the first item" if k == 0 else f"prompt text before item {k}") \
                if k < len(places) else "prompt text after the last item" if k else "prompt text"
            check_token_ids(a, b, request_id=request_id, field=field,
                            limits=Limits(max_prompt_len=layout.prompt_len))  # (both bounded by the layout)

    def settle_first_timestamp(self, text_ids, *, field: str = "prompt text", limits=None,
                               request_id=None) -> tuple:
        """``(n, ids)``: the last ``n`` of ``text_ids`` (the prompt's text right before a video placeholder) and
        the video's first timestamp token are ``ids`` once expanded. A family whose processor tokenizes the
        expanded text whole overrides it (the Qwen layout: ``Ġ<`` after a space); by default nothing merges:
        ``(0, [<the spec's '<'>])``, or ``(0, [])`` without a timestamp vocabulary."""
        vocab = self.spec.timestamps
        return 0, ([] if vocab is None else [vocab.open])

    def placeholder_span(self, raw: np.ndarray, p: int, modality: str, cursor: int, convention: str) -> tuple:
        """``[lo, hi)`` of the prompt that the placeholder at ``p`` stands for: the pad alone, except
        that a video placeholder takes its ``<|vision_start|>``/``<|vision_end|>`` with it under
        ``replace_wrapper`` (the processor replaces the whole trio, or a bare pad)."""
        spec = self.spec
        if modality == "video" and convention == REPLACE_WRAPPER and cursor <= p - 1 and p + 1 < len(raw) \
                and raw[p - 1] == spec.vision_start and raw[p + 1] == spec.vision_end:
            return p - 1, p + 2
        return p, p + 1

    def expansion_span(self, layout: HandoffLayout, k: int, *, request_id=None) -> tuple:
        """``[start, end)`` of the layout's ids that item ``k`` expanded to, in the layout the contract
        describes: an image, its pads; a video, from its first group's timestamp text to its last group's
        ``<|vision_end|>``. Without timestamps (no timestamp vocabulary) the text before the first group
        cannot be told from the prompt's, so the check refuses instead of guessing."""
        if type(k) is not int or not 0 <= k < len(layout.items):
            raise HandoffError("item index", f"an int in [0, {len(layout.items)})", k, request_id=request_id)
        item = layout.items[k]
        firsts, ends = layout.item_pad_bounds()
        if item.modality != "video":
            return firsts[k], ends[k]
        if item.seconds is None:  # (not the tuple view: no float per group)
            raise HandoffError(f"items[{k}].timestamps", "the video's timestamps, to check the raw prompt it "
                               "was expanded from", None, request_id=request_id,
                               hint=f"{self.family}'s timestamp ids are not known without its tokenizer; "
                               "pass the expanded prompt instead")
        return int(item.span_array[0, 0]), ends[k] + 1

    def stock_token_ids(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                        request_id=None) -> np.ndarray:
        """What a stock prefill that ignores the layout builds: each placeholder becomes one pad run.

        This is TensorRT-LLM's ``build_disagg_prefill_multimodal_inputs`` layout (no timestamps, no
        per-group markers); the demo, the CLI and the tests use it to show what goes wrong. The grids
        are bounded by ``limits`` (:class:`~mm_handoff.reading.Limits`) before anything is expanded.
        """
        ids = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=resolve_limits(limits).max_prompt_len)
        spec = self.spec
        image = item_lengths(normalize_grids(image_grid_thw, "image_grid_thw", merge_size=spec.merge_size,
                                             limits=limits), spec.merge_size)
        video = item_lengths(normalize_grids(video_grid_thw, "video_grid_thw", merge_size=spec.merge_size,
                                             limits=limits), spec.merge_size)
        reps = np.ones(len(ids), dtype=np.int64)
        for pad, counts, field in ((spec.image_pad, image, "image"), (spec.video_pad, video, "video")):
            places = np.flatnonzero(ids == pad)
            if len(places) != len(counts):
                raise GridMismatchError(f"{field} placeholders", f"{len(counts)} (one per {field} grid)", len(places),
                                        request_id=request_id)
            reps[places] = counts
        return read_only(np.repeat(ids, reps), np.int32)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(family={self.family!r}, convention={self.convention!r})"
