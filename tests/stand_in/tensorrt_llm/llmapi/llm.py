"""Stand-in for ``tensorrt_llm/llmapi/llm.py``.

Mirrors the upstream version that contains ``TODO(TRTLLM-12869)`` (92,689
characters; its commit could not be identified; the versions at
4c05a74891e4df8066f08ed4ce14b0972abe4e25 and 0096693 are older ones):

* ``PreprocessedInputs(prompt_token_ids, query_token_ids=None,
  multimodal_params=None, encoder_input_token_ids=None)``;
* ``BaseLLM._preprocess(self, inputs, sampling_params,
  disaggregated_params=None)`` returning the 5-tuple ``(prompt_token_ids,
  prompt, query_token_ids, multimodal_params, encoder_input_token_ids)`` with
  upstream's branch order: (1) ``is_mm_disagg`` (handles present) FIRST ->
  ``support_mm_disagg`` check -> ``self.input_processor.
  build_disagg_prefill_multimodal_inputs(inputs, mm_handles)`` (type-checked)
  -> ``generation_only`` raises -> ``multimodal_data`` with the handles,
  embedding lengths, ``special_token_offsets``, ``layout_metadata.item_types``
  and ``mrope_config`` taken from the two mRoPE handles WITHOUT any length
  check -> ``maybe_compute_mm_embed_cumsum``; (2) ``prompt_token_ids`` without
  multimodal data (D path; rebuilds ``mrope_config`` from the handles);
  (3) prompt / multimodal data -> ``create_input_processor_with_hash`` ->
  ``MultimodalParams.to_handle`` -> copies the mRoPE handles into
  ``disaggregated_params`` (P -> D);
* ``generate_async`` (skips ``_preprocess`` for ``PreprocessedInputs``, then
  ``self._executor.generate_async(...)`` and
  ``RequestOutput._from_generation_result``), ``preprocess``;
* ``_TorchLLM`` / ``LLM``.

Simplified: no MPI session, build stats, telemetry, tracing or argument
validation. The tokenizer must be passed as an object; the HF config comes
from ``tensorrt_llm._torch.model_config.ModelConfig.from_pretrained(model)``.
"""

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, Union, cast

from ..disaggregated_params import DisaggregatedParams
from ..executor import GenerationExecutor, GenerationResult
from ..executor.request import DEFAULT_REQUEST_PRIORITY
from ..inputs import (
    BaseMultimodalInputProcessor,
    PromptInputs,
    create_input_processor,
    create_input_processor_with_hash,
    maybe_compute_mm_embed_cumsum,
    prompt_inputs,
)
from ..inputs.multimodal import DisaggPrefillMultimodalInputs, MultimodalParams
from ..sampling_params import SamplingParams
from .llm_args import TorchLlmArgs


class RequestOutput(GenerationResult):
    """Output of a request (built from the executor's ``GenerationResult``)."""

    @classmethod
    def _from_generation_result(cls, generation_result: GenerationResult, prompt: Optional[str] = None, tokenizer=None, post_processor_hook=None) -> "RequestOutput":
        inst = cls.__new__(cls)
        inst.__dict__.update(generation_result.__dict__)
        inst.tokenizer = tokenizer
        inst._prompt = prompt
        return inst


@dataclass
class PreprocessedInputs:
    """Preprocessed inputs; ``generate_async`` accepts them and skips ``_preprocess``."""

    prompt_token_ids: List[int]
    query_token_ids: Optional[List[int]] = None
    multimodal_params: Optional[MultimodalParams] = None
    encoder_input_token_ids: Optional[List[int]] = None


