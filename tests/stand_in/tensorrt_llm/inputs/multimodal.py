"""Stand-in for ``tensorrt_llm/inputs/multimodal.py``.

Mirrors NVIDIA/TensorRT-LLM @ 01138754b3f4b047dfacd714ff121cc7f4df6d67:

* ``MultimodalInput`` (+ ``from_components``, ``to_binding``, ``run_metadata``)
  and ``DisaggPrefillMultimodalInputs`` (+ ``to_multimodal_input``), with the
  same ``__post_init__`` validation (owned ``list[int]`` fields, one
  position/length per item, positive lengths, runs all-or-none and summing to
  ``multimodal_lengths``, ordered, int32-safe; optional
  ``special_token_offsets`` / ``item_types``).
* ``MultimodalParams`` with ``to_handle`` / ``to_tensor`` / ``to_device`` /
  ``has_content``.
* The private mask helpers ``_as_cpu_tensor``, ``_compute_mm_masks``,
  ``_find_mm_token_start_pos_from_masks``, ``_find_mm_token_runs_from_mask``,
  ``_find_mm_embedding_lengths_from_masks`` and ``validate_mm_inputs``,
  ``find_mm_token_lengths``, ``apply_mm_hashes``, ``hexdigest_to_int32``,
  ``check_mm_embed_cumsum_if_needed``.

Simplified: numpy arrays stand in for torch tensors (``to_handle`` produces the
inline handle dicts of the ``shared_tensor`` stand-in; ``to_device`` is a
no-op); the default hasher is SHA-256 instead of blake3 (same 64-hex-digit
contract); ``MultimodalRuntimeData`` keeps only the cumsum arithmetic.
"""

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from tensorrt_llm.inputs.multimodal_data import BaseModalityData, VideoData, serialize_item
from tensorrt_llm.logger import logger

default_hasher = hashlib.sha256
_INT32_MAX = 2**31 - 1
_HASH_SCHEME_TAG = b"trtllm.mm.hash.v1"


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------
def _validate_int_list(values: Any, field_name: str) -> None:
    if not isinstance(values, list):
        raise TypeError(f"{field_name} must be a list")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise TypeError(f"{field_name} must contain only integers")


def _validate_multimodal_positions_and_lengths(
    multimodal_positions: List[int],
    multimodal_lengths: List[int],
    expected_num_items: int,
    expected_num_items_name: str,
) -> None:
    _validate_int_list(multimodal_positions, "multimodal_positions")
    _validate_int_list(multimodal_lengths, "multimodal_lengths")
    if len(multimodal_positions) != len(multimodal_lengths):
        raise ValueError(
            "Position and length arrays must match in size: "
            f"positions={len(multimodal_positions)}, lengths={len(multimodal_lengths)}"
        )
    if len(multimodal_positions) != expected_num_items:
        raise ValueError(
            f"{expected_num_items_name}, multimodal_positions, and multimodal_lengths "
            "must all have the same length"
        )
    if any(p < 0 for p in multimodal_positions):
        raise ValueError("multimodal_positions must be non-negative")
    if any(n <= 0 for n in multimodal_lengths):
        raise ValueError("multimodal_lengths must be positive")


