"""Stand-in for ``tensorrt_llm/_torch/models/_arch_index.py``.

Mirrors @ 065ff9e93780bc0bdbfdbc7156a306ca14f5850c: the lazy-zoo index
(``MULTIMODAL_MODEL_TYPE_TO_MODULE``; ``qwen4_exp`` is absent there). ``ARCH_TO_MODULE`` (architecture string -> module)
is the stand-in's reduced form of upstream's architecture index.
"""

MULTIMODAL_MODEL_TYPE_TO_MODULE = {
    "qwen3_vl": "modeling_qwen3vl",
    "qwen3_vl_moe": "modeling_qwen3vl_moe",
    "qwen3_5": "modeling_qwen3_5",
    "qwen3_5_moe": "modeling_qwen3_5",
    "cosmos3": "modeling_cosmos3",
    "cosmos3_omni": "modeling_cosmos3",
}

ARCH_TO_MODULE = {
    "Qwen3VLForConditionalGeneration": "modeling_qwen3vl",
    "Qwen3VLMoeForConditionalGeneration": "modeling_qwen3vl_moe",
    "Qwen3_5ForConditionalGeneration": "modeling_qwen3_5",
    "Qwen3_5MoeForConditionalGeneration": "modeling_qwen3_5",
    "Cosmos3ForConditionalGeneration": "modeling_cosmos3",
}
