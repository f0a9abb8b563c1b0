"""Stand-in for ``tensorrt_llm/inputs/registry.py``.

Mirrors NVIDIA/TensorRT-LLM @ 002f3cc3d0554c4ebd530d1354f96e89666d93b8:

* ``INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type`` keyed by the
  MODEL CLASS; ``register_input_processor(processor_cls, model_type,
  placeholder_metadata)`` (raises ``ValueError`` without metadata, sets
  ``processor_cls._registered_model_type`` = last registered type);
* ``support_multimodal_disaggregated(model_cls)``: requires a registered
  ``BaseMultimodalInputProcessor`` subclass with a callable
  ``build_disagg_prefill_multimodal_inputs``, then sets ``support_mm_disagg =
  True`` on the processor class and the model class;
* ``BaseMultimodalInputProcessor`` (text-prompt path, ``get_mm_special_token_ids``
  default read from the HF processor), ``create_input_processor``;
* ``create_input_processor_with_hash`` (aggregated path: hashes, processor
  call, ``find_mm_token_lengths``, the mask helpers, ``MultimodalInput.
  from_components``) and ``maybe_compute_mm_embed_cumsum`` (idempotent).

Simplified: no torch/PIL/transformers; only what the tests reach is modelled: no
tokenized+MM path, dummy-input builder, embedding attachment, tokenize-only
fallback processor (an unregistered model raises), placeholder look-ups, or the
item-scheduling metadata step of ``input_processor_wrapper``.
"""

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Optional

from ..logger import logger
from ..sampling_params import SamplingParams
from .content_format import ContentFormat
from .data import TextPrompt
from .multimodal import (
    MultimodalInput,
    _as_cpu_tensor,
    _compute_mm_masks,
    _find_mm_embedding_lengths_from_masks,
    _find_mm_token_runs_from_mask,
    _find_mm_token_start_pos_from_masks,
    apply_mm_hashes,
    default_hasher,
    find_mm_token_lengths,
    hexdigest_to_int32,
    validate_mm_inputs,
)

ExtraProcessedInputs = Dict[str, Any]


class BaseMultimodalInputProcessor(ABC):
    """Base multimodal input processor: the text-prompt path and the mm special-token ids default."""

    mm_bidirectional_blocks: ClassVar[bool] = False

    def __init__(self, model_path, config, tokenizer, trust_remote_code: bool = True, **kwargs) -> None:
        super().__init__()
        self._config = config
        self._model_path = model_path
        self._tokenizer = tokenizer
        self._trust_remote_code = trust_remote_code
        self._multimodal_hashing_supported: Optional[bool] = None

    def __call__(self, inputs: TextPrompt, sampling_params: SamplingParams):
        return self.call_with_text_prompt(inputs, sampling_params)

    @abstractmethod
    def call_with_text_prompt(self, inputs: TextPrompt, sampling_params: SamplingParams):
        ...

    @property
    def multimodal_hashing_supported(self) -> Optional[bool]:
        return self._multimodal_hashing_supported

    @multimodal_hashing_supported.setter
    def multimodal_hashing_supported(self, value: Optional[bool]) -> None:
        self._multimodal_hashing_supported = value

    def get_mm_special_token_ids(self):
        """Default: the HF processor's ``mm_special_token_ids`` attribute, if any (None for Qwen)."""
        return getattr(self.processor, "mm_special_token_ids", None)


class BaseMultimodalDummyInputsBuilder(ABC):
    """Profiling dummy-input builder: kept for the processors' class chain; its methods are not modelled."""


class MultimodalPlaceholderPlacement(enum.Enum):
    INVALID = -1
    BEFORE_TEXT = 0
    AFTER_TEXT = 1


@dataclass(frozen=True)
class MultimodalPlaceholderMetadata:
    placeholder_map: Dict[str, str] = field(default_factory=dict)
    placeholder_placement: MultimodalPlaceholderPlacement = MultimodalPlaceholderPlacement.AFTER_TEXT
    placeholders_separator: str = "\n"
    content_format: Optional[ContentFormat] = None
    interleave_placeholders: bool = False


class MultimodalPlaceholderRegistry:
    def __init__(self) -> None:
        self._multimodal_placeholder_by_model_type: Dict[str, MultimodalPlaceholderMetadata] = {}

    def set_placeholder_metadata(self, model_type, placeholder_metadata, registrant_module=None):
        self._multimodal_placeholder_by_model_type[model_type] = placeholder_metadata


MULTIMODAL_PLACEHOLDER_REGISTRY = MultimodalPlaceholderRegistry()


