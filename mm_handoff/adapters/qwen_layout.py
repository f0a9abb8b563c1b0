"""The Qwen video layout shared by Qwen3-VL, -MoE, Qwen3.5, -MoE, Cosmos3(-Omni) and Cosmos3-Edge.

Video ``j`` with grid ``(T', h, w)`` expands to, per temporal group ``g``::

    <ts_g> <|vision_start|> <|video_pad|> * (h*w/merge^2) <|vision_end|>

- ``pad_only`` (transformers >= 5.10.1): only the template's ``<|video_pad|>`` is replaced, the
  template's outer ``<|vision_start|>``/``<|vision_end|>`` stay around the groups;
- ``replace_wrapper`` (transformers <= 5.9, Cosmos3-Edge; vLLM follows its transformers): the whole
  ``<|vision_start|><|video_pad|><|vision_end|>`` trio is replaced, or a bare ``<|video_pad|>`` when
  the template has no markers around it.
Images expand ``<|image_pad|>`` to ``t*h*w/merge^2`` pads in every version; markers stay.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._cache import ByteBoundedCache
from ..errors import GridMismatchError, HandoffError, SkewError
from ..layout import HandoffLayout
from ..layout.contract import derive_layout
from ..layout.mrope import layout_delta, layout_positions, mrope_delta, mrope_positions
from ..layout.spec import (
    CONVENTIONS,
    PAD_ONLY,
    REPLACE_WRAPPER,
    TimestampVocab,
    TokenSpec,
    canonical_spec,
    item_lengths,
    normalize_grids,
    strict_int,
)
from ..layout.tokens import read_only, readonly_ids
from ..layout.vocabularies import QWEN3, Vocabulary
from ..reading import resolve_limits, sequence_len, video_metadata_of
from .base import Adapter
from .text_boundary import BoundaryReader, settle_without_tokenizer
from .timestamps import MAX_SECONDS, calculate_timestamps, format_timestamp, metadata_fields

_SPECIAL_NAMES = {
    "image_pad": "<|image_pad|>",
    "video_pad": "<|video_pad|>",
    "vision_start": "<|vision_start|>",
    "vision_end": "<|vision_end|>",
}
_CONFIG_NAMES = {
    "image_pad": "image_token_id",
    "video_pad": "video_token_id",
    "vision_start": "vision_start_token_id",
    "vision_end": "vision_end_token_id",
}


def detect_convention() -> str:
    """The convention of the installed transformers: ``pad_only`` from release 5.10.1 on (the first
    release that keeps the template's outer markers; 5.10.0 was yanked), ``replace_wrapper`` before.
    Without transformers, ``pad_only`` (current releases)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("transformers")
    except PackageNotFoundError:
        return PAD_ONLY
    from packaging.version import InvalidVersion, Version  # transformers depends on packaging

    try:
        release = Version(installed).release
    except InvalidVersion:
        return PAD_ONLY
    return PAD_ONLY if release >= (5, 10, 1) else REPLACE_WRAPPER


def _cfg(config, *names, default=None):
    """First attribute found on config, its text/vision sub-config, or the default."""
    for name in names:
        for obj in (config, getattr(config, "text_config", None), getattr(config, "vision_config", None)):
            if obj is not None:
                value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
                if value is not None:
                    return value
    return default


def _tok_id(tokenizer, token: str) -> int | None:
    conv = getattr(tokenizer, "convert_tokens_to_ids", None)
    if conv is None:
        return None
    value = conv(token)
    unk = getattr(tokenizer, "unk_token_id", None)
    if value is None or (unk is not None and value == unk):
        return None
    return _strict(value, f"tokenizer id of {token}")


def _strict(value, field: str) -> int:
    """An id or size from a tokenizer or config, as a plain int; 1.5 or "7" is an error, never truncated."""
    try:
        return strict_int(value)
    except (TypeError, ValueError, OverflowError):
        raise HandoffError(field, "an int", value, hint="the tokenizer or config is not the family's") from None


def _timestamp_vocab_from_tokenizer(tokenizer) -> TimestampVocab | None:
    """Timestamp ids from a tokenizer, when each piece is a single token (true for Qwen)."""
    try:
        seconds = tokenizer.encode(" seconds", add_special_tokens=False)
        pieces = [tokenizer.encode(ch, add_special_tokens=False) for ch in "<>.0123456789"]
    except Exception:
        return None
    if len(seconds) != 1 or any(len(p) != 1 for p in pieces):
        return None
    ids = [p[0] for p in pieces]
    probe = tokenizer.encode(format_timestamp(12.5), add_special_tokens=False)
    if probe != [ids[0], ids[4], ids[5], ids[2], ids[8], seconds[0], ids[1]]:
        return None
    return TimestampVocab(open=ids[0], close=ids[1], dot=ids[2], seconds=seconds[0], digits=ids[3:],
                          open_merged=_merged_opens(tokenizer, ids[0]))


def _merged_opens(tokenizer, open_id: int) -> tuple:
    """The tokenizer's tokens longer than ``<`` that end in it (byte-level: ``<`` is itself in the alphabet)."""
    try:
        vocab = tokenizer.get_vocab()
        added = set(getattr(tokenizer, "added_tokens_decoder", None) or ())
    except Exception:
        return ()
    return tuple(sorted(i for piece, i in vocab.items()
                        if len(piece) > 1 and piece.endswith("<") and i not in added and i != open_id))


class QwenLayoutAdapter(Adapter):
    """Adapter for every family with the Qwen video layout; families differ in ids and defaults."""

    #: family defaults, overridden by subclasses
    family = "qwen3_vl"
    default_ids = {"image_pad": 151655, "video_pad": 151656, "vision_start": 151652, "vision_end": 151653}
    #: the released vocabulary (timestamp ids, added tokens, merged '<'); None: unknown without the tokenizer
    vocabulary: Vocabulary | None = QWEN3
    default_temporal_patch_size = 2
    default_merge_size = 2
    default_deepstack_levels = 3
    default_hidden_size: int | None = 4096
    #: a family whose processor always replaces the trio (Cosmos3-Edge) pins its convention
    fixed_convention: str | None = None

    def __init__(self, *, tokenizer=None, config=None, convention: str | None = None) -> None:
        ids = {}
        for key, default in self.default_ids.items():
            from_config = _cfg(config, _CONFIG_NAMES[key]) if config is not None else None
            from_tok = _tok_id(tokenizer, _SPECIAL_NAMES[key]) if tokenizer is not None else None
            if from_config is not None:
                from_config = _strict(from_config, f"config.{_CONFIG_NAMES[key]}")
            if from_config is not None and from_tok is not None and from_config != from_tok:
                raise SkewError(f"{key} id", f"{from_config} (config)", f"{from_tok} (tokenizer)",
                                hint="config and tokenizer come from different checkpoints")
            ids[key] = from_config if from_config is not None else from_tok if from_tok is not None else default
        merge = _strict(_cfg(config, "spatial_merge_size", "merge_size", default=self.default_merge_size),
                        "config.spatial_merge_size")
        temporal = _strict(_cfg(config, "temporal_patch_size", default=self.default_temporal_patch_size),
                           "config.temporal_patch_size") \
            if self.fixed_convention is None else self.default_temporal_patch_size
        known = self.vocabulary
        if tokenizer is not None:
            vocab = _timestamp_vocab_from_tokenizer(tokenizer)
        elif known is not None:
            vocab = TimestampVocab(open=known.open, close=known.close, dot=known.dot, seconds=known.seconds,
                                   digits=known.digits, open_merged=known.open_merged)
        else:
            vocab = None
        self.spec = canonical_spec(TokenSpec(merge_size=merge, temporal_patch_size=temporal, timestamps=vocab, **ids))
        if self.fixed_convention is not None:
            if convention not in (None, self.fixed_convention):
                raise SkewError("convention", self.fixed_convention, convention,
                                hint=f"{self.family}'s processor always uses {self.fixed_convention}")
            convention = self.fixed_convention
        convention = convention or detect_convention()
        if convention not in CONVENTIONS:
            raise HandoffError("convention", f"one of {CONVENTIONS}", convention)
        self.convention = convention
        ds = _cfg(config, "deepstack_visual_indexes") if config is not None else None
        self.deepstack_levels = len(ds) if ds is not None else (
            self.default_deepstack_levels if config is None else 0)
        hidden = None
        if config is not None:
            text = getattr(config, "text_config", None)
            hidden = getattr(text, "hidden_size", None) if text is not None else getattr(config, "hidden_size", None)
        self.hidden_size = _strict(hidden, "config.hidden_size") if hidden is not None else (
            self.default_hidden_size if config is None else None)
        self._tokenizer = tokenizer
        # where a '<' is known to stand alone without a tokenizer: after the family's markers or a newline
        known = self.vocabulary if tokenizer is None else None
        self._safe_before = frozenset((*ids.values(), *(known.newline_ids if known is not None else ())))
        # the '<' of a video's first timestamp, settled against the text before it (a byte-level tokenizer)
        self._boundary = BoundaryReader(tokenizer, vocab.open, vocab.open_merged, ids.values()) \
            if vocab is not None and callable(getattr(tokenizer, "convert_ids_to_tokens", None)) else None
        # ``<t seconds>`` -> ids: a few bytes each, kept up to 256 KiB (a long video has ~1 KiB of them)
        self._ts_cache = ByteBoundedCache(max_bytes=256 << 10, max_item_bytes=1024)

    # ------------------------------------------------------------------ layout / mRoPE
    def derive_layout(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, mrope: bool = True,
                      limits=None, request_id=None) -> HandoffLayout:
        return derive_layout(token_ids, self.spec, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                             family=self.family, convention=self.convention, mrope=mrope,
                             tokenizer_digest=self.tokenizer_digest, limits=limits, request_id=request_id)

    def mrope_positions(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                        request_id=None):
        return mrope_positions(token_ids, self.spec, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                               limits=limits, request_id=request_id)

    def layout_mrope_delta(self, layout: HandoffLayout, *, limits=None, request_id=None) -> int:
        return layout_delta(layout, limits=limits, request_id=request_id)

    def layout_mrope_positions(self, layout: HandoffLayout, *, limits=None, request_id=None) -> tuple:
        return layout_positions(layout, limits=limits, request_id=request_id)

    def mrope_delta(self, token_ids, *, image_grid_thw=None, video_grid_thw=None, limits=None,
                    request_id=None) -> int:
        return mrope_delta(token_ids, self.spec, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw,
                           limits=limits, request_id=request_id)

    # ---------------------------------------------------------------------- rebuild
    def timestamp_ids(self, text: str) -> np.ndarray:
        """Token ids of one ``<t seconds>`` string (cached, bounded; special tokens isolate it)."""
        return self._ts_cache.get(text, lambda: self._spell(text))

    def settle_first_timestamp(self, text_ids, *, field: str = "prompt text", limits=None,
                               request_id=None) -> tuple:
        """``(n, ids)``: the last ``n`` of ``text_ids`` (the prompt's text right before a video placeholder) and
        the first timestamp's ``<`` are ``ids`` as HF's tokenizer reads the whole expanded text (``Ġ<`` after
        a space, ``:<`` after a colon); ``(0, [<])`` when the ``<`` stands alone. Without the tokenizer, a
        typed error wherever it might merge."""
        vocab = self.spec.timestamps
        if vocab is None:
            raise HandoffError("tokenizer", "a tokenizer to spell timestamps", None, request_id=request_id,
                               hint=f"{self.family}'s timestamp ids are not known without its tokenizer")
        text_ids = np.asarray(text_ids)
        if self._boundary is not None:
            return self._boundary.settle(text_ids, field=field, request_id=request_id)
        known = self.vocabulary if self._tokenizer is None else None  # (a tokenizer's own ids are not the table's)
        return settle_without_tokenizer(text_ids, vocab.open, self._safe_before,
                                        known.first_added_id if known else None, field=field, request_id=request_id)

    def _spell(self, text: str) -> np.ndarray:
        vocab = self.spec.timestamps
        if self._tokenizer is not None:
            ids = self._tokenizer.encode(text, add_special_tokens=False)
        elif vocab is not None:
            table = {str(i): d for i, d in enumerate(vocab.digits)}
            table["."] = vocab.dot
            ids = [vocab.open] + [table[ch] for ch in text[1:-len(" seconds>")]] + [vocab.seconds, vocab.close]
        else:
            raise HandoffError("tokenizer", "a tokenizer to spell timestamps", None,
                               hint=f"{self.family}'s timestamp ids are not known without its tokenizer")
        return read_only(np.asarray(ids, dtype=np.int32))

    def video_timestamps(self, metadata, index: int = 0, *, limits=None, request_id=None) -> list:
        """Per-group seconds for one video, from its metadata (not mutated; at most ``limits.max_frames``
        frame indices)."""
        meta = metadata_fields(metadata, index, max_frames=resolve_limits(limits).max_frames, request_id=request_id)
        if meta["frames_indices"] is None:
            raise HandoffError(f"video_metadata[{index}].frames_indices", "the sampled frame indices", None,
                               request_id=request_id,
                               hint="pass the processor's returned metadata (return_metadata=True)")
        fps = 24 if meta["fps"] is None else meta["fps"]
        seconds = calculate_timestamps(meta["frames_indices"], fps, self.spec.temporal_patch_size)
        late = [s for s in seconds if not 0 <= s < MAX_SECONDS]
        if late:
            raise HandoffError(f"video_metadata[{index}].fps", f"a frame rate that puts every frame within "
                               f"{MAX_SECONDS:.0f} s", fps, request_id=request_id,
                               hint=f"a group would be printed at {late[0]!r} s")
        return seconds

    def check_video_metadata(self, layout: HandoffLayout, video_metadata: Sequence, *, limits=None,
                             request_id=None) -> None:
        """The layout's per-group timestamps are the ones this request's video metadata gives (what the
        processor prints from the sampled frames and the source fps); the ids alone cannot tell an
        honest timestamp from a forged one, the request's metadata can."""
        videos = [(k, item) for k, item in enumerate(layout.items) if item.modality == "video"]
        if not isinstance(video_metadata, (list, tuple)) or sequence_len(video_metadata) != len(videos):
            raise HandoffError("video_metadata", f"{len(videos)} entries (one per video)",
                               sequence_len(video_metadata) if isinstance(video_metadata, (list, tuple))
                               else type(video_metadata).__name__, request_id=request_id)
        snapshots = video_metadata_of(video_metadata, limits, request_id=request_id) or []
        for j, ((k, item), meta) in enumerate(zip(videos, snapshots, strict=True)):
            t = item.grid_thw[0]
            seconds = self.video_timestamps(meta, j, limits=limits, request_id=request_id)[:t]
            printed = [float(format_timestamp(x)[1:-len(" seconds>")]) for x in seconds]
            if item.timestamps is None or list(item.timestamps) != printed:
                raise HandoffError(f"items[{k}].timestamps", f"{printed} (from this request's video_metadata[{j}])",
                                   item.timestamps, request_id=request_id,
                                   hint="the carried timestamps are not this request's video's")

    def _video_chunk(self, grid, metadata, index: int, first_open: list, limits, request_id) -> np.ndarray:
        t, h, w = grid
        n = h * w // (self.spec.merge_size ** 2)
        seconds = self.video_timestamps(metadata, index, limits=limits, request_id=request_id)
        if len(seconds) < t:
            raise GridMismatchError(f"video_metadata[{index}].frames_indices",
                                    f"at least {t} temporal groups for grid {grid}", len(seconds),
                                    request_id=request_id)
        body = np.empty(n + 2, dtype=np.int32)
        body[0] = self.spec.vision_start
        body[1:-1] = self.spec.video_pad
        body[-1] = self.spec.vision_end
        parts = []
        for g in range(t):
            stamp = self.timestamp_ids(format_timestamp(seconds[g]))
            parts.append(stamp if g or first_open == [stamp[0]] else
                         np.concatenate([np.asarray(first_open, dtype=np.int32), stamp[1:]]))
            parts.append(body)
        return np.concatenate(parts)

    def rebuild_token_ids(self, prompt_token_ids, *, image_grid_thw=None, video_grid_thw=None,
                          video_metadata: Sequence | None = None, limits=None, request_id=None) -> np.ndarray:
        ids = readonly_ids(prompt_token_ids, "prompt_token_ids", max_len=resolve_limits(limits).max_prompt_len)
        spec = self.spec
        image_grids = normalize_grids(image_grid_thw, "image_grid_thw", merge_size=spec.merge_size, limits=limits)
        video_grids = normalize_grids(video_grid_thw, "video_grid_thw", merge_size=spec.merge_size, limits=limits)
        places = np.flatnonzero((ids == spec.image_pad) | (ids == spec.video_pad))
        kinds = ids[places]
        n_img = int((kinds == spec.image_pad).sum())
        n_vid = len(places) - n_img
        if n_img != len(image_grids):
            raise GridMismatchError("image placeholders", f"{len(image_grids)} (one per image grid)", n_img,
                                    request_id=request_id)
        if n_vid != len(video_grids):
            raise GridMismatchError("video placeholders", f"{len(video_grids)} (one per video grid)", n_vid,
                                    request_id=request_id)
        metas = video_metadata_of(video_metadata, limits, request_id=request_id) or []
        if len(metas) != n_vid:
            raise HandoffError("video_metadata", f"{n_vid} entries (one per video)", len(metas),
                               request_id=request_id)
        img_len = item_lengths(image_grids, spec.merge_size)
        out, cursor, i_img, i_vid = [], 0, 0, 0
        bare = False  # a bare <|video_pad|> came first (replace_wrapper: the trios are filled before it)
        for p in places.tolist():
            if ids[p] == spec.image_pad:
                out.append(ids[cursor:p])
                out.append(np.full(img_len[i_img], spec.image_pad, dtype=np.int32))
                cursor = p + 1
                i_img += 1
                continue
            lo, hi = self.placeholder_span(ids, p, "video", cursor, self.convention)
            if hi - lo == 1:
                bare = True
            elif bare and self.fixed_convention is None:  # a trio after a bare pad, transformers <= 5.9
                raise GridMismatchError(f"video placeholder {i_vid}", "video placeholders that transformers <= 5.9 "
                                        "fills in prompt order", "a <|vision_start|><|video_pad|><|vision_end|> "
                                        "after a bare <|video_pad|>", request_id=request_id,
                                        hint="transformers <= 5.9 gives every video the first trio left before "
                                        "any bare pad, so its prompt holds the videos out of order (their "
                                        "features land on another video's pads); write every video the same way")
            n, first_open = self.settle_first_timestamp(ids[cursor:lo], field=f"prompt text before video {i_vid}",
                                                        request_id=request_id)
            out.append(ids[cursor:lo - n])
            out.append(self._video_chunk(video_grids[i_vid], metas[i_vid], i_vid, first_open, limits, request_id))
            cursor = hi
            i_vid += 1
        out.append(ids[cursor:])
        return read_only(np.concatenate(out), np.int32)
