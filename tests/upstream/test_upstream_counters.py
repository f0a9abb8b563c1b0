"""The check points' counters on upstream code (issue 32, TensorRT-LLM at the level this suite reaches).

Three requests go the whole way an E -> PD deployment takes them, every hop upstream's own code:
``MultimodalEncoder.generate_async`` (check point ``encoder``), the PD ``BaseLLM._preprocess`` with the
prefill method it calls (``admission``, ``prefill``), the worker's ``BaseWorker._enqueue_request``
(``ingress``) and the runner's ``_prepare_tp_inputs`` up to the end of its context loop (``slice``; the
last two where the tree has the file). The first and the third are honest; the second carries a mismatched
layout, put in where only one check point can see it (``bad``):

* ``prefill``: the carried layout is another request's (a 16-frame clip's, in this 8-frame request's handles);
* ``admission``: the mRoPE handle is replaced by one five ids short (the prefill point never reads it);
* ``ingress``: after admission, the restored request's mRoPE handle is replaced by one five ids short;
* ``slice``: after ingress, the scheduled request's mRoPE ids are cut five short.

The mismatched request is refused there with a typed error naming it (and only it); the next honest request
is accepted. Read from prometheus_client's default ``REGISTRY`` (the collector mm-handoff puts there), every
check point the flow passes moved by exactly what it decided: +1 accepted, +1 refused, +1 accepted at the
bad one's check point (``mm_handoff_refusals_total`` +1 for its error class), +3 accepted before it (the
mismatch came later), +2 accepted after it (the refused request never got there), and nothing else moved.
The ``encoder`` check point checks what the encoder itself derived, which no mismatch in transit can reach:
it counts three accepted in every case.
"""

import importlib
from pathlib import Path

import pytest
import torch
from upstream import flows
from upstream import test_upstream_slice as slice_flow
from upstream import test_upstream_worker as worker_flow
from upstream.flows import LLM_MODULES, PROCESSOR_MODULES

from mm_handoff.errors import EmbeddingCountError, HandoffError, MropeLengthError
from mm_handoff.trtllm import LAYOUT_KEY

prometheus_client = pytest.importorskip("prometheus_client")

ORDER = ("encoder", "prefill", "admission", "ingress", "slice")
#: the family label each check point counts under: the worker's checks are shape-only (no adapter)
FAMILY = {"encoder": "qwen3_vl", "prefill": "qwen3_vl", "admission": "qwen3_vl", "ingress": "other",
          "slice": "other"}
#: where the mismatch is put -> the typed error the check point refuses it with
ERROR = {"prefill": EmbeddingCountError, "admission": MropeLengthError, "ingress": MropeLengthError,
         "slice": MropeLengthError}
OUTCOMES = ("accepted", "refused", "rebuilt", "fallback", "shipped_grids")
ERRORS = ("AdapterError", "EmbeddingCountError", "FingerprintMismatchError", "GridMismatchError", "HandoffError",
          "LayoutError", "MropeLengthError", "SkewError", "TokenMismatchError", "WireFormatError", "other")


def _checks(point, outcome):
    return prometheus_client.REGISTRY.get_sample_value("mm_handoff_checks_total", {
        "engine": "trtllm", "family": FAMILY[point], "check_point": point, "outcome": outcome}) or 0.0


def _refusals(point, error):
    return prometheus_client.REGISTRY.get_sample_value("mm_handoff_refusals_total", {
        "engine": "trtllm", "check_point": point, "error": error}) or 0.0


def _snapshot(points) -> dict:
    figures = {("checks", p, o): _checks(p, o) for p in points for o in OUTCOMES}
    figures.update({("refusals", p, e): _refusals(p, e) for p in points for e in ERRORS})
    return figures


def _moved(before: dict, after: dict) -> dict:
    return {key: after[key] - before[key] for key in after if after[key] != before[key]}