class InputProcessorRegistry:
    def __init__(self) -> None:
        # Keyed by the MODEL class, not by the model_type string.
        self._input_processors_cls_by_model_type: Dict[type, type] = {}


INPUT_PROCESSOR_REGISTRY = InputProcessorRegistry()


def support_multimodal_disaggregated(model_cls):
    """Model-class decorator: declare E/P disagg support (apply AFTER register_input_processor)."""
    processor_cls = INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type.get(model_cls)
    if processor_cls is None:
        raise RuntimeError(
            f"No input processor registered for {model_cls.__name__}; ensure @register_input_processor "
            "is applied closer to the class than @supports_multimodal_disagg."
        )
    if not issubclass(processor_cls, BaseMultimodalInputProcessor):
        raise TypeError(
            f"{processor_cls.__name__} must inherit from BaseMultimodalInputProcessor to support multimodal disagg"
        )
    method = getattr(processor_cls, "build_disagg_prefill_multimodal_inputs", None)
    if method is None or not callable(method):
        raise TypeError(
            f"{processor_cls.__name__} must implement a callable method "
            "`build_disagg_prefill_multimodal_inputs` to support multimodal disagg"
        )
    setattr(processor_cls, "support_mm_disagg", True)
    setattr(model_cls, "support_mm_disagg", True)
    return model_cls


def register_input_processor(processor_cls, model_type: str, placeholder_metadata: MultimodalPlaceholderMetadata = None):
    """Register ``processor_cls`` for the decorated model class."""

    def wrapper(model_cls):
        INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type[model_cls] = processor_cls
        if placeholder_metadata is None:
            raise ValueError(f"A valid placeholder_metadata must be provided but got {placeholder_metadata}")
        MULTIMODAL_PLACEHOLDER_REGISTRY.set_placeholder_metadata(
            model_type, placeholder_metadata, registrant_module=model_cls.__module__
        )
        processor_cls._registered_model_type = model_type
        return model_cls

    return wrapper


def create_input_processor(model_path_or_dir, tokenizer, checkpoint_format: Optional[str] = "HF", trust_remote_code: bool = True, **kwargs):
    """Resolve config -> model class -> registered processor class, and build it.

    Stand-in: the config comes from ``tensorrt_llm._torch.model_config.
    ModelConfig.from_pretrained`` (an in-memory registry or a ``config.json``); an
    unregistered model raises instead of falling back to upstream's tokenize-only processor.
    """
    from tensorrt_llm._torch.model_config import ModelConfig
    from tensorrt_llm._torch.models import get_model_architecture

    config = ModelConfig.from_pretrained(model_path_or_dir, trust_remote_code=trust_remote_code).pretrained_config
    model_cls, _ = get_model_architecture(config)
    processor_cls = INPUT_PROCESSOR_REGISTRY._input_processors_cls_by_model_type[model_cls]
    return processor_cls(model_path_or_dir, config, tokenizer, trust_remote_code=trust_remote_code, **kwargs)


def maybe_compute_mm_embed_cumsum(prompt_token_ids: List[int], extra_processed_inputs: Optional[ExtraProcessedInputs], input_processor) -> None:
    """Backfill ``mm_bidirectional_blocks`` and ``multimodal_embed_mask_cumsum`` (idempotent)."""
    if extra_processed_inputs is None:
        return
    mm_data = extra_processed_inputs.get("multimodal_data")
    if mm_data is None:
        return
    mm_data.setdefault("mm_bidirectional_blocks", bool(getattr(input_processor, "mm_bidirectional_blocks", False)))
    if "multimodal_embed_mask_cumsum" in mm_data:
        return
    vocab_size = input_processor.get_vocab_size()
    mm_token_ids = input_processor.get_mm_token_ids()
    if vocab_size is None and mm_token_ids is None:
        return
    _, embed_mask, _ = _compute_mm_masks(
        _as_cpu_tensor(prompt_token_ids),
        vocab_size=vocab_size,
        mm_token_ids=mm_token_ids,
        mm_special_token_ids=input_processor.get_mm_special_token_ids(),
    )
    mm_data["multimodal_embed_mask_cumsum"] = embed_mask.cumsum(0, dtype="int64")


