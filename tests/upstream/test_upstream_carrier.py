"""Upstream's own carrier, validated on upstream's code: ``DisaggregatedParams.multimodal_layout``.

Where the tree's ``DisaggregatedParams`` (the class ``llm.py`` uses) has ``multimodal_layout`` (the
``yechank-nvidia/TensorRT-LLM`` fork: ``disaggregated_params.py`` and ``llmapi/llm.py`` @ 328aa1d9,
``llmapi/mm_encoder.py`` and ``inputs/multimodal.py`` @ ae56b100), upstream's PD ``_preprocess`` takes the
prompt from the carried layout and checks only its handle count. mm-handoff installs in ``mode=validate``:
a request carrying the layout is never rewritten; admission reads the carried layout as a ``HandoffLayout``
and refuses one that contradicts itself or this request. Every carried layout here is built by upstream's own
``MultimodalEncoder.build_prefill_disaggregated_params`` from what upstream's encoder ``_preprocess``
produced (the honest one), or by upstream's own stock prefill method (a stale encoder's), or is the
honest one with one field changed. Not applicable to a tree without the carrier.
"""

import dataclasses

import pytest
import torch
from upstream import flows

from mm_handoff.errors import HandoffError

LAYOUT_FIELD = "multimodal_layout"
MM_HANDOFF_KEYS = ("mm_handoff.layout", "mm_handoff.grids", "mm_handoff.video_metadata")


@pytest.fixture
def carrier(upstream):
    cls = flows.params_class(upstream)
    if LAYOUT_FIELD not in getattr(cls, "__dataclass_fields__", {}):
        pytest.skip(f"not applicable: this tree's DisaggregatedParams has no {LAYOUT_FIELD} (no upstream carrier)")
    if not hasattr(upstream.mm_encoder.MultimodalEncoder, "build_prefill_disaggregated_params"):
        pytest.skip("not applicable: this tree's mm_encoder.py cannot build the carried layout")
    upstream.tree.require("tensorrt_llm.llmapi.llm", "tensorrt_llm.llmapi.mm_encoder", "tensorrt_llm.inputs.multimodal")
    return cls


def _handoff(upstream, model, *, stamped=True):
    """Encoder on upstream code; (encoder output, the PD request's DisaggregatedParams carrying upstream's
    own layout, built by upstream's ``build_prefill_disaggregated_params``)."""
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async(flows.video_inputs(fps=2.0))
    request = enc._executor.requests[0]
    pre = upstream.llm.PreprocessedInputs(prompt_token_ids=request["prompt_token_ids"],
                                          multimodal_params=request["multimodal_params"])
    params = upstream.mm_encoder.MultimodalEncoder.build_prefill_disaggregated_params(pre)
    handles = out.disaggregated_params.multimodal_embedding_handles
    if not stamped:  # an encoder without mm-handoff: upstream's handles only
        handles = [{k: v for k, v in h.items() if k not in MM_HANDOFF_KEYS} for h in handles]
    params.multimodal_embedding_handles = handles
    params.request_type = "context_only"
    return out, params


def _run(upstream, model, params):
    pd = flows.pd_llm(upstream, model.processor, model.config)
    result = pd._preprocess({"prompt": flows.PROMPT}, None, params)
    mm_input = flows.multimodal_params_of(result).multimodal_input
    return list(result[0]), {f.name: getattr(mm_input, f.name) for f in dataclasses.fields(mm_input)
                             if f.name != "multimodal_hashes"}


@pytest.mark.parametrize("stamped", [True, False], ids=["encoder-with-mm-handoff", "upstream-encoder-only"])
def test_carrier_an_honest_carried_layout_passes_untouched(upstream, model, glue, carrier, stamped):
    report = glue.install(policy="raise")
    assert report["mode"] == "validate" and report["installed"]
    out, params = _handoff(upstream, model, stamped=stamped)
    installed = _run(upstream, model, params)
    glue.uninstall()
    _, params = _handoff(upstream, model, stamped=stamped)
    stock = _run(upstream, model, params)
    assert installed == stock  # mm-handoff changed nothing upstream produced
    assert installed[0] == out.prompt_token_ids == params.multimodal_layout.prompt_token_ids