class Pipeline:
    """Encoder -> PD -> worker -> slice on upstream's code, for one tree (the worker and the slice where the tree
    has them)."""

    def __init__(self, upstream, model, monkeypatch):
        self.upstream, self.model = upstream, model
        self.points = ["encoder", "prefill", "admission"]
        self.worker = None
        module = importlib.import_module(worker_flow.MODULE)
        if upstream.tree.report().get(worker_flow.MODULE, ("stub",))[0] == "upstream":
            self.worker = worker_flow._worker(module, upstream, monkeypatch)
            self.points.append("ingress")
        self.place = None
        for module_name, qualname, path in slice_flow.PLACES:
            file = Path(upstream.tree.root) / path
            if file.is_file() and slice_flow._lines(file):
                self.place = slice_flow.Place(upstream, module_name, qualname, path)
                self.owner = self.place.owner()
                monkeypatch.setattr(upstream.multimodal.MultimodalParams, "to_device", lambda *a, **k: None)
                self.points.append("slice")
                break
        self.container = upstream.shared_tensor.SharedTensorContainer

    def _short_mrope(self, length):
        return self.container.from_tensor(torch.zeros(3, 1, length - 5, dtype=torch.int64)).dump_to_dict()

    def encode(self, frames=8):
        enc = flows.encoder(self.upstream, self.model.processor, self.model.config)
        return enc.generate_async(flows.video_inputs(frames=frames, fps=2.0))

    def run(self, request_id: int, bad: str | None = None, other_layout=None):
        """One request the whole way; its PD prompt (the aggregated one, checked)."""
        out = self.encode()
        params = flows.pd_params(self.upstream, out)
        params.disagg_request_id = request_id
        if bad == "prefill":
            params.multimodal_embedding_handles[0][LAYOUT_KEY] = other_layout
        if bad == "admission":
            params.mrope_position_ids_handle = self._short_mrope(len(out.prompt_token_ids))
        pd = flows.pd_llm(self.upstream, self.model.processor, self.model.config)
        result = pd._preprocess({"prompt": flows.PROMPT}, None, params)
        ids, mm_params = list(result[0]), flows.multimodal_params_of(result)
        assert ids == out.prompt_token_ids  # mm-handoff's PD side: the aggregated prompt
        if self.worker is None:
            return ids
        if bad == "ingress":
            mm_params.multimodal_data["mrope_config"]["mrope_position_ids"] = self._short_mrope(len(ids))
        request = worker_flow._generation_request(self.upstream, request_id, ids, mm_params, params)
        before = len(self.worker.engine.enqueued)
        self.worker._enqueue_request(request)
        enqueued = self.worker.engine.enqueued[before]
        if self.place is None:
            return ids
        mm_data = dict(enqueued.py_multimodal_data)  # what upstream's to_tensor restored in the worker
        full = mm_data["mrope_config"]["mrope_position_ids"]
        if bad == "slice":
            mm_data["mrope_config"] = dict(mm_data["mrope_config"], mrope_position_ids=full[:, :, :-5])
        scheduled = slice_flow._scheduled(slice_flow._request(self.upstream, request_id, ids, mm_data))
        seen = slice_flow.run_context_phase(self.place, self.owner, scheduled)
        (piece,) = slice_flow._pieces(seen)
        assert torch.equal(piece, full)  # upstream sliced the aggregated ids, nothing cut
        return ids


@pytest.mark.parametrize("bad", ["prefill", "admission", "ingress", "slice"])
def test_honest_mismatched_honest_moves_the_registry_by_exactly_what_each_check_point_decided(
        upstream, model, glue, monkeypatch, bad):
    upstream.tree.require(*PROCESSOR_MODULES, *LLM_MODULES)
    glue.install(policy="raise")
    pipe = Pipeline(upstream, model, monkeypatch)
    if bad not in pipe.points:
        pytest.skip(f"not applicable: this tree has no {bad} check point (its file is not in the tree)")
    other_layout = None
    if bad == "prefill":  # another request's layout: a longer clip's, as its encoder stamped it
        other_layout = pipe.encode(frames=16).disaggregated_params.multimodal_embedding_handles[0][LAYOUT_KEY]
    before = _snapshot(pipe.points)

    first = pipe.run(9101)
    with pytest.raises(HandoffError) as info:
        pipe.run(9102, bad=bad, other_layout=other_layout)
    third = pipe.run(9103)

    refused = info.value
    assert type(refused) is ERROR[bad], repr(refused)
    assert refused.request_id == 9102 and "9102" in str(refused)  # that request's error, naming it
    assert "9101" not in str(refused) and "9103" not in str(refused)
    assert first == third  # the next honest request went through as the first did
    at = pipe.points.index(bad)
    expected = {}
    for i, point in enumerate(pipe.points):
        if i < at:
            expected[("checks", point, "accepted")] = 3.0
        elif i == at:
            expected[("checks", point, "accepted")] = 2.0
            expected[("checks", point, "refused")] = 1.0
            expected[("refusals", point, ERROR[bad].__name__)] = 1.0
        else:
            expected[("checks", point, "accepted")] = 2.0
    assert _moved(before, _snapshot(pipe.points)) == expected