def create_input_processor_with_hash(input_processor, hash_lib=default_hasher, *, encoder_cache_enabled: bool = False) -> Callable:
    """Wrap ``input_processor`` with hashing and the mask-based layout (aggregated path)."""

    def multimodal_hashing_process(inputs, sampling_params):
        assert "multi_modal_data" in inputs, "multi_modal_data must be provided for hashing support."
        mm_data = inputs["multi_modal_data"]
        mm_hashes, mm_uuids_by_key = apply_mm_hashes(mm_data, inputs.get("multi_modal_uuids"), hash_lib)

        prompt_token_ids, extra = input_processor(inputs, sampling_params)
        if extra is None:
            extra = {}
        multimodal_data = extra.setdefault("multimodal_data", {})
        if not isinstance(multimodal_data, dict):
            raise TypeError("extra_processed_inputs['multimodal_data'] must be a dict")

        by_key = find_mm_token_lengths(mm_data, input_processor, multimodal_data=multimodal_data)
        if not by_key:
            raise ValueError("multimodal hashing could not determine multimodal token lengths for the provided input.")
        order = inputs.get("mm_item_order")
        if order:
            num_mm_tokens = [by_key[e["modality"]][e["index"]] for e in order]
        else:
            num_mm_tokens = next(iter(by_key.values()))
        if len(num_mm_tokens) <= 0:
            raise ValueError("multimodal hashing produced an empty multimodal token-length list.")

        vocab_size = input_processor.get_vocab_size()
        mm_ids = input_processor.get_mm_token_ids()
        mm_special = input_processor.get_mm_special_token_ids()
        if vocab_size is None and mm_ids is None:
            raise ValueError("Cannot locate vocab_size or mm_token_ids for multimodal token preprocessing")

        ids = _as_cpu_tensor(prompt_token_ids)
        if ids.size == 0:
            starts, special_offsets = [], []
            cu, run_pos, run_len = [0], [], []
            emb_lengths: List[int] = []
        else:
            mm_mask, embed_mask, special_mask = _compute_mm_masks(
                ids, vocab_size=vocab_size, mm_token_ids=mm_ids, mm_special_token_ids=mm_special
            )
            multimodal_data.setdefault("multimodal_embed_mask_cumsum", embed_mask.cumsum(0, dtype="int64"))
            starts, special_offsets = _find_mm_token_start_pos_from_masks(mm_mask, special_mask, num_mm_tokens)
            cu, run_pos, run_len = _find_mm_token_runs_from_mask(mm_mask, num_mm_tokens)
            emb_lengths = _find_mm_embedding_lengths_from_masks(mm_mask, embed_mask, num_mm_tokens)
        multimodal_data["multimodal_embedding_lengths"] = emb_lengths
        if len(special_offsets) > 0 and mm_special is not None:
            multimodal_data["special_token_offsets"] = special_offsets

        if order:
            hashes_flat = [mm_hashes[e["modality"]][e["index"]] for e in order]
        else:
            hashes_flat = [h for hs in mm_hashes.values() for h in hs]
        if mm_uuids_by_key is None:
            uuid_list = None
        elif order:
            uuid_list = [mm_uuids_by_key[e["modality"]][e["index"]] for e in order]
        else:
            uuid_list = [u for us in mm_uuids_by_key.values() for u in us]
        validate_mm_inputs(prompt_token_ids, hashes_flat, starts, num_mm_tokens)
        hashes_int32 = [hexdigest_to_int32(h) for h in hashes_flat]
        extra["multimodal_input"] = MultimodalInput.from_components(
            hashes_int32, starts, num_mm_tokens, uuid_list, cu, run_pos, run_len
        )
        return prompt_token_ids, extra

    def process_prompt_maybe_hash(inputs, sampling_params):
        modalities = [m for m, d in inputs.get("multi_modal_data", {}).items() if d is not None]
        try_hashing = use_hashing = False
        if modalities and all(m in ("image", "video", "audio") for m in modalities):
            if input_processor.multimodal_hashing_supported is not None:
                use_hashing = input_processor.multimodal_hashing_supported
            else:
                try_hashing = True
        if try_hashing or use_hashing:
            try:
                result = multimodal_hashing_process(inputs, sampling_params)
                if try_hashing:
                    input_processor.multimodal_hashing_supported = True
                return result
            except Exception as e:
                logger.warning(f"Multimodal hashing failed: {e}.")
                if not try_hashing:
                    raise
                input_processor.multimodal_hashing_supported = False
        return input_processor(inputs, sampling_params)

    def input_processor_wrapper(inputs, sampling_params):
        prompt_token_ids, extra = process_prompt_maybe_hash(inputs, sampling_params)
        maybe_compute_mm_embed_cumsum(prompt_token_ids, extra, input_processor)
        return prompt_token_ids, extra

    return input_processor_wrapper
