"""The context-phase mRoPE slice on upstream code, wherever the tree has it.

Upstream cuts ``mrope_position_ids[:, :, begin_compute:begin_compute + len(prompt_tokens)]`` for each
scheduled context request in ``_prepare_tp_inputs``, which has lived in three places (every one a row of
mm-handoff's patch table, each test below runs once per place and is not applicable where the tree lacks
it):

* ``_torch/pyexecutor/engine/runners/decoder/runner.py``: ``DecoderRunner._prepare_tp_inputs`` (NVIDIA
  main, e.g. @ ``0ea8c1debd2aae24c7fceaf5474f0c627114cc6a``);
* ``_torch/pyexecutor/engine/runners/decoder/prepare.py``: ``InputPreparer._prepare_tp_inputs`` (the
  ``lori-ren/TensorRT-LLM`` fork's split of the runner);
* ``_torch/pyexecutor/model_engine.py``: ``PyTorchModelEngine._prepare_tp_inputs`` (before the runner
  refactor, e.g. @ ``1a0dc5f70054f66d892df6a964996fc5ead6f81e``).

The method runs for real; what cannot run here is replaced, nothing else:

* the model / config (weights, CUDA): :class:`harness.Declared` values that answer what the method reads
  before its context loop (mRoPE on, one pipeline stage, no guided decoder, no encoder cache);
* the scheduled request: upstream's own ``LlmRequest`` class (``llm_request.py``) when the tree has that
  file, built without ``__init__`` (its base is the compiled ``bindings`` request, so the accessors the
  base provides, e.g. ``get_tokens_range``, are declared), else a declared request; filled from what
  upstream's PD ``_preprocess`` produced and upstream's ``MultimodalParams.to_tensor`` restored;
* device tensors: ``MultimodalParams.to_device(..., "cuda", ...)`` records its call instead of copying.

The method is stopped, by a trace hook, at the first statement after its context-request loop (before the
pinned host tensors and CUDA buffers it fills next), and the slices it built are read from its frame.
"""

import ast
import sys
from pathlib import Path

import pytest
import torch
from upstream import flows
from upstream.harness import Declared, upstream_object

from mm_handoff.errors import HandoffError

RUNNERS = "tensorrt_llm._torch.pyexecutor.engine.runners.decoder"
#: (module, class, file): where upstream has sliced, newest first (the patch table's slice rows)
PLACES = (
    (f"{RUNNERS}.prepare", "InputPreparer", "tensorrt_llm/_torch/pyexecutor/engine/runners/decoder/prepare.py"),
    (f"{RUNNERS}.runner", "DecoderRunner", "tensorrt_llm/_torch/pyexecutor/engine/runners/decoder/runner.py"),
    ("tensorrt_llm._torch.pyexecutor.model_engine", "PyTorchModelEngine",
     "tensorrt_llm/_torch/pyexecutor/model_engine.py"),
)
LLM_REQUEST = "tensorrt_llm._torch.pyexecutor.llm_request"


def _lines(path: Path):
    """(line of the slice, first line after the context-request loop) in the file's ``_prepare_tp_inputs``;
    None when it has no such method."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == "_prepare_tp_inputs":
            for i, stmt in enumerate(node.body):
                if isinstance(stmt, ast.For) and ast.unparse(stmt.iter) == "scheduled_requests.context_requests":
                    slices = [n.lineno for n in ast.walk(stmt) if isinstance(n, ast.Subscript)
                              and "mrope_pos" in ast.unparse(n.value) and isinstance(n.slice, ast.Tuple)]
                    if slices and i + 1 < len(node.body):
                        return slices[0], node.body[i + 1].lineno
    return None


class Place:
    """One place upstream slices, in this tree: its class (upstream code) and the lines to trace."""

    def __init__(self, upstream, module, qualname, path):
        import importlib

        self.module, self.qualname, self.path = module, qualname, Path(upstream.tree.root) / path
        if not self.path.is_file():
            pytest.skip(f"not applicable: this tree has no {path}")
        lines = _lines(self.path)
        if lines is None:
            pytest.skip(f"not applicable: {path} in this tree has no _prepare_tp_inputs that slices the "
                        "context requests' mRoPE ids (the slice moved)")
        self.slice_line, self.stop_line = lines
        imported = importlib.import_module(module)
        upstream.tree.require(module)
        self.cls = getattr(imported, qualname)
        self.target = f"{module}:{qualname}._prepare_tp_inputs"

    def owner(self):
        """An instance of upstream's class without ``__init__``, with what the method reads declared."""
        pretrained = Declared("PretrainedConfig", rope_scaling={"type": "mrope"})
        model = Declared("model", model_config=Declared("ModelConfig", pretrained_config=pretrained))
        config = Declared("config", use_mrope=True, max_num_tokens=8192, mm_encoder_cache_enabled=False)
        return upstream_object(self.cls, model=model, guided_decoder=None, _config=config,
                               mapping=Declared("Mapping", pp_size=1), _steady_gen_cache=None)

    def call(self, owner, scheduled):
        if self.qualname == "PyTorchModelEngine":
            return owner._prepare_tp_inputs(scheduled, None, None)
        return owner._prepare_tp_inputs(scheduled, None, None, enable_spec_decode=False, runtime_draft_len=0,
                                        is_dummy=False)


