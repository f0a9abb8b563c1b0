"""Tiny, randomly initialised models of each family, with configs written in code.

The vision side uses the real patch geometry (patch 16, temporal patch 2, spatial merge 2) so the real
processors' grids and token counts apply unchanged; the text side keeps the real vocabulary size so the real
tokenizer ids (vision markers at 151652... / 248053...) index the embedding table. Everything else
(widths, depths, head counts, rope theta) is made up: these models exist for bitwise parity tests, and token
agreement on them says nothing about real-model quality.

Weights are drawn under ``torch.manual_seed(seed)`` inside a forked RNG (the caller's global RNG state is left
alone), in fp32, and the model is returned in ``eval()`` mode. The same seed gives the same weights.

Cosmos3-Edge: the Edge tokenizer is not available offline, so the tiny Edge model is configured for the Qwen3
tokenizer that stands in for it (``mm_handoff.hf.processors.build_processor("cosmos3_edge")``): vocab 151936
and image/video/vision_start/vision_end ids 151655/151656/151652/151653 instead of the Edge config's
19/18/20/21 (pass ``edge_token_ids="official"`` for the config defaults, vocab 131072).

torch and transformers are imported inside functions only.
"""

from __future__ import annotations

import copy
from typing import Any

from ..adapters import Cosmos3EdgeAdapter, Qwen3_5Adapter, Qwen3VLAdapter
from ..adapters.families import HF_FAMILIES
from .families import normalize_family

FAMILIES: tuple[str, ...] = tuple(HF_FAMILIES)

#: Families whose text model adds deepstack features after the first decoder layers.
DEEPSTACK_FAMILIES: frozenset[str] = frozenset(name for name, row in HF_FAMILIES.items() if row.deepstack)

def _config_ids(adapter_cls) -> dict:
    """The family adapter's default ids under the HF config's attribute names (one source of truth)."""
    ids = adapter_cls.default_ids
    return {"image_token_id": ids["image_pad"], "video_token_id": ids["video_pad"],
            "vision_start_token_id": ids["vision_start"], "vision_end_token_id": ids["vision_end"]}


QWEN3_IDS = _config_ids(Qwen3VLAdapter)
QWEN3_5_IDS = _config_ids(Qwen3_5Adapter)
EDGE_OFFICIAL_IDS = _config_ids(Cosmos3EdgeAdapter)

_INIT_STD = 0.1
_DEEPSTACK = [0, 1, 2]

# --- per-family kwargs (plain dicts; tiny_config turns them into HF config objects) -----------------------

#: what every tiny text model shares: 4 layers of width 128, 4 heads / 2 KV heads
_TEXT = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=65536, initializer_range=_INIT_STD)

_QWEN3_VL_TEXT = dict(
    _TEXT, vocab_size=151936, head_dim=32,
    rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": [6, 5, 5], "mrope_interleaved": True},
)

_QWEN3_VL_VISION = dict(
    depth=4, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=16, temporal_patch_size=2,
    spatial_merge_size=2, out_hidden_size=128, num_position_embeddings=2304,
    deepstack_visual_indexes=list(_DEEPSTACK), initializer_range=_INIT_STD,
)

_QWEN3_5_TEXT = dict(
    _TEXT, vocab_size=248320, head_dim=64,
    layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
    linear_conv_kernel_dim=4,
    rope_parameters={"rope_type": "default", "rope_theta": 1e7, "mrope_section": [3, 3, 2], "mrope_interleaved": True,
                     "partial_rotary_factor": 0.25},
)

_QWEN3_5_VISION = {k: v for k, v in _QWEN3_VL_VISION.items() if k != "deepstack_visual_indexes"}

# MoE: 4 experts, top-2, every layer sparse.
_MOE_VL = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, decoder_sparse_step=1)
_MOE_3_5 = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64)

_EDGE_TEXT = dict(
    _TEXT, head_dim=32, hidden_act="relu2",
    rope_parameters={"rope_type": "default", "rope_theta": 1e8, "mrope_section": [6, 5, 5]},  # sums to head_dim/2
)