def test_carrier_a_stale_encoders_one_run_video_is_refused(upstream, model, glue, carrier):
    """A carried layout as an encoder before the per-group layout sends it (upstream's own stock prefill
    method: one pad run per video, no timestamps): refused, naming the field; uninstalled, upstream
    takes it without a word and its mRoPE ids are longer than the prompt (#20138 through the carrier)."""
    out, params = _handoff(upstream, model)
    stale = model.processor.build_disagg_prefill_multimodal_inputs({"prompt": flows.PROMPT},
                                                                   params.multimodal_embedding_handles)
    assert len(stale.prompt_token_ids) < len(out.prompt_token_ids)
    ids, _ = _run(upstream, model, _with_layout(params, stale))  # uninstalled: accepted silently
    assert ids == stale.prompt_token_ids and len(ids) < len(out.prompt_token_ids)

    glue.install(policy="raise")
    _, params = _handoff(upstream, model)
    stock = glue.get_original((type(model.processor), "build_disagg_prefill_multimodal_inputs"))
    stale = stock(model.processor, {"prompt": flows.PROMPT}, params.multimodal_embedding_handles)
    with pytest.raises(HandoffError) as info:
        _run(upstream, model, _with_layout(params, stale))
    assert f"{LAYOUT_FIELD}." in str(info.value), info.value  # named in the carried layout


def _with_layout(params, layout):
    params.multimodal_layout = layout
    return params


@pytest.mark.parametrize("lie", ["cumsum", "runs", "item_types"])
def test_carrier_a_layout_that_contradicts_its_own_ids_is_refused(upstream, model, glue, carrier, lie):
    """The honest layout with one field changed in a way upstream's own ``__post_init__`` checks let
    through: refused, naming ``multimodal_layout.<field>``; uninstalled, upstream takes it."""
    def lying():
        _, params = _handoff(upstream, model)
        honest = params.multimodal_layout
        if lie == "cumsum":  # one embedding slot counted one position late
            cumsum = honest.multimodal_embed_mask_cumsum.clone()
            first = int(torch.nonzero(torch.diff(cumsum, prepend=torch.zeros(1, dtype=cumsum.dtype)))[0])
            cumsum[first] -= 1
            changed = dataclasses.replace(honest, multimodal_embed_mask_cumsum=cumsum)
        elif lie == "runs":  # two groups' runs swapped in length (same total rows)
            lengths = list(honest.multimodal_run_lengths)
            lengths[0], lengths[1] = lengths[0] + 1, lengths[1] - 1
            changed = dataclasses.replace(honest, multimodal_run_lengths=lengths)
        else:  # the video claimed an image
            changed = dataclasses.replace(honest, item_types=[0] * len(honest.multimodal_lengths))
        return _with_layout(params, changed)

    field = {"cumsum": "multimodal_embed_mask_cumsum", "runs": "multimodal_run", "item_types": "item_types"}[lie]
    _run(upstream, model, lying())  # uninstalled: accepted
    glue.install(policy="raise")
    with pytest.raises(HandoffError) as info:
        _run(upstream, model, lying())
    assert f"{LAYOUT_FIELD}." in str(info.value) and field in str(info.value), info.value


def test_carrier_install_keeps_slice_and_ingress_checks(upstream, glue, carrier):
    report = glue.install()
    rows = {row["target"].rpartition(":")[2]: row for row in report["hooks"]}
    assert rows["BaseLLM._preprocess"]["state"] == "patched"
    prefill = [r for name, r in rows.items() if name.endswith("build_disagg_prefill_multimodal_inputs")]
    assert prefill and all("without multimodal_layout" in r["reason"] for r in prefill)
    assert [r["state"] for name, r in rows.items() if name == "BaseWorker._enqueue_request"] in (
        ["patched"], ["unavailable"])
    assert report["upstream_carriers"][LAYOUT_FIELD].startswith("present")
