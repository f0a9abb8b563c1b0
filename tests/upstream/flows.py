"""Drive upstream's real classes the way an E -> PD deployment does, with the compiled parts faked.

Only the executor is fake (:class:`FakeEngine`): it records what ``generate_async`` hands the workers and
answers like the encoder engine does, with real ``SharedTensorContainer`` handles for the embeddings and
mRoPE tensors. Everything else (``BaseLLM._preprocess``, ``MultimodalEncoder.generate_async``, the
Qwen3-VL input processor with the real HF processor) is upstream's code; the ``LLM`` objects are
upstream's classes built by :func:`harness.upstream_object` with :class:`harness.UpstreamArgs`, so an
attribute upstream reads that the harness lacks fails as a named harness gap.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np

PROMPT = ("<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n"
          "<|im_start|>assistant\n")
HERE = Path(__file__).parent

#: the upstream modules an E -> PD flow runs: each test requires them to be upstream's code, not a stub
PROCESSOR_MODULES = ("tensorrt_llm._torch.models.modeling_qwen3vl", "tensorrt_llm._torch.models.modeling_qwen2vl",
                     "tensorrt_llm.inputs.registry", "tensorrt_llm.inputs.multimodal")
LLM_MODULES = ("tensorrt_llm.llmapi.llm", "tensorrt_llm.llmapi.mm_encoder", "tensorrt_llm.disaggregated_params",
               "tensorrt_llm._torch.shared_tensor.shared_tensor")


#: upstream model_type -> the mm-handoff tiny-config family that has its HF config class (upstream
#: registers Cosmos3 as ``cosmos3`` and its checkpoints' alias ``cosmos3_omni``; HF's config is Cosmos3Omni)
TINY_FAMILY = {"cosmos3": "cosmos3_omni"}


def hf_model_dir(tmp: Path, family: str = "qwen3_vl", architecture: str = None):
    """A tiny random checkpoint dir of ``family`` (config + real processor + offline tokenizer); (dir, config)."""
    from mm_handoff.hf.processors import build_processor
    from mm_handoff.hf.tiny import model_class_name, tiny_config

    tiny = TINY_FAMILY.get(family, family)
    config = tiny_config(tiny)
    config.architectures = [architecture or model_class_name(tiny)]
    config.save_pretrained(str(tmp))
    processor = build_processor(tiny)
    processor.save_pretrained(str(tmp))
    return tmp, config


def clip(frames: int = 8, height: int = 64, width: int = 96, fps: float = 24.0):
    """A video item (``frames`` HWC uint8, ``metadata`` dict) as TensorRT-LLM's loader gives it: upstream's own
    ``VideoData`` (``inputs/multimodal_data.py``) when the tree has it, which upstream's hashing and token
    counting recognise by ``isinstance``; else a stand-in with the same three fields."""
    from mm_handoff.hf.processors import synthetic_clip

    video, _ = synthetic_clip(frames, height, width, fps=fps)
    meta = {"fps": fps, "duration": frames / fps, "total_num_frames": frames, "frames_indices": list(range(frames)),
            "width": width, "height": height}
    module = sys.modules.get("tensorrt_llm.inputs.multimodal_data")
    if module is not None and not getattr(module, "__mm_stub__", False):
        return module.VideoData(frames=[f for f in video], metadata=meta, audio=None)
    return SimpleNamespace(frames=[f for f in video], metadata=meta, audio=None)


def params_class(upstream):
    """The ``DisaggregatedParams`` class ``llm.py`` uses (it moved to executor/params in recent upstream)."""
    import dataclasses

    cls = getattr(upstream.llm, "DisaggregatedParams", None)
    return cls if dataclasses.is_dataclass(cls) else upstream.disagg.DisaggregatedParams


def video_inputs(**clip_kw) -> dict:
    return {"prompt": PROMPT, "multi_modal_data": {"video": [clip(**clip_kw)]}}


_REQUEST_IDS = itertools.count(1)


class FakeEngine:
    """The executor: records each request, answers with real embedding / mRoPE handles (one embedding
    handle for all the request's pads) and the multimodal hashes upstream's ``_preprocess`` computed."""

    def __init__(self, upstream, config):
        self.upstream, self.config, self.requests = upstream, config, []

    def is_shutdown(self):
        return False

    def shutdown(self):
        pass

    def generate_async(self, prompt_token_ids, **kw):
        import torch

        self.requests.append(dict(kw, prompt_token_ids=list(prompt_token_ids)))
        cfg = self.config
        pads = int(np.isin(np.asarray(prompt_token_ids), [cfg.image_token_id, cfg.video_token_id]).sum())
        width = cfg.text_config.hidden_size * (1 + len(getattr(cfg.vision_config, "deepstack_visual_indexes", None)
                                                        or ()))
        container = self.upstream.shared_tensor.SharedTensorContainer
        handle = container.from_tensor(torch.zeros(pads, width)).dump_to_dict()
        mrope = container.from_tensor(torch.zeros(3, 1, len(prompt_token_ids), dtype=torch.int64)).dump_to_dict()
        deltas = container.from_tensor(torch.zeros(1, 1, dtype=torch.int32)).dump_to_dict()
        mm_input = getattr(kw.get("multimodal_params"), "multimodal_input", None)
        hashes = [list(h) for h in mm_input.multimodal_hashes] if mm_input is not None else [[1] * 8]
        params = params_class(self.upstream)(
            request_type="context_only", multimodal_embedding_handles=[handle], multimodal_hashes=hashes[:1],
            mrope_position_ids_handle=mrope, mrope_position_deltas_handle=deltas)
        return SimpleNamespace(request_id=next(_REQUEST_IDS), prompt_token_ids=list(prompt_token_ids),
                               disaggregated_params=params, _streaming=False, metrics_dict={})


#: what ``BaseLLM.__init__`` / ``_build_model`` would have set on the instance, for this scenario (no
#: checkpoint loaded: no HF model / generation config; the executor is :class:`FakeEngine`)
INSTANCE_STATE = {"_encode_only": False, "_post_processor_hook": None, "_hf_model_config": None,
                  "_generation_config": None, "_generation_config_explicit_values": {}}


def _llm_like(cls, upstream, processor, engine, args=None):
    from upstream.harness import UpstreamArgs, upstream_object

    return upstream_object(cls, input_processor=processor, _executor=engine, _tokenizer=processor.tokenizer,
                           args=args if args is not None else UpstreamArgs(upstream.tree.root),
                           **INSTANCE_STATE)


def encoder(upstream, processor, config, args=None):
    """An upstream ``MultimodalEncoder`` (built without ``__init__``) over a :class:`FakeEngine`."""
    return _llm_like(upstream.mm_encoder.MultimodalEncoder, upstream, processor, FakeEngine(upstream, config), args)


def pd_llm(upstream, processor, config, args=None):
    """An upstream ``LLM`` for the prefill side (its ``_preprocess`` is what runs)."""
    return _llm_like(upstream.llm.LLM, upstream, processor, FakeEngine(upstream, config), args)


def pd_params(upstream, output):
    """The ``DisaggregatedParams`` the PD request carries: the encoder's handles (and stamp), context-only."""
    enc = output.disaggregated_params
    return params_class(upstream)(
        request_type="context_only", multimodal_embedding_handles=enc.multimodal_embedding_handles,
        multimodal_hashes=enc.multimodal_hashes, mrope_position_ids_handle=enc.mrope_position_ids_handle,
        mrope_position_deltas_handle=enc.mrope_position_deltas_handle)


_WORKER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from upstream.trtllm_shim import UpstreamTree
    UpstreamTree({root!r}).activate()
    from tensorrt_llm._torch.shared_tensor import SharedTensorContainer
    out = []
    for handle in json.loads(sys.stdin.read()):
        try:
            tensor = SharedTensorContainer.from_dict(handle).get_local_view()
            out.append(["ok", tensor.tolist()])
            del tensor
        except Exception as exc:
            out.append(["error", f"{{type(exc).__name__}}: {{exc}}"])
    print(json.dumps(out))
""")


def worker_restores(tree, handles) -> list:
    """Rebuild each handle in another process, as the executor worker's ``to_tensor`` does."""
    script = _WORKER.format(tests=str(HERE.parent), root=tree.root)
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(handles), capture_output=True,
                          text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def grid_handles(multimodal_params) -> list:
    """The grid handle dicts ``_preprocess`` left in ``multimodal_data`` for the worker."""
    data = multimodal_params.multimodal_data
    out = []
    for modality, key in (("image", "image_grid_thw"), ("video", "video_grid_thw")):
        value = (data.get(modality) or {}).get(key)
        if isinstance(value, dict):
            out.append(value)
    return out


def upstream_module(upstream, module: str, path: str):
    """``module`` imported through the shim; the test is not applicable when the tree lacks its file."""
    import importlib

    import pytest

    imported = importlib.import_module(module)
    if upstream.tree.report().get(module, ("stub",))[0] != "upstream":
        pytest.skip(f"not applicable: this tree has no {path}")
    return imported


def multimodal_params_of(result):
    """The ``MultimodalParams`` in a ``_preprocess`` result, whatever its arity (five values up to the
    release with ``query_token_ids``; four in upstream's carrier branch, which drops it)."""
    found = [v for v in result if any(k.__name__ == "MultimodalParams" for k in type(v).__mro__)]
    if len(found) != 1:
        raise AssertionError(f"_preprocess returned {len(result)} values, {len(found)} of them MultimodalParams")
    return found[0]