def _validate_multimodal_runs(
    num_items: int,
    multimodal_lengths: List[int],
    multimodal_item_run_cu_offsets: Optional[List[int]],
    multimodal_run_positions: Optional[List[int]],
    multimodal_run_lengths: Optional[List[int]],
    item_count_name: str,
) -> None:
    run_fields = (multimodal_item_run_cu_offsets, multimodal_run_positions, multimodal_run_lengths)
    if all(f is None for f in run_fields):
        return
    if any(f is None for f in run_fields):
        raise ValueError(
            "multimodal_item_run_cu_offsets, multimodal_run_positions, "
            "and multimodal_run_lengths must be provided together"
        )
    offsets, positions, lengths = run_fields
    for name, values in (
        ("multimodal_item_run_cu_offsets", offsets),
        ("multimodal_run_positions", positions),
        ("multimodal_run_lengths", lengths),
    ):
        _validate_int_list(values, name)
        if any(v > _INT32_MAX for v in values):
            raise ValueError(f"{name} values must fit in int32")
    if len(offsets) != num_items + 1:
        raise ValueError(f"multimodal_item_run_cu_offsets length must be len({item_count_name}) + 1")
    if offsets[0] != 0:
        raise ValueError("multimodal_item_run_cu_offsets must start at 0")
    if len(positions) != len(lengths):
        raise ValueError("multimodal_run_positions and multimodal_run_lengths must have the same length")
    if offsets[-1] != len(positions):
        raise ValueError("multimodal_item_run_cu_offsets[-1] must equal the number of flat multimodal runs")
    if any(a > b for a, b in zip(offsets, offsets[1:])):
        raise ValueError("multimodal_item_run_cu_offsets must be non-decreasing")
    if any(p < 0 for p in positions):
        raise ValueError("multimodal_run_positions must be non-negative")
    if any(n <= 0 for n in lengths):
        raise ValueError("multimodal_run_lengths must be positive")
    for idx, (p, n) in enumerate(zip(positions, lengths)):
        if p + n > _INT32_MAX:
            raise ValueError(f"multimodal run {idx} end position exceeds int32 range")
    for item, expected in enumerate(multimodal_lengths):
        lo, hi = offsets[item], offsets[item + 1]
        got = sum(lengths[lo:hi])
        if got != expected:
            raise ValueError(f"multimodal run lengths for item {item} sum to {got}, expected {expected}")
        item_pos, item_len = positions[lo:hi], lengths[lo:hi]
        for (p0, n0), p1 in zip(zip(item_pos, item_len), item_pos[1:]):
            if p1 < p0 + n0:
                raise ValueError("multimodal runs must be ordered and non-overlapping within each item")


