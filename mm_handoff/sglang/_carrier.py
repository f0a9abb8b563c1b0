"""Encoder / request side: what SGLang's EPD hands its PD processor, built from a layout, and the carrier.

SGLang's encoder (``--encoder-only``) never sees the prompt: it encodes the request's images and
videos and sends, per part, the embeddings, the grid and (Qwen3 families) ``video_timestamps``
(``srt/disaggregation/encoder/preprocessor.py``). The PD side's receiver aggregates the parts and
forwards only the attributes it knows (``MultiModalEmbeddingData.from_embedding_data`` in
``srt/disaggregation/encoder/receiver.py``), so the layout cannot ride with the parts: it travels
in the request, ``GenerateReqInput.mm_processor_kwargs["mm_handoff_layout"]`` (its wire form), put
there by whoever built the layout (:func:`attach_layout`), and the installed check reads it there.

:func:`epd_inputs` builds, from a layout, the exact arguments SGLang's receiver passes to
``get_validated_mm_data(prompt, embeddings, **meta)``: the raw prompt (one
``<|vision_start|><|image_pad|>/<|video_pad|><|vision_end|>`` per item: SGLang keeps the template's
markers, the ``pad_only`` convention, whatever transformers it runs), the embeddings per modality
and the metadata (grids, and HF's per-group timestamps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ..adapters.base import typed_adapter
from ..checks import accept_layout
from ..errors import HandoffError, SkewError, typed_failures
from ..glue.unexpanded import LAYOUT_KWARG, embedding_tensors, raw_prompt_ids, video_timestamps
from ..layout import HandoffLayout
from ..layout.items import IMAGE, VIDEO
from ..layout.spec import PAD_ONLY

#: SGLang's EPD rebuild keeps the template's vision markers and replaces the pad only, under every
#: transformers version (``build_input_ids_with_timestamps``, SGLang 0.5.23)
SGLANG_CONVENTION = PAD_ONLY


@attrs.frozen(eq=False)
class EPDInputs:
    """One request as SGLang's PD receiver hands it to ``get_validated_mm_data``, and its layout."""

    #: the un-expanded prompt ids (a list)
    prompt: list
    #: ``{"image": tensor, "video": tensor}``: the rows per modality, items concatenated in prompt order
    embeddings: dict
    #: ``img_grid_thw`` / ``video_grid_thw`` (int64 tensors or None) and ``video_timestamps`` (per video)
    meta: dict
    layout: HandoffLayout

    def kwargs(self, *, carry_layout: bool = False) -> dict:
        """``get_validated_mm_data``'s keyword arguments; ``carry_layout`` adds the layout's wire form."""
        out = dict(self.meta)
        if carry_layout:
            out[LAYOUT_KWARG] = self.layout.to_wire()
        return out

    def sglang_embeddings(self) -> dict:
        """The embeddings keyed by SGLang's ``Modality`` (imports SGLang)."""
        from sglang.srt.managers.schedule_batch import Modality

        return {Modality.IMAGE if name == IMAGE else Modality.VIDEO: tensor for name, tensor in self.embeddings.items()}


@typed_failures("embeddings")
def epd_inputs(layout: HandoffLayout, embeddings: Sequence, adapter, *, video_metadata=None, limits=None,
               request_id=None) -> EPDInputs:
    """The PD receiver's arguments for ``layout`` (see the module doc); checks everything it can first.

    ``embeddings``: one tensor per item in layout order (rows, width). ``video_metadata``: one per video
    (HF's timestamps are computed from it); without it the layout's printed timestamps are used.
    A layout of the other processor convention is refused: SGLang rebuilds with ``pad_only`` only.
    ``limits``: this request's bounds (:class:`~mm_handoff.reading.Limits`; None: the process default).
    """
    import torch

    layout = accept_layout(layout, adapter, embeddings=embeddings, limits=limits, request_id=request_id)
    tensors = embedding_tensors(embeddings, request_id)
    if layout.convention != SGLANG_CONVENTION:
        raise SkewError("convention", f"{SGLANG_CONVENTION} (SGLang's EPD rebuild)", f"{layout.convention} (encoder)",
                        request_id=request_id, hint="SGLang keeps the template's vision markers whatever its "
                        "transformers; an encoder on transformers <= 5.9 replaced them")
    raw = raw_prompt_ids(layout, limits=limits, request_id=request_id)
    typed_adapter(adapter, request_id=request_id).check_prompt(layout, raw, request_id=request_id)
    data: dict[str, Any] = {}
    meta: dict[str, Any] = {"img_grid_thw": None, "video_grid_thw": None}
    for modality, key in ((IMAGE, "img_grid_thw"), (VIDEO, "video_grid_thw")):
        picked = [(i, e) for i, e in zip(layout.items, tensors, strict=True) if i.modality == modality]
        if picked:
            data[modality] = torch.cat([e for _, e in picked], dim=0)
            meta[key] = torch.tensor([list(i.grid_thw) for i, _ in picked], dtype=torch.int64)
    if VIDEO in data:
        meta["video_timestamps"] = video_timestamps(layout, adapter, video_metadata, request_id,
                                                    engine="SGLang", limits=limits)
    return EPDInputs(raw.tolist(), data, meta, layout)


@typed_failures("request")
def attach_layout(request, layout: HandoffLayout | dict):
    """Put the layout (or its wire form) into a request's ``mm_processor_kwargs`` (a ``GenerateReqInput``
    or its JSON dict, as ``/generate`` takes it); returns the request. Anything else for either, or
    ``mm_processor_kwargs`` that are not a dict, is a typed error (nothing is stored)."""
    if isinstance(layout, HandoffLayout):
        wire = layout.to_wire()
    elif isinstance(layout, dict):
        wire = layout
    else:
        raise HandoffError("layout", "a HandoffLayout or its wire form (a dict)", type(layout).__name__)
    is_dict = isinstance(request, dict)
    if request is None or isinstance(request, (tuple, list, str, bytes)):
        raise HandoffError("request", "a GenerateReqInput or its JSON dict", type(request).__name__)
    kwargs = dict.get(request, "mm_processor_kwargs") if is_dict else getattr(request, "mm_processor_kwargs", None)
    if kwargs is not None and not isinstance(kwargs, dict):
        raise HandoffError("request.mm_processor_kwargs", "a dict or None", type(kwargs).__name__)
    merged = {**(kwargs or {}), LAYOUT_KWARG: wire}
    if is_dict:
        request["mm_processor_kwargs"] = merged
    else:
        request.mm_processor_kwargs = merged
    return request


@typed_failures("request.mm_processor_kwargs")
def carried_layout(request) -> Any:
    """The wire form a request carries (``mm_processor_kwargs["mm_handoff_layout"]``), or None."""
    kwargs = dict.get(request, "mm_processor_kwargs") if isinstance(request, dict) else \
        getattr(request, "mm_processor_kwargs", None)
    return dict.get(kwargs, LAYOUT_KWARG) if isinstance(kwargs, dict) else None