_EDGE_VISION = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, patch_size=16,
                    num_patches=256, spatial_merge_size=2)


def tiny_config_kwargs(family: str, *, edge_token_ids: str = "standin") -> dict[str, Any]:
    """The tiny config as plain nested dicts: ``{"text_config": ..., "vision_config": ..., **top-level}``."""
    fam = _norm(family)
    if fam in ("qwen3_vl", "cosmos3_omni"):
        out = {"text_config": dict(_QWEN3_VL_TEXT), "vision_config": dict(_QWEN3_VL_VISION), **QWEN3_IDS}
    elif fam == "qwen3_vl_moe":
        out = {"text_config": {**_QWEN3_VL_TEXT, **_MOE_VL}, "vision_config": dict(_QWEN3_VL_VISION), **QWEN3_IDS}
    elif fam == "qwen3_5":
        out = {"text_config": dict(_QWEN3_5_TEXT), "vision_config": dict(_QWEN3_5_VISION), **QWEN3_5_IDS}
    elif fam == "qwen3_5_moe":
        text = {k: v for k, v in _QWEN3_5_TEXT.items() if k != "intermediate_size"}  # MoE config has no dense width
        out = {"text_config": {**text, **_MOE_3_5}, "vision_config": dict(_QWEN3_5_VISION), **QWEN3_5_IDS}
    elif fam == "cosmos3_edge":
        if edge_token_ids == "standin":
            ids, vocab = QWEN3_IDS, 151936
        elif edge_token_ids == "official":
            ids, vocab = EDGE_OFFICIAL_IDS, 131072
        else:
            raise ValueError(f"edge_token_ids must be 'standin' or 'official', not {edge_token_ids!r}")
        out = {
            "text_config": {**_EDGE_TEXT, "vocab_size": vocab},
            "vision_config": dict(_EDGE_VISION),
            "projector_hidden_size": 256,
            **ids,
        }
    else:  # pragma: no cover - _norm rejects others
        raise ValueError(family)
    return copy.deepcopy(out)


def _norm(family: str) -> str:
    return normalize_family(family, FAMILIES)


def model_class_name(family: str) -> str:
    """The ``transformers`` class ``build_tiny_model`` instantiates for ``family``."""
    return HF_FAMILIES[_norm(family)].model


def has_deepstack(family_or_model: Any) -> bool:
    """True for Qwen3-VL, Qwen3-VL-MoE and Cosmos3-Omni (a family name or a built model)."""
    if isinstance(family_or_model, str):
        return _norm(family_or_model) in DEEPSTACK_FAMILIES
    inner = getattr(family_or_model, "model", family_or_model)
    return hasattr(getattr(inner, "visual", None), "deepstack_merger_list")


def tiny_config(family: str, *, edge_token_ids: str = "standin", attn_implementation: str | None = None) -> Any:
    """The HF config object (``Qwen3VLConfig``, ``Qwen3VLMoeConfig``, ... ``Cosmos3EdgeConfig``)."""
    import importlib

    fam = _norm(family)
    cls = getattr(importlib.import_module("transformers"), HF_FAMILIES[fam].config)
    kw = tiny_config_kwargs(fam, edge_token_ids=edge_token_ids)
    cfg = cls(**kw)
    if attn_implementation is not None:
        cfg._attn_implementation = attn_implementation
    return cfg


def build_tiny_model(
    family: str,
    seed: int = 0,
    *,
    edge_token_ids: str = "standin",
    attn_implementation: str | None = None,
) -> Any:
    """A tiny random ``*ForConditionalGeneration`` for ``family``: fp32, ``eval()``, weights from ``seed``.

    Families: qwen3_vl, qwen3_vl_moe, qwen3_5, qwen3_5_moe, cosmos3_omni, cosmos3_edge.
    """
    import torch
    import transformers

    fam = _norm(family)
    cfg = tiny_config(fam, edge_token_ids=edge_token_ids, attn_implementation=attn_implementation)
    cls = getattr(transformers, HF_FAMILIES[fam].model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(cfg)
    model = model.to(torch.float32).eval()
    return model