class BaseLLM:
    """Base class of the LLM API classes."""

    def __init__(self, model, tokenizer=None, tokenizer_mode: str = "auto", skip_tokenizer_init: bool = False, trust_remote_code: bool = False, tensor_parallel_size: int = 1, dtype: str = "auto", revision=None, tokenizer_revision=None, **kwargs: Any) -> None:
        self._executor_cls = kwargs.pop("executor_cls", GenerationExecutor)
        known = {f for f in TorchLlmArgs.__dataclass_fields__ if f not in ("model", "extra")}
        args = {k: kwargs.pop(k) for k in list(kwargs) if k in known}
        self.args = TorchLlmArgs(model=str(model), extra=dict(kwargs), **args)
        self._tokenizer = tokenizer
        self._executor: Optional[GenerationExecutor] = None
        self._hf_model_dir = str(model)
        self._hf_model_config = None
        self._post_processor_hook = None
        self.input_processor = None
        self._build_model()

    @property
    def tokenizer(self):
        return self._tokenizer

    def _build_model(self) -> None:
        from .._torch.model_config import ModelConfig

        self._hf_model_config = ModelConfig.from_pretrained(self._hf_model_dir).pretrained_config

    def _prepare_sampling_params(self, sampling_params: Optional[SamplingParams] = None) -> SamplingParams:
        return sampling_params if sampling_params is not None else SamplingParams()

    @staticmethod
    def _copy_prompt_inputs(inputs):
        return dict(inputs) if isinstance(inputs, dict) else inputs

    def _is_encoder_decoder_model(self) -> bool:
        return bool(getattr(self._hf_model_config, "is_encoder_decoder", False))

    def generate_async(
        self,
        inputs: Union[PromptInputs, PreprocessedInputs],
        sampling_params: Optional[SamplingParams] = None,
        lora_request=None,
        prompt_adapter_request=None,
        streaming: bool = False,
        kv_cache_retention_config=None,
        disaggregated_params: Optional[DisaggregatedParams] = None,
        trace_headers=None,
        _postproc_params=None,
        scheduling_params=None,
        conversation_params=None,
        cache_salt: Optional[str] = None,
        priority: float = DEFAULT_REQUEST_PRIORITY,
    ) -> RequestOutput:
        if self._executor is None or self._executor.is_shutdown():
            raise RuntimeError("LLM is shutting down")
        sampling_params = self._prepare_sampling_params(sampling_params)
        is_ctx_only = disaggregated_params is not None and disaggregated_params.request_type == "context_only"
        if is_ctx_only:
            sampling_params.max_tokens = 1
        if isinstance(inputs, PreprocessedInputs):
            prompt_token_ids = inputs.prompt_token_ids
            prompt = None
            query_token_ids = inputs.query_token_ids
            multimodal_params = inputs.multimodal_params
            encoder_input_token_ids = inputs.encoder_input_token_ids
        else:
            (prompt_token_ids, prompt, query_token_ids, multimodal_params, encoder_input_token_ids) = self._preprocess(
                inputs, sampling_params, disaggregated_params
            )
        result = self._executor.generate_async(
            prompt_token_ids,
            query_token_ids=query_token_ids,
            sampling_params=sampling_params,
            lora_request=lora_request,
            prompt_adapter_request=prompt_adapter_request,
            streaming=streaming,
            kv_cache_retention_config=kv_cache_retention_config,
            disaggregated_params=disaggregated_params,
            trace_headers=trace_headers,
            postproc_params=_postproc_params,
            multimodal_params=multimodal_params,
            scheduling_params=scheduling_params,
            conversation_params=conversation_params,
            cache_salt=cache_salt,
            encoder_input_token_ids=encoder_input_token_ids,
            priority=priority,
        )
        return RequestOutput._from_generation_result(result, prompt, self.tokenizer)

    def _preprocess(
        self,
        inputs: Optional[PromptInputs],
        sampling_params: SamplingParams,
        disaggregated_params: Optional[DisaggregatedParams] = None,
    ) -> Tuple[List[int], Optional[str], Optional[List[int]], Optional[MultimodalParams], Optional[List[int]]]:
        """Tokenize / run the input processor; returns the 5-tuple described in the module docstring."""
        if isinstance(inputs, dict):
            inputs = self._copy_prompt_inputs(inputs)
        if inputs is None or (isinstance(inputs, dict) and "prompt" not in inputs and "prompt_token_ids" not in inputs):
            raise TypeError(f"The inputs must be type str or list of int, but got {type(inputs)}")
        inputs = prompt_inputs(inputs)

        is_mm_disagg = disaggregated_params is not None and disaggregated_params.multimodal_embedding_handles is not None
        is_gen_only = disaggregated_params is not None and disaggregated_params.request_type == "generation_only"
        query_token_ids = None
        multimodal_params = None
        prompt = None

        # Encode -> Prefill handoff (E/P/D and E/PD): the prefill side runs this.
        if is_mm_disagg:
            if self.args.backend == "_autodeploy":
                raise ValueError("Multimodal disaggregated inference is not supported with the AutoDeploy backend.")
            if not getattr(self.input_processor, "support_mm_disagg", False):
                raise ValueError("Multimodal disaggregated inference is not supported for this model")
            mm_handles = disaggregated_params.multimodal_embedding_handles
            # TODO(TRTLLM-12869) (upstream): pass the encoder-side MM layout through
            # DisaggregatedParams instead of rebuilding it here.
            disagg_mm_inputs = self.input_processor.build_disagg_prefill_multimodal_inputs(inputs, mm_handles)
            if not isinstance(disagg_mm_inputs, DisaggPrefillMultimodalInputs):
                raise TypeError("build_disagg_prefill_multimodal_inputs must return DisaggPrefillMultimodalInputs")
            prompt_token_ids = disagg_mm_inputs.prompt_token_ids
            prompt = inputs.get("prompt", None)
            query_token_ids = inputs.get("query_token_ids", None)
            if is_gen_only:
                raise ValueError("Generation-only mode should not need multimodal parameters")
            multimodal_input = disagg_mm_inputs.to_multimodal_input(disaggregated_params.multimodal_hashes)
            multimodal_data = {
                "multimodal_embedding": mm_handles,
                "multimodal_embedding_lengths": disagg_mm_inputs.multimodal_embedding_lengths,
            }
            if disagg_mm_inputs.special_token_offsets is not None:
                multimodal_data["special_token_offsets"] = disagg_mm_inputs.special_token_offsets
            if disagg_mm_inputs.item_types is not None:
                multimodal_data["layout_metadata"] = {"item_types": disagg_mm_inputs.item_types}
            if disaggregated_params.mrope_position_ids_handle is not None:
                assert disaggregated_params.mrope_position_deltas_handle is not None
                multimodal_data["mrope_config"] = {
                    "mrope_position_ids": disaggregated_params.mrope_position_ids_handle,
                    "mrope_position_deltas": disaggregated_params.mrope_position_deltas_handle,
                }
            maybe_compute_mm_embed_cumsum(
                prompt_token_ids,
                {"multimodal_data": multimodal_data},
                cast(BaseMultimodalInputProcessor, self.input_processor),
            )
            multimodal_params = MultimodalParams(multimodal_input=multimodal_input, multimodal_data=multimodal_data)
        elif (
            "prompt_token_ids" in inputs
            and inputs.get("multi_modal_data") is None
            and inputs.get("multi_modal_embeddings") is None
        ):
            prompt_token_ids = inputs["prompt_token_ids"]
            query_token_ids = inputs.get("query_token_ids", None)
            multimodal_data = {}
            if disaggregated_params is not None and disaggregated_params.mrope_position_ids_handle is not None:
                if disaggregated_params.mrope_position_deltas_handle is None:
                    raise RuntimeError(
                        "`mrope_position_ids_handle` and `mrope_position_deltas_handle` must both be provided, or both `None`."
                    )
                multimodal_data["mrope_config"] = {
                    "mrope_position_ids": disaggregated_params.mrope_position_ids_handle,
                    "mrope_position_deltas": disaggregated_params.mrope_position_deltas_handle,
                }
            if multimodal_data:
                multimodal_params = MultimodalParams(multimodal_data=multimodal_data)
        elif "prompt" in inputs or (
            "prompt_token_ids" in inputs and ("multi_modal_data" in inputs or "multi_modal_embeddings" in inputs)
        ):
            if "multi_modal_data" in inputs:
                input_processor_with_hash = create_input_processor_with_hash(self.input_processor)
                prompt_token_ids, extra_processed_inputs = input_processor_with_hash(inputs, sampling_params)
            # (upstream's multi_modal_embeddings branch, attach_multimodal_embeddings, is not modelled)
            else:
                prompt_token_ids, extra_processed_inputs = self.input_processor(inputs, sampling_params)
            prompt = inputs.get("prompt")
            if extra_processed_inputs is not None:
                query_token_ids = extra_processed_inputs.get("query_token_ids")
                multimodal_params = MultimodalParams(
                    multimodal_input=extra_processed_inputs.get("multimodal_input"),
                    multimodal_data=extra_processed_inputs.get("multimodal_data"),
                )
                if not multimodal_params.has_content():
                    multimodal_params = None
                else:
                    multimodal_params.to_handle("multimodal_data")
                    if disaggregated_params is not None and "mrope_config" in multimodal_params.multimodal_data:
                        # P -> D: propagate the mRoPE handles so decode-only can rebuild mrope_config.
                        mrope_config = multimodal_params.multimodal_data["mrope_config"]
                        ids = mrope_config.get("mrope_position_ids")
                        deltas = mrope_config.get("mrope_position_deltas")
                        if ids is not None and deltas is not None:
                            disaggregated_params.mrope_position_ids_handle = ids
                            disaggregated_params.mrope_position_deltas_handle = deltas
        else:
            raise TypeError(f"The inputs must be type str or list of int, but got {type(inputs)}")

        encoder_input_token_ids = None
        if self._is_encoder_decoder_model():
            encoder_input_token_ids = prompt_token_ids
            prompt_token_ids = [0]
        return (prompt_token_ids, prompt, query_token_ids, multimodal_params, encoder_input_token_ids)

    def preprocess(self, inputs: PromptInputs, sampling_params: Optional[SamplingParams] = None, disaggregated_params: Optional[DisaggregatedParams] = None) -> PreprocessedInputs:
        sampling_params = self._prepare_sampling_params(sampling_params)
        ids, _prompt, query, mm_params, enc_ids = self._preprocess(inputs, sampling_params, disaggregated_params)
        return PreprocessedInputs(prompt_token_ids=ids, query_token_ids=query, multimodal_params=mm_params, encoder_input_token_ids=enc_ids)

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()


class _TorchLLM(BaseLLM):
    def _build_model(self) -> None:
        super()._build_model()
        self.input_processor = create_input_processor(self._hf_model_dir, self.tokenizer)
        self._tokenizer = getattr(self.input_processor, "tokenizer", self._tokenizer)
        self._executor = self._executor_cls.create(
            None,
            executor_config=None,
            model_world_size=1,
            hf_model_dir=self._hf_model_dir,
            tokenizer=None,
            llm_args=self.args,
            hf_model_config=self._hf_model_config,
        )


class LLM(_TorchLLM):
    """The LLM entry point (PyTorch backend)."""
