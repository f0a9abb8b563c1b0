"""Encoder side: the request vLLM's precomputed-embeddings path needs, built from a layout.

vLLM's Qwen3-VL embeds path (``LLM(..., enable_mm_embeds=True)``) expands the placeholders itself,
so it must get the *un-expanded* prompt: one ``<|image_pad|>`` per image and one
``<|vision_start|><|video_pad|><|vision_end|>`` per video. Handing it the encoder's expanded ids is
accepted silently and expanded a second time (measured with vLLM 0.32: 238 ids become 461). The
embeddings are the vision tower's rows with the deepstack levels concatenated after them (vLLM's
``Qwen3_VisionTransformer.forward`` returns ``cat([merged] + deepstack, dim=1)``), per modality in
item order, with the grids and, for videos, HF's per-group timestamps: vLLM prints them itself with
``f"<{t:.1f} seconds>"``, the expression HF uses, so HF's unrounded values (or the values the
layout read back from the prompt, which print the same) give the same text.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from .._env import VLLM_CHECK, env_flag
from ..adapters.base import typed_adapter
from ..checks import accept_layout
from ..errors import EmbeddingCountError, HandoffError, typed_failures
from ..glue.unexpanded import LAYOUT_KWARG, embedding_tensors, raw_prompt_ids, video_timestamps
from ..layout import HandoffLayout
from ..layout.items import IMAGE
from ..reading import plain_sequence, strict_int
from ._lifecycle import install, is_installed

#: what a carried layout needs where vLLM runs its multimodal processor
CHECK_NEEDED = ("the mm-handoff check installed in the process that runs vLLM's multimodal processor "
                "(mm_handoff.vllm.install(), or MM_HANDOFF_VLLM_CHECK=1 in every vLLM process)")


@attrs.frozen(eq=False)
class EmbedsRequest:
    """One request for vLLM's embeds path, and the layout it must expand to."""

    #: the un-expanded prompt (int32, read-only)
    prompt_token_ids: np.ndarray
    #: ``{"image": {...}, "video": {...}}`` as vLLM's ``multi_modal_data`` takes it
    multi_modal_data: dict
    #: the encoder's layout: what vLLM's expansion must equal
    layout: HandoffLayout
    #: the request the errors name
    request_id: Any = None

    def prompt(self, *, carry_layout: bool = False) -> dict:
        """The dict to pass to ``LLM.generate`` in this process; ``carry_layout`` adds the layout (its wire form
        under ``mm_processor_kwargs[LAYOUT_KWARG]``) for the in-engine check.

        vLLM runs its multimodal processor, where the check takes the layout out again, in the process that
        calls ``LLM.generate``. Without the check there, vLLM puts the layout into its processor cache's key
        and fails with its own ``TypeError: unhashable type: 'dict'``, so a carried layout needs the check in
        this process: with ``MM_HANDOFF_VLLM_CHECK`` on it is installed now (what vLLM's plugin loader does in
        this process when the engine starts); otherwise a :class:`~mm_handoff.errors.HandoffError` says what
        to do, before the request is built. A request for a server (another process) carries the wire form in
        its own ``mm_processor_kwargs``, and that server needs ``MM_HANDOFF_VLLM_CHECK=1`` in its processes
        (``examples/vllm_serve_client.py``).
        """
        out: dict[str, Any] = {"prompt_token_ids": self.prompt_token_ids.tolist(),
                               "multi_modal_data": self.multi_modal_data}
        if carry_layout:
            if not is_installed() and env_flag(VLLM_CHECK):
                install()
            if not is_installed():
                raise HandoffError(f"mm_processor_kwargs[{LAYOUT_KWARG!r}]", CHECK_NEEDED,
                                   "no check installed in this process", request_id=self.request_id,
                                   hint="without it vLLM fails on the carried layout (TypeError: unhashable type: "
                                   "'dict'); install the check, or send prompt() without carry_layout and hold "
                                   "the output to the layout with check_output")
            out["mm_processor_kwargs"] = {LAYOUT_KWARG: self.layout.to_wire()}
        return out


