"""PD side: what vLLM actually expanded, checked against the carried layout.

vLLM's ``RequestOutput.prompt_token_ids`` are the ids after its own expansion. They must equal the
encoder's layout token for token; any difference (a prompt that was already expanded, a processor
convention that differs between versions, wrong timestamps) raises a
:class:`~mm_handoff.errors.TokenMismatchError` naming the first differing index, after the shared
accept step (:func:`mm_handoff.checks.accept_layout`: skew, grids, and the embedding rows per item when
the embeddings are passed).

:func:`check_raw_prompt` needs no layout: an embeds request's prompt must hold one placeholder per
item, or vLLM expands a pad that was already expanded (the core's
:func:`~mm_handoff.checks.check_placeholders`, with vLLM's field name and hint).
"""

from __future__ import annotations

from ..adapters.base import typed_adapter
from ..checks import accept_layout, check_placeholders
from ..errors import HandoffError, typed_failures
from ..layout import HandoffLayout
from ..layout.tokens import check_token_ids


@typed_failures("prompt_token_ids")
def check_expansion(prompt_token_ids, carried, adapter, *, embeddings=None, limits=None,
                    request_id=None) -> HandoffLayout:
    """vLLM's expanded ids equal the carried layout's (a layout or its wire form); returns the layout.
    ``limits``: this request's bounds (:class:`~mm_handoff.reading.Limits`; None: the process default)."""
    layout = accept_layout(carried, adapter, embeddings=embeddings, limits=limits, request_id=request_id)
    check_token_ids(layout.token_ids, prompt_token_ids, request_id=request_id,
                    field="prompt_token_ids after vLLM's expansion", limits=limits)
    return layout


def check_output(output, carried, adapter, *, embeddings=None, limits=None) -> HandoffLayout:
    """:func:`check_expansion` on a vLLM ``RequestOutput`` (its ``prompt_token_ids`` and ``request_id``);
    ``embeddings``: the tensors (or shapes) sent per item, to check their rows and width too. An output
    without either is a typed error naming the field."""
    fields = {}
    for name in ("request_id", "prompt_token_ids"):
        try:
            fields[name] = getattr(output, name)
        except Exception as exc:  # not a RequestOutput, or one whose attribute fails when read
            raise HandoffError(f"output.{name}", "a vLLM RequestOutput", type(output).__name__,
                               request_id=fields.get("request_id")) from exc
    return check_expansion(fields["prompt_token_ids"], carried, adapter, embeddings=embeddings, limits=limits,
                           request_id=fields["request_id"])


@typed_failures("prompt_token_ids")
def check_raw_prompt(prompt_token_ids, adapter, *, images: int, videos: int, limits=None,
                     request_id: object | None = None) -> None:
    """One ``<|image_pad|>`` per image and one ``<|video_pad|>`` per video before vLLM expands them."""
    check_placeholders(prompt_token_ids, typed_adapter(adapter, request_id=request_id).spec, images=images,
                       videos=videos, field="prompt_token_ids before vLLM's expansion", limits=limits,
                       request_id=request_id,
                       hint="the prompt was already expanded: pass the raw prompt (mm_handoff.vllm.embeds_request "
                            "builds it)")
