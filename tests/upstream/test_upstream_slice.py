"""The context-phase mRoPE slice on upstream code: ``PyTorchModelEngine._prepare_tp_inputs``.

The tree's ``_torch/pyexecutor/model_engine.py`` (the pre-runner-refactor engine, read at
``1a0dc5f70054f66d892df6a964996fc5ead6f81e``) runs for real; for each scheduled context request it cuts
``multimodal_data['mrope_config']['mrope_position_ids'][:, :, begin_compute:begin_compute + len(prompt_tokens)]``
and appends the piece to ``mrope_position_ids``. What cannot run here is replaced, nothing else:

* the model (weights, CUDA kernels): a :class:`harness.Declared` whose ``model_config.pretrained_config``
  answers ``rope_scaling={'type': 'mrope'}``, the condition upstream's own ``use_mrope`` property tests;
* the scheduled requests (``LlmRequest`` sits on the compiled ``bindings`` request): declared with the
  attributes the method reads, filled from what upstream's PD ``_preprocess`` produced and upstream's
  ``MultimodalParams.to_tensor`` restored. ``multimodal_hashes`` is ``None``: this engine builds
  ``MultimodalRuntimeData(mm_token_lengths=..., mm_token_positions=...)``, a signature the tree's
  ``inputs/multimodal.py`` (@ 01138754) no longer has; that runtime data serves embedding chunking, not the
  mRoPE slice;
* device tensors: ``MultimodalParams.to_device(..., "cuda", pin_memory=True)`` records its call instead of
  copying to a GPU.

The method is stopped, by a trace hook, at the first statement after its context-request loop (before the
pinned host tensors and CUDA buffers it fills next), and the slices it built are read from its own frame.

The newer ``DecoderRunner._prepare_tp_inputs`` (``_torch/pyexecutor/engine/runners/decoder/runner.py``) is
not in the trees (240k characters at 0ea8c1de, not read); not applicable to a tree without
``model_engine.py``.
"""

import ast
import sys
from pathlib import Path

import pytest
import torch
from upstream import flows
from upstream.flows import upstream_module
from upstream.harness import Declared, upstream_object

from mm_handoff.errors import HandoffError

MODULE = "tensorrt_llm._torch.pyexecutor.model_engine"
PATH = "tensorrt_llm/_torch/pyexecutor/model_engine.py"


@pytest.fixture
def model_engine(upstream):
    return upstream_module(upstream, MODULE, "_torch/pyexecutor/model_engine.py")


def _lines(tree_root):
    """(line of the slice, first line after the context-request loop) in upstream's ``_prepare_tp_inputs``."""
    source = (Path(tree_root) / PATH).read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "_prepare_tp_inputs":
            for i, stmt in enumerate(node.body):
                if isinstance(stmt, ast.For) and ast.unparse(stmt.iter) == "scheduled_requests.context_requests":
                    slices = [n.lineno for n in ast.walk(stmt) if isinstance(n, ast.Subscript)
                              and "mrope_position_ids" in ast.unparse(n.value) and isinstance(n.slice, ast.Tuple)]
                    return slices[0], node.body[i + 1].lineno
    raise LookupError(f"{PATH}: no _prepare_tp_inputs with a context-request loop")


class _Stop(Exception):
    pass


def run_context_phase(engine, tree_root, scheduled):
    """Run upstream's ``_prepare_tp_inputs`` up to the end of its context loop; return its locals then
    (None when it raised before, e.g. the glue's refusal)."""
    slice_line, stop_line = _lines(tree_root)
    path = str(Path(tree_root) / PATH)
    seen = {}

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == stop_line:
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
        engine._prepare_tp_inputs(scheduled, None, None)
    except _Stop:
        pass
    finally:
        sys.settrace(previous)
    return seen or None


def _engine(model_engine):
    pretrained = Declared("PretrainedConfig", rope_scaling={"type": "mrope"})
    model = Declared("model", model_config=Declared("ModelConfig", pretrained_config=pretrained))
    return upstream_object(model_engine.PyTorchModelEngine, model=model, guided_decoder=None)


def _request(request_id, prompt, mm_data, begin=0, chunk=None):
    return Declared("LlmRequest", py_request_id=request_id, get_tokens=lambda beam: list(prompt),
                    py_prompt_len=len(prompt), context_current_position=begin,
                    context_chunk_size=len(prompt) - begin if chunk is None else chunk, multimodal_hashes=None,
                    py_multimodal_data=mm_data, py_seq_slot=0)