@pytest.fixture(params=[p[1] for p in PLACES])
def place(request, upstream):
    module, qualname, path = next(p for p in PLACES if p[1] == request.param)
    return Place(upstream, module, qualname, path)


class _Stop(Exception):
    pass


def run_context_phase(place, owner, scheduled):
    """Run upstream's ``_prepare_tp_inputs`` up to the end of its context loop; return its locals then
    (None when it raised before, e.g. the glue's refusal)."""
    path = str(place.path)
    seen = {}

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == place.stop_line:
            seen.update(frame.f_locals)
            raise _Stop
        return local

    def outer(frame, event, arg):
        if frame.f_code.co_filename == path and frame.f_code.co_name == "_prepare_tp_inputs":
            return local
        return None

    previous = sys.gettrace()
    sys.settrace(outer)
    try:
        place.call(owner, scheduled)
    except _Stop:
        pass
    finally:
        sys.settrace(previous)
    return seen or None


def _pieces(seen):
    """The mRoPE pieces the loop built (the runner records ``(start, end, piece)``, the engine the piece)."""
    return [entry[2] if isinstance(entry, tuple) else entry for entry in seen["mrope_position_ids"]]


def _request(upstream, request_id, prompt, mm_data, begin=0, chunk=None):
    """A scheduled context request: upstream's ``LlmRequest`` (when the tree has ``llm_request.py``) with the
    compiled base's accessors declared, else a declared request."""
    import importlib

    chunk = len(prompt) - begin if chunk is None else chunk
    values = dict(py_request_id=request_id, py_prompt_len=len(prompt), context_current_position=begin,
                  context_chunk_size=chunk, multimodal_hashes=None, py_multimodal_data=mm_data, py_seq_slot=0,
                  py_num_compressed_tokens=0, py_mm_encoder_event=None, is_context_only_request=False,
                  get_tokens=lambda beam: list(prompt), get_num_tokens=lambda beam: len(prompt),
                  get_tokens_range=lambda beam, b, e: list(prompt[b:e]))
    module = importlib.import_module(LLM_REQUEST)
    # what upstream's own __init__ sets in Python before the runner reads it (llm_request.py, 0ea8c1de:
    # ``self._cached_tokens = 0``, ``self._cached_tokens_set = False``)
    values.update(_cached_tokens=0, _cached_tokens_set=False)
    if upstream.tree.report().get(LLM_REQUEST, ("stub",))[0] == "upstream":
        request = upstream_object(module.LlmRequest, **values)
        assert type(request).__mro__[1] is module.LlmRequest  # upstream's class, every method its own
        return request
    return Declared("LlmRequest", **values)


def _scheduled(*requests):
    return Declared("ScheduledRequests", context_requests=list(requests), generation_requests=[],
                    num_context_requests=len(requests))


@pytest.fixture
def device(upstream, monkeypatch):
    calls = []
    monkeypatch.setattr(upstream.multimodal.MultimodalParams, "to_device",
                        lambda self, *args, **kwargs: calls.append(args))
    return calls


def _pd(upstream, model):
    """Encoder -> PD ``_preprocess`` on upstream code; (encoder output, PD prompt, restored multimodal_data)."""
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async(flows.video_inputs(fps=2.0))
    params = flows.pd_params(upstream, out)
    pd = flows.pd_llm(upstream, model.processor, model.config)
    result = pd._preprocess({"prompt": flows.PROMPT}, None, params)
    mm_params = flows.multimodal_params_of(result)
    mm_params.to_tensor("multimodal_data")  # upstream's restore in the worker
    return out, list(result[0]), mm_params.multimodal_data


