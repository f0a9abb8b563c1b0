"""Helpers shared by the TensorRT-LLM glue tests (a top-level module: pytest's ``pythonpath`` holds tests/)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
STAND_IN_DIR = REPO / "tests" / "stand_in"
PROMPT = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe.<|im_end|>\n"
IMAGE_PROMPT = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is it?<|im_end|>\n"


def make_video(n_frames=4, size=64, fps=2.0):
    from tensorrt_llm.inputs.multimodal_data import VideoData

    frames = [np.full((size, size, 3), i, dtype=np.uint8) for i in range(n_frames)]
    return VideoData(frames=frames, metadata={"fps": fps, "frames_indices": list(range(n_frames))})


def video_request(prompt=PROMPT, **video_kwargs):
    return {"prompt": prompt, "multi_modal_data": {"video": [make_video(**video_kwargs)]}}


def run_python(code, *, launcher=False, env=None, stand_in=True, timeout=120):
    """Run ``python -c code`` in a fresh interpreter (through ``mm-handoff run --`` when asked)."""
    full_env = dict(os.environ)
    full_env.pop("MM_HANDOFF_AUTOINSTALL", None)
    full_env.pop("TLLM_WORKER_USE_SINGLE_PROCESS", None)
    paths = [str(STAND_IN_DIR)] if stand_in else []
    if full_env.get("PYTHONPATH"):
        paths.append(full_env["PYTHONPATH"])
    full_env["PYTHONPATH"] = os.pathsep.join(paths)
    full_env.update(env or {})
    argv = [sys.executable, "-c", code]
    if launcher:
        argv = [sys.executable, "-m", "mm_handoff", "run", "--", *argv]
    return subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=timeout, cwd=str(REPO))


#: a request to the stand-in's spawned worker whose mRoPE ids (16) are longer than its prompt (10), sent past
#: the parent's checks (PreprocessedInputs): a worker with mm-handoff installed refuses it at ingress, a stock
#: worker cuts the ids silently (#20138). Prints one JSON line: installed, wrapped, what the worker did.
PROBE = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import mm_handoff.trtllm as glue
    from mm_handoff.glue.ledger import WRAPPER_MARK
    from tensorrt_llm.llmapi.llm import LLM, BaseLLM, PreprocessedInputs
    from tensorrt_llm.inputs.multimodal import MultimodalParams
    from tensorrt_llm._torch.model_config import register_pretrained_config
    from tensorrt_llm._torch.shared_tensor import SharedTensorContainer
    import stand_in_helpers as H

    handle = lambda a: SharedTensorContainer.from_tensor(np.asarray(a)).dump_to_dict()
    register_pretrained_config("probe", H.make_qwen3vl_config())
    llm = LLM(model="probe", tokenizer=H.FakeTokenizer())
    data = {"mrope_config": {"mrope_position_ids": handle(np.zeros((3, 1, 16), dtype=np.int64)),
                             "mrope_position_deltas": handle(np.zeros((1, 1), dtype=np.int32))}}
    pre = PreprocessedInputs(prompt_token_ids=list(range(1000, 1010)),
                             multimodal_params=MultimodalParams(multimodal_data=data))
    try:
        out = llm.generate_async(pre).result()
        worker = "stock: pid %d" % out._stand_in_trace["worker_pid"]
    except Exception as exc:
        worker = str(exc)
    finally:
        llm.shutdown()
    print(json.dumps({"installed": glue.is_installed(),
                      "wrapped": hasattr(vars(BaseLLM)["_preprocess"], WRAPPER_MARK),
                      "worker": worker}))
""")
