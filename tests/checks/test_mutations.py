"""Property: a self-consistent layout with one claim changed and its checksum recomputed (a lie that
verifies) is refused by the prefill side's accept step, or decodes to a layout equal to the original.

The prefill side holds what a real one holds: its adapter (ids, sizes, convention), the request's raw
prompt, its own grids and the embedding shapes the encoder sent."""

from __future__ import annotations

import attrs
import numpy as np
from adversary import answer, content_of, items_of, resealed, with_item
from handoff_strategies import prompts
from hypothesis import given
from hypothesis import strategies as st

from mm_handoff import HandoffError, accept_layout
from mm_handoff.layout import wire
from mm_handoff.layout.spec import TimestampVocab

CLAIMS = ["ids", "runs", "grid", "timestamps", "spans", "spec", "delta", "convention", "family", "digest"]


def _mutated_spec(draw, content) -> dict:
    spec = content.spec
    fields = spec.as_dict()
    name = draw(st.sampled_from(sorted(fields)))
    if name == "timestamps":
        if spec.timestamps is None or draw(st.booleans()):
            vocab = None if spec.timestamps is not None else TimestampVocab(27, 29, 13, 6486, range(15, 25))
        else:
            vocab = attrs.evolve(spec.timestamps, seconds=spec.timestamps.seconds + 1)
        return resealed(content, spec=attrs.evolve(spec, timestamps=vocab))
    value = fields[name] + draw(st.sampled_from([-1, 1, 2]))
    try:
        return resealed(content, spec=attrs.evolve(spec, **{name: value}))
    except HandoffError:  # not a spec this package would build: sent as it is (no checksum can cover it)
        payload = wire.encode(content)
        payload["spec"][name] = value
        return payload


def _mutated(draw, content, claim: str) -> dict:
    items = items_of(content)
    if claim == "ids":
        values = np.array(content.values)
        k = draw(st.integers(0, len(values) - 1))
        values[k] = draw(st.sampled_from([0, 100, 4999, 151652, 151653, 151655, 151656, 15, 24, 27, 29, 13]))
        return resealed(content, values=values)
    if claim in ("runs", "grid", "timestamps", "spans"):
        k = draw(st.integers(0, len(items) - 1))
        w = items[k]
        if claim == "runs":
            g = draw(st.integers(0, len(w.offsets) - 1))
            field = draw(st.sampled_from(["offsets", "lengths"]))
            arr = np.array(getattr(w, field))
            arr[g] += draw(st.sampled_from([-2, -1, 1, 2]))
            return resealed(content, items=with_item(content, k, **{field: arr}))
        if claim == "grid":
            grid = tuple(draw(st.integers(1, 4)) * (1 if d == 0 else 2) for d in range(3))
            return resealed(content, items=with_item(content, k, grid_thw=grid))
        if w.timestamps is None:
            return None
        g = draw(st.integers(0, len(w.timestamps) - 1))
        if claim == "timestamps":
            ts = np.array(w.timestamps)
            ts[g] = round(ts[g] + draw(st.sampled_from([-0.1, 0.1, 1.0, 10.0])), 1)
            return resealed(content, items=with_item(content, k, timestamps=ts))
        spans = np.array(w.spans)
        spans[g, draw(st.integers(0, 1))] += draw(st.sampled_from([-1, 1]))
        return resealed(content, items=with_item(content, k, spans=spans))
    if claim == "spec":
        return _mutated_spec(draw, content)
    if claim == "delta":
        delta = content.mrope_position_delta
        return resealed(content, mrope_position_delta=(delta or 0) + draw(st.sampled_from([-1, 1, 7])))
    if claim == "convention":
        return resealed(content, convention={"pad_only": "replace_wrapper"}.get(content.convention, "pad_only"))
    if claim == "family":
        return resealed(content, family=draw(st.sampled_from(["qwen3_vl", "qwen3_5", "cosmos3_edge", "other"])))
    return resealed(content, tokenizer_digest=draw(st.sampled_from([None, "0" * 16])))


@given(prompts(), st.sampled_from(CLAIMS), st.data())
def test_every_single_claim_mutation_is_refused_or_harmless(case, claim, data):
    adapter, raw, image_grids, video_grids, _, expanded = case
    layout = adapter.derive_layout(expanded, image_grid_thw=image_grids, video_grid_thw=video_grids)
    if not layout.items and claim in ("runs", "grid", "timestamps", "spans"):
        return
    payload = _mutated(data.draw, content_of(layout), claim)
    if payload is None:
        return
    width = adapter.handle_row_width or 8
    back, exc = answer(lambda: accept_layout(
        payload, adapter, prompt_token_ids=raw, image_grid_thw=image_grids, video_grid_thw=video_grids,
        embedding_shapes=[(n, width) for n in layout.multimodal_embedding_lengths], request_id="m"))
    if exc is not None:
        assert isinstance(exc, HandoffError) and exc.field and len(str(exc)) <= 1000 and exc.request_id == "m"
        return
    assert back == layout, claim