def _scheduled(*requests):
    return Declared("ScheduledRequests", context_requests=list(requests), generation_requests=[])


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
    ids, _, _, mm_params, _ = pd._preprocess({"prompt": flows.PROMPT}, None, params)
    mm_params.to_tensor("multimodal_data")  # upstream's restore in the worker
    return out, list(ids), mm_params.multimodal_data


def test_slice_installed_a_correct_video_request_passes_upstreams_slice_untouched(upstream, model, glue,
                                                                                 model_engine, device):
    glue.install(policy="raise")
    out, prompt, mm_data = _pd(upstream, model)
    assert prompt == out.prompt_token_ids  # the aggregated prompt (mm-handoff's PD side)
    full = mm_data["mrope_config"]["mrope_position_ids"]
    assert tuple(full.shape) == (3, 1, len(prompt))
    engine = _engine(model_engine)
    assert engine.use_mrope  # upstream's own property, on the declared model config
    seen = run_context_phase(engine, upstream.tree.root, _scheduled(_request(41, prompt, mm_data)))
    (piece,) = seen["mrope_position_ids"]
    assert torch.equal(piece, full)  # upstream sliced everything, nothing cut
    assert seen["input_ids"] == prompt and seen["position_ids"] == list(range(len(prompt)))
    assert device and device[0][:2] == ("multimodal_data", "cuda")  # upstream moved it on, as on a GPU


def test_slice_installed_chunked_prefill_pieces_are_the_aggregated_ids(upstream, model, glue, model_engine,
                                                                      device):
    glue.install(policy="raise")
    out, prompt, mm_data = _pd(upstream, model)
    full = mm_data["mrope_config"]["mrope_position_ids"]
    engine = _engine(model_engine)
    cut = len(prompt) // 3
    pieces = []
    for begin, chunk in ((0, cut), (cut, cut), (2 * cut, len(prompt) - 2 * cut)):
        seen = run_context_phase(engine, upstream.tree.root,
                                 _scheduled(_request(42, prompt, mm_data, begin=begin, chunk=chunk)))
        (piece,) = seen["mrope_position_ids"]
        assert piece.shape[-1] == chunk and seen["input_ids"] == prompt[begin:begin + chunk]
        pieces.append(piece)
    assert torch.equal(torch.cat(pieces, dim=-1), full)


def test_slice_installed_a_too_short_mrope_is_refused_before_upstream_slices(upstream, model, glue,
                                                                            model_engine, device):
    glue.install(policy="raise")
    _, prompt, mm_data = _pd(upstream, model)
    mm_data["mrope_config"]["mrope_position_ids"] = mm_data["mrope_config"]["mrope_position_ids"][:, :, :-5]
    engine = _engine(model_engine)
    with pytest.raises(HandoffError, match=r"request 43\b|request '43'") as info:
        run_context_phase(engine, upstream.tree.root, _scheduled(_request(43, prompt, mm_data)))
    assert "mrope_position_ids" in str(info.value)
    assert device == []  # upstream's loop never ran: nothing sliced, nothing moved


def test_slice_uninstalled_upstream_slices_the_20138_mismatch_silently(upstream, model, glue, model_engine,
                                                                       device):
    """The stock PD prompt (one pad run) with the encoder's longer mRoPE ids: upstream's real slice cuts the
    ids to the prompt without a word (#20138); a too-short tensor passes too, one piece short."""
    out, prompt, mm_data = _pd(upstream, model)
    full = mm_data["mrope_config"]["mrope_position_ids"]
    assert len(prompt) < full.shape[-1] == len(out.prompt_token_ids)
    engine = _engine(model_engine)
    seen = run_context_phase(engine, upstream.tree.root, _scheduled(_request(44, prompt, mm_data)))
    (piece,) = seen["mrope_position_ids"]
    assert piece.shape[-1] == len(prompt) and torch.equal(piece, full[:, :, :len(prompt)])  # silently cut

    short = dict(mm_data, mrope_config=dict(mm_data["mrope_config"], mrope_position_ids=full[:, :, :len(prompt) - 5]))
    seen = run_context_phase(engine, upstream.tree.root, _scheduled(_request(45, prompt, short)))
    (piece,) = seen["mrope_position_ids"]
    assert piece.shape[-1] == len(prompt) - 5 < len(seen["input_ids"])  # fewer positions than tokens


def test_slice_hook_is_patched_on_upstreams_engine(upstream, glue, model_engine):
    report = glue.install()
    rows = {row["target"]: row["state"] for row in report["hooks"]}
    assert rows[f"{MODULE}:PyTorchModelEngine._prepare_tp_inputs"] == "patched"