# ---------------------------------------------------------------------------
# layout containers
# ---------------------------------------------------------------------------
@dataclass
class MultimodalInput:
    """Per-item multimodal metadata used for KV-cache hashing."""

    multimodal_hashes: List[List[int]]
    multimodal_positions: List[int]
    multimodal_lengths: List[int]
    multimodal_uuids: Optional[List[Optional[str]]] = None
    multimodal_item_run_cu_offsets: Optional[List[int]] = None
    multimodal_run_positions: Optional[List[int]] = None
    multimodal_run_lengths: Optional[List[int]] = None

    def __post_init__(self):
        if not isinstance(self.multimodal_hashes, list):
            raise TypeError("multimodal_hashes must be a list")
        if not all(isinstance(h, list) for h in self.multimodal_hashes):
            raise TypeError("Each element in multimodal_hashes must be a list")
        sizes = [len(h) for h in self.multimodal_hashes]
        if sizes and min(sizes) != max(sizes):
            raise ValueError(f"All hash arrays must have the same length, got lengths: {sizes}")
        _validate_multimodal_positions_and_lengths(
            self.multimodal_positions,
            self.multimodal_lengths,
            len(self.multimodal_hashes),
            "multimodal_hashes",
        )
        if self.multimodal_uuids is not None:
            if not isinstance(self.multimodal_uuids, list):
                raise TypeError("multimodal_uuids must be a list")
            if len(self.multimodal_uuids) != len(self.multimodal_hashes):
                raise ValueError("multimodal_uuids length must match multimodal_hashes length")
            for i, u in enumerate(self.multimodal_uuids):
                if u is not None and not isinstance(u, str):
                    raise TypeError(f"multimodal_uuids[{i}] must be a string or None, got {type(u)}")
        _validate_multimodal_runs(
            len(self.multimodal_hashes),
            self.multimodal_lengths,
            self.multimodal_item_run_cu_offsets,
            self.multimodal_run_positions,
            self.multimodal_run_lengths,
            "multimodal_hashes",
        )

    @classmethod
    def from_components(
        cls,
        mm_hashes: List[List[int]],
        mm_positions: List[int],
        mm_lengths: List[int],
        mm_uuids: Optional[List[Optional[str]]] = None,
        mm_item_run_cu_offsets: Optional[List[int]] = None,
        mm_run_positions: Optional[List[int]] = None,
        mm_run_lengths: Optional[List[int]] = None,
    ) -> "MultimodalInput":
        return cls(
            multimodal_hashes=mm_hashes,
            multimodal_positions=mm_positions,
            multimodal_lengths=mm_lengths,
            multimodal_uuids=mm_uuids,
            multimodal_item_run_cu_offsets=mm_item_run_cu_offsets,
            multimodal_run_positions=mm_run_positions,
            multimodal_run_lengths=mm_run_lengths,
        )

    def run_metadata(self) -> Dict[str, List[int]]:
        out = {}
        for name in ("multimodal_item_run_cu_offsets", "multimodal_run_positions", "multimodal_run_lengths"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def to_binding(self, executor_module: Any) -> Any:
        kwargs = dict(
            multimodal_hashes=self.multimodal_hashes,
            multimodal_positions=self.multimodal_positions,
            multimodal_lengths=self.multimodal_lengths,
            multimodal_uuids=self.multimodal_uuids,
        )
        kwargs.update(self.run_metadata())
        return executor_module.MultimodalInput(**kwargs)


@dataclass
class DisaggPrefillMultimodalInputs:
    """Typed layout returned by an E/P disagg prefill processor."""

    prompt_token_ids: List[int]
    multimodal_lengths: List[int]
    multimodal_positions: List[int]
    multimodal_embedding_lengths: List[int]
    multimodal_item_run_cu_offsets: Optional[List[int]] = None
    multimodal_run_positions: Optional[List[int]] = None
    multimodal_run_lengths: Optional[List[int]] = None
    special_token_offsets: Optional[List[int]] = None
    item_types: Optional[List[int]] = None

    def __post_init__(self) -> None:
        _validate_int_list(self.prompt_token_ids, "prompt_token_ids")
        _validate_int_list(self.multimodal_embedding_lengths, "multimodal_embedding_lengths")
        _validate_multimodal_positions_and_lengths(
            self.multimodal_positions,
            self.multimodal_lengths,
            len(self.multimodal_embedding_lengths),
            "multimodal_embedding_lengths",
        )
        if any(n <= 0 for n in self.multimodal_embedding_lengths):
            raise ValueError("multimodal_embedding_lengths must be positive")
        _validate_multimodal_runs(
            len(self.multimodal_lengths),
            self.multimodal_lengths,
            self.multimodal_item_run_cu_offsets,
            self.multimodal_run_positions,
            self.multimodal_run_lengths,
            "multimodal_lengths",
        )
        if self.special_token_offsets is not None:
            _validate_int_list(self.special_token_offsets, "special_token_offsets")
            if any(o < 0 for o in self.special_token_offsets):
                raise ValueError("special_token_offsets must be non-negative")
        if self.item_types is not None:
            _validate_int_list(self.item_types, "item_types")
            if len(self.item_types) != len(self.multimodal_lengths):
                raise ValueError("item_types length must match multimodal_lengths")

    def to_multimodal_input(self, mm_hashes: List[List[int]]) -> MultimodalInput:
        return MultimodalInput.from_components(
            mm_hashes,
            self.multimodal_positions,
            self.multimodal_lengths,
            mm_item_run_cu_offsets=self.multimodal_item_run_cu_offsets,
            mm_run_positions=self.multimodal_run_positions,
            mm_run_lengths=self.multimodal_run_lengths,
        )


@dataclass
class MultimodalRuntimeData:
    """Chunk accounting from the embed-mask cumsum (arithmetic only)."""

    past_seen_token_num: int
    chunk_end_pos: int
    embed_mask_cumsum: Any
    num_cached_mm_tokens: Optional[int] = None
    num_mm_tokens_in_chunk: Optional[int] = None
    total_embeds_in_request: Optional[int] = None

    def __post_init__(self):
        cs = np.asarray(self.embed_mask_cumsum)
        if self.past_seen_token_num < 0:
            raise ValueError("past_seen_token_num must be non-negative")
        assert cs.size > 0 and self.chunk_end_pos <= cs.size
        self.num_cached_mm_tokens = int(cs[self.past_seen_token_num - 1]) if self.past_seen_token_num > 0 else 0
        self.num_mm_tokens_in_chunk = (
            int(cs[self.chunk_end_pos - 1]) - self.num_cached_mm_tokens if self.chunk_end_pos > 0 else 0
        )
        self.total_embeds_in_request = int(cs[-1])


@dataclass
class MultimodalParams:
    """Container for a request's multimodal input (hash layout) and data."""

    multimodal_input: Optional[MultimodalInput] = None
    multimodal_data: Optional[Dict[str, Any]] = field(default_factory=dict)
    multimodal_runtime: Optional[MultimodalRuntimeData] = None
    input_ids_start_offset: int = 0
    mm_item_order: Optional[List[Dict[str, Union[str, int]]]] = None

    def __post_init__(self):
        if self.multimodal_data is None:
            self.multimodal_data = {}

    @staticmethod
    def _is_shared_tensor_dict(obj: Any) -> bool:
        if not isinstance(obj, dict) or "method_key" not in obj:
            return False
        from tensorrt_llm._torch.shared_tensor import _SharedTensorRebuildMethodRegistry as R

        if obj["method_key"] == R.REBUILD_CUDA:
            return {"tensor_size", "storage_handle", "storage_device"} <= obj.keys()
        if obj["method_key"] == R.REBUILD_CPU:
            return {"tensor_size", "storage_handle", "manager_handle"} <= obj.keys()
        return False

    def _apply_tensor_operation(self, data: Any, operation: str, **kwargs) -> Any:
        if data is None:
            return None
        if isinstance(data, list):
            return [self._apply_tensor_operation(x, operation, **kwargs) for x in data]
        if isinstance(data, dict):
            if operation == "to_tensor" and self._is_shared_tensor_dict(data):
                from tensorrt_llm._torch.shared_tensor import SharedTensorContainer

                try:
                    return SharedTensorContainer.from_dict(data).get_local_view()
                except Exception as e:  # mirrors upstream's wrapping
                    raise RuntimeError(f"Failed to restore tensor from shared tensor dict: {e}")
            return {k: self._apply_tensor_operation(v, operation, **kwargs) for k, v in data.items()}
        if isinstance(data, np.ndarray) and operation == "to_handle":
            from tensorrt_llm._torch.shared_tensor import SharedTensorContainer

            return SharedTensorContainer.from_tensor(data).dump_to_dict()
        return data

    def _check_element(self, element: str) -> None:
        if element != "multimodal_data":
            raise ValueError(f"Unsupported element '{element}'. Only 'multimodal_data' is supported.")

    def to_handle(self, element: str) -> None:
        self._check_element(element)
        if self.multimodal_data is not None:
            self.multimodal_data = self._apply_tensor_operation(self.multimodal_data, "to_handle")

    def to_tensor(self, element: str) -> None:
        self._check_element(element)
        if self.multimodal_data is not None:
            self.multimodal_data = self._apply_tensor_operation(self.multimodal_data, "to_tensor")

    def to_device(self, element: str, device: str, pin_memory: bool = False, target_keywords=None) -> None:
        # No devices in the stand-in: data stays as numpy on the host.
        self._check_element(element)

    def has_content(self) -> bool:
        return bool(self.multimodal_input or self.multimodal_data)


# ---------------------------------------------------------------------------
# hashing and token counting
# ---------------------------------------------------------------------------
def _update_hash(hasher, item: object) -> None:
    hasher.update(_HASH_SCHEME_TAG)
    if isinstance(item, BaseModalityData):
        item.update_hash(hasher)
    else:
        hasher.update(serialize_item(item))


class MMHashResult(NamedTuple):
    hashes: Dict[str, List[str]]
    uuids: Optional[Dict[str, List[Optional[str]]]]


def apply_mm_hashes(mm_data: Dict[str, Any], mm_uuids=None, hash_lib=default_hasher) -> MMHashResult:
    """One 64-hex-digit digest per item; a UUID, when given, is hashed with the content."""
    hashes: Dict[str, List[str]] = {}
    uuids_by_key: Dict[str, List[Optional[str]]] = {}
    for modality, items in mm_data.items():
        items = items if isinstance(items, list) else [items]
        given = None
        if mm_uuids is not None and modality in mm_uuids:
            given = mm_uuids[modality]
            given = given if isinstance(given, list) else [given]
            if len(given) != len(items):
                raise ValueError(
                    f"UUID list length ({len(given)}) doesn't match data items length "
                    f"({len(items)}) for modality '{modality}'"
                )
        digests, uuids = [], []
        for i, item in enumerate(items):
            uuid = given[i] if given else None
            h = hash_lib()
            if uuid is not None:
                h.update(b"<uuid>" + uuid.encode("utf-8") + b"</uuid><content>")
                _update_hash(h, item)
                h.update(b"</content>")
            else:
                _update_hash(h, item)
            digests.append(h.hexdigest())
            uuids.append(uuid)
        hashes[modality] = digests
        uuids_by_key[modality] = uuids
    return MMHashResult(hashes=hashes, uuids=uuids_by_key if mm_uuids is not None else None)


def hexdigest_to_int32(hex_digest: str) -> List[int]:
    if len(hex_digest) != 64:
        raise ValueError(f"Expected 64 character hexadecimal string, got {len(hex_digest)}")
    out = []
    for i in range(0, 64, 8):
        v = int(hex_digest[i : i + 8], 16)
        out.append(v - 0x100000000 if v > 0x7FFFFFFF else v)
    return out


def find_mm_token_lengths(mm_data: Dict[str, Any], input_processor: Any, *, multimodal_data=None) -> Dict[str, List[int]]:
    """Prompt-side token count per item; for video it forwards ``video_grid_thw`` (Qwen3-VL)."""
    grids = ((multimodal_data or {}).get("video") or {}).get("video_grid_thw")
    if grids is not None:
        grids = np.asarray(grids)
        if grids.ndim != 2 or grids.shape[-1] != 3:
            raise ValueError("video_grid_thw must have shape [num_segments, 3]")
    out: Dict[str, List[int]] = {}
    for modality, items in mm_data.items():
        items = items if isinstance(items, list) else [items]
        if not hasattr(input_processor, f"get_num_tokens_per_{modality}"):
            raise AttributeError(
                f"Input processor {type(input_processor).__name__} does not have "
                f"'get_num_tokens_per_{modality}' method required for multimodal hashing."
            )
        counts = []
        for idx, item in enumerate(items):
            if modality == "image":
                counts.append(input_processor.get_num_tokens_per_image(image=item))
            elif modality == "video":
                kwargs: Dict[str, Any] = {}
                if isinstance(item, VideoData):
                    if item.metadata is not None:
                        kwargs["video_metadata"] = item.metadata
                    item = item.frames
                if isinstance(item, np.ndarray):
                    item = list(item)
                if not item:
                    raise ValueError("Video frames cannot be empty")
                kwargs["video"] = item
                if grids is not None and (len(items) == 1 or grids.shape[0] == len(items)):
                    kwargs["video_grid_thw"] = grids if len(items) == 1 else grids[idx : idx + 1]
                counts.append(input_processor.get_num_tokens_per_video(**kwargs))
            elif modality == "audio":
                counts.append(input_processor.get_num_tokens_per_audio(audio=item))
            else:
                raise ValueError(f"Unsupported modality: {modality}")
        out[modality] = counts
    return out


_MM_METADATA_ONLY_KEYS = frozenset(
    {
        "mrope_config",
        "multimodal_embed_mask_cumsum",
        "multimodal_embedding_lengths",
        "special_token_offsets",
        "layout_metadata",
    }
)


def _has_mm_payload_keys(py_multimodal_data: Optional[dict]) -> bool:
    return bool(py_multimodal_data) and bool(set(py_multimodal_data) - _MM_METADATA_ONLY_KEYS)


def check_mm_embed_cumsum_if_needed(py_multimodal_data, *, begin_compute: int, end_compute: int, prompt_len: int) -> None:
    assert 0 <= begin_compute <= end_compute <= prompt_len, (
        f"invalid window: {begin_compute}..{end_compute}/{prompt_len}"
    )
    if not _has_mm_payload_keys(py_multimodal_data):
        return
    if py_multimodal_data.get("multimodal_embed_mask_cumsum") is not None:
        return
    if begin_compute > 0 or end_compute < prompt_len:
        raise ValueError(
            "Request requires multimodal_embed_mask_cumsum for chunked prefill or KV-cache reuse"
        )
    logger.warning("multimodal_embed_mask_cumsum missing on multimodal request")


# ---------------------------------------------------------------------------
# the private mask helpers (numpy instead of torch)
# ---------------------------------------------------------------------------
def _as_cpu_tensor(input_ids: Union[np.ndarray, List[int]]) -> np.ndarray:
    """Coerce ids to a 1-D host array (the stand-in's 'CPU tensor')."""
    return np.asarray(input_ids)


def _compute_mm_masks(
    input_ids: np.ndarray,
    vocab_size: Optional[int],
    mm_token_ids: Optional[np.ndarray],
    mm_special_token_ids: Optional[np.ndarray],
) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Return ``(mm_mask, embed_mask, special_mask | None)``.

    ``embed_mask`` marks embedding slots (``mm_token_ids`` membership, or
    ``id >= vocab_size`` when no ids are given), minus specials; ``mm_mask``
    is embed slots plus specials.
    """
    if mm_token_ids is None and vocab_size is None:
        raise ValueError("Provide either mm_token_ids or vocab_size to compute multimodal masks")
    ids = np.asarray(input_ids)
    special_mask = None
    if mm_special_token_ids is not None:
        special_mask = np.isin(ids, np.asarray(mm_special_token_ids))
    if mm_token_ids is not None:
        mm_ids = np.asarray(mm_token_ids)
        if mm_ids.ndim != 1:
            raise ValueError("mm_token_ids must be a 1D tensor")
        embed_mask = np.isin(ids, mm_ids)
    else:
        embed_mask = ids >= vocab_size
    if special_mask is not None:
        embed_mask = embed_mask & ~special_mask
        mm_mask = embed_mask | special_mask
    else:
        mm_mask = embed_mask
    return mm_mask, embed_mask, special_mask


def _check_total(mm_positions: np.ndarray, num_mm_tokens: List[int]) -> None:
    total = int(np.sum(num_mm_tokens)) if len(num_mm_tokens) else 0
    assert mm_positions.size == total, (
        f"Number of multimodal tokens ({mm_positions.size}) does not match sum of "
        f"per-unit lengths ({total}): num_mm_tokens={num_mm_tokens}"
    )


def _find_mm_token_start_pos_from_masks(
    mm_mask: np.ndarray, special_mask: Optional[np.ndarray], num_mm_tokens: List[int]
) -> Tuple[List[int], List[int]]:
    """Prompt index of each item's first MM token, and offsets (inside the MM tokens) of specials."""
    if not np.any(mm_mask):
        return [], []
    mm_positions = np.flatnonzero(mm_mask)
    specials = np.flatnonzero(special_mask[mm_positions]).tolist() if special_mask is not None else []
    _check_total(mm_positions, num_mm_tokens)
    item_offsets = np.concatenate(([0], np.cumsum(num_mm_tokens)[:-1])).astype(np.int64)
    return [int(x) for x in mm_positions[item_offsets]], [int(x) for x in specials]


def _find_mm_token_runs_from_mask(
    mm_mask: np.ndarray, num_mm_tokens: List[int]
) -> Tuple[List[int], List[int], List[int]]:
    """CSR runs: item i owns flat runs ``[cu[i], cu[i+1])`` of contiguous MM positions."""
    cu = [0]
    if not np.any(mm_mask):
        return cu, [], []
    mm_positions = np.flatnonzero(mm_mask)
    _check_total(mm_positions, num_mm_tokens)
    run_positions: List[int] = []
    run_lengths: List[int] = []
    cursor = 0
    for n in num_mm_tokens:
        pos = mm_positions[cursor : cursor + n]
        cursor += n
        if pos.size:
            breaks = np.flatnonzero(np.diff(pos) != 1) + 1
            starts = np.concatenate(([0], breaks))
            ends = np.concatenate((breaks, [pos.size]))
            run_positions.extend(int(pos[s]) for s in starts)
            run_lengths.extend(int(e - s) for s, e in zip(starts, ends))
        cu.append(len(run_positions))
    return cu, run_positions, run_lengths


def _find_mm_embedding_lengths_from_masks(
    mm_mask: np.ndarray, embed_mask: np.ndarray, num_mm_tokens: List[int]
) -> List[int]:
    """Embedding slots (specials excluded) per item."""
    if not np.any(mm_mask):
        return []
    mm_positions = np.flatnonzero(mm_mask)
    _check_total(mm_positions, num_mm_tokens)
    out, cursor = [], 0
    for n in num_mm_tokens:
        out.append(int(np.count_nonzero(embed_mask[mm_positions[cursor : cursor + n]])))
        cursor += n
    return out


def validate_mm_inputs(prompt_token_ids, mm_hashes: List[List[int]], start_positions: List[int], num_mm_tokens: List[int]) -> None:
    if len(mm_hashes) != len(num_mm_tokens):
        raise AssertionError(
            f"Number of hashes ({len(mm_hashes)}) does not match number of multimodal chunks ({len(num_mm_tokens)})"
        )
    if len(start_positions) != len(num_mm_tokens):
        raise AssertionError(
            f"Number of start positions ({len(start_positions)}) does not match number of multimodal chunks "
            f"({len(num_mm_tokens)})"
        )
    prompt_len = len(prompt_token_ids)
    if any(a >= b for a, b in zip(start_positions, start_positions[1:])):
        raise AssertionError("start_positions must be sorted in ascending order")
    for i, (start, n) in enumerate(zip(start_positions, num_mm_tokens)):
        if start < 0:
            raise AssertionError(f"Invalid negative start position {start} for chunk {i}")
        if start + n > prompt_len:
            raise AssertionError(
                f"Multimodal chunk {i} at position {start} with length {n} exceeds input sequence length {prompt_len}"
            )
        if i + 1 < len(start_positions) and start + n > start_positions[i + 1]:
            raise AssertionError(f"Multimodal chunk {i} overlaps with chunk {i + 1}")