@typed_failures("embeddings")
def item_embeddings(rows, deepstack: Sequence = (), item_rows: Sequence[int] | None = None) -> list:
    """Per-item tensors ``(rows_i, hidden * (1 + levels))``: the deepstack levels concatenated after the
    vision tower's rows, in the model's level order, split by ``item_rows`` (rows in sequence order, plain
    counts that add up to the rows: never truncated)."""
    import torch

    full = torch.cat([torch.as_tensor(rows)] + [torch.as_tensor(d) for d in deepstack], dim=1)
    if item_rows is None:
        return [full]
    sizes = _row_counts(item_rows, int(full.shape[0]))
    if sum(sizes) != full.shape[0]:
        raise EmbeddingCountError("item_rows", f"counts adding up to the {full.shape[0]} rows", sum(sizes))
    return list(torch.split(full, sizes, dim=0))


def _row_counts(item_rows, rows: int) -> list:
    """Rows per item as plain ints (a list, a 1-D integer tensor or array, any iterable), at most one per
    row read; integral values only (``8.0`` is 8, ``8.5`` an error), never negative."""
    shape = getattr(item_rows, "shape", None)
    if isinstance(item_rows, (list, tuple)):
        values = plain_sequence(item_rows)[:rows + 1]
    elif isinstance(shape, tuple) and hasattr(item_rows, "tolist"):
        if len(shape) != 1 or int(shape[0]) > rows + 1:
            raise EmbeddingCountError("item_rows", f"at most {rows} row counts, one per item", f"shape {list(shape)}")
        values = item_rows.tolist()
    else:
        values = list(itertools.islice(item_rows, rows + 1))
    out = []
    for i, n in enumerate(values):
        try:
            count = strict_int(n)
        except (TypeError, ValueError, OverflowError) as exc:
            raise EmbeddingCountError(f"item_rows[{i}]", "a row count (an int)", n) from exc
        if count < 0:
            raise EmbeddingCountError(f"item_rows[{i}]", "a row count (an int >= 0)", count)
        out.append(count)
    return out


@typed_failures("embeddings")
def embeds_request(layout: HandoffLayout, embeddings: Sequence, adapter, *, video_metadata=None, limits=None,
                   request_id=None) -> EmbedsRequest:
    """The embeds-path request for ``layout`` (see the module doc); checks everything it can first.

    ``embeddings``: one tensor per item in layout order, ``(rows, hidden * (1 + levels))`` (see
    :func:`item_embeddings`). ``video_metadata``: the processor's returned metadata, one per video
    (HF's timestamps are computed from it); without it the layout's printed timestamps are used.
    ``limits``: this request's bounds (:class:`~mm_handoff.reading.Limits`; None: the process default).
    """
    import torch

    layout = accept_layout(layout, adapter, embeddings=embeddings, limits=limits, request_id=request_id)
    tensors = embedding_tensors(embeddings, request_id)
    raw = raw_prompt_ids(layout, limits=limits, request_id=request_id)
    typed_adapter(adapter, request_id=request_id).check_prompt(layout, raw, request_id=request_id)
    data: dict[str, dict] = {}
    for modality in (IMAGE, "video"):
        picked = [(item, emb) for item, emb in zip(layout.items, tensors, strict=True) if item.modality == modality]
        if picked:
            data[modality] = {f"{modality}_embeds": torch.cat([e for _, e in picked], dim=0),
                              f"{modality}_grid_thw": torch.tensor([list(i.grid_thw) for i, _ in picked])}
    if "video" in data:
        data["video"]["timestamps"] = video_timestamps(layout, adapter, video_metadata, request_id, limits=limits)
    return EmbedsRequest(raw, data, layout, request_id)