def test_slice_installed_a_correct_video_request_passes_upstreams_slice_untouched(upstream, model, glue, place,
                                                                                 device):
    glue.install(policy="raise")
    out, prompt, mm_data = _pd(upstream, model)
    assert prompt == out.prompt_token_ids  # the aggregated prompt (mm-handoff's PD side)
    full = mm_data["mrope_config"]["mrope_position_ids"]
    assert tuple(full.shape) == (3, 1, len(prompt))
    seen = run_context_phase(place, place.owner(), _scheduled(_request(upstream, 41, prompt, mm_data)))
    (piece,) = _pieces(seen)
    assert torch.equal(piece, full)  # upstream sliced everything, nothing cut
    assert list(seen["input_ids"]) == prompt and list(seen["position_ids"]) == list(range(len(prompt)))
    assert device and device[0][:2] == ("multimodal_data", "cuda")  # upstream moved it on, as on a GPU


def test_slice_installed_chunked_prefill_pieces_are_the_aggregated_ids(upstream, model, glue, place, device):
    glue.install(policy="raise")
    out, prompt, mm_data = _pd(upstream, model)
    full = mm_data["mrope_config"]["mrope_position_ids"]
    owner = place.owner()
    cut = len(prompt) // 3
    pieces = []
    for begin, chunk in ((0, cut), (cut, cut), (2 * cut, len(prompt) - 2 * cut)):
        seen = run_context_phase(place, owner,
                                 _scheduled(_request(upstream, 42, prompt, mm_data, begin=begin, chunk=chunk)))
        (piece,) = _pieces(seen)
        assert piece.shape[-1] == chunk and list(seen["input_ids"]) == prompt[begin:begin + chunk]
        pieces.append(piece)
    assert torch.equal(torch.cat(pieces, dim=-1), full)


def test_slice_installed_a_too_short_mrope_is_refused_before_upstream_slices(upstream, model, glue, place,
                                                                            device):
    glue.install(policy="raise")
    _, prompt, mm_data = _pd(upstream, model)
    mm_data["mrope_config"]["mrope_position_ids"] = mm_data["mrope_config"]["mrope_position_ids"][:, :, :-5]
    with pytest.raises(HandoffError, match=r"request 43\b|request '43'") as info:
        run_context_phase(place, place.owner(), _scheduled(_request(upstream, 43, prompt, mm_data)))
    assert "mrope_position_ids" in str(info.value)
    assert device == []  # upstream's loop never ran: nothing sliced, nothing moved


def test_slice_uninstalled_upstream_slices_the_20138_mismatch_silently(upstream, model, glue, place, device):
    """The stock PD prompt (one pad run) with the encoder's longer mRoPE ids: upstream's real slice cuts the
    ids to the prompt without a word (#20138); a too-short tensor passes too, one piece short."""
    out, prompt, mm_data = _pd(upstream, model)
    full = mm_data["mrope_config"]["mrope_position_ids"]
    if len(prompt) == full.shape[-1]:
        pytest.skip("not applicable: this tree's PD _preprocess uses the encoder's own prompt (upstream's "
                    "carrier), so the stock prompt cannot differ from the mRoPE ids")
    assert len(prompt) < full.shape[-1] == len(out.prompt_token_ids)
    owner = place.owner()
    seen = run_context_phase(place, owner, _scheduled(_request(upstream, 44, prompt, mm_data)))
    (piece,) = _pieces(seen)
    assert piece.shape[-1] == len(prompt) and torch.equal(piece, full[:, :, :len(prompt)])  # silently cut

    short = dict(mm_data, mrope_config=dict(mm_data["mrope_config"], mrope_position_ids=full[:, :, :len(prompt) - 5]))
    seen = run_context_phase(place, owner, _scheduled(_request(upstream, 45, prompt, short)))
    (piece,) = _pieces(seen)
    assert piece.shape[-1] == len(prompt) - 5 < len(seen["input_ids"])  # fewer positions than tokens


def test_slice_hook_is_patched_where_upstream_slices(upstream, glue, place):
    report = glue.install()
    rows = {row["target"]: row["state"] for row in report["hooks"]}
    assert rows[place.target] == "patched"
    assert report["slice_check"]["placed"] and place.target in report["slice_check"]["where"]
