"""The aggregated reference: the plain Hugging Face model on the processor's outputs, on CPU.

What a single engine does with one request, and what every E/PD mode is compared against.
"""

from __future__ import annotations

import time

import torch

from .encode import ids_array, process_request, reset_rope_deltas
from .prefill import DEFAULT_MAX_NEW_TOKENS, PDResult

#: processor outputs that the HF model forward does not take
_NON_MODEL_KEYS = ("video_metadata",)


def _hf_rope_index(model, model_inputs) -> tuple:
    """HF's own ``get_rope_index`` on the request: ``(positions (3, L), delta)``, or ``(None, None)``."""
    mm = model_inputs.get("mm_token_type_ids")
    if mm is None:
        return None, None
    with torch.no_grad():
        pos, d = model.model.get_rope_index(model_inputs["input_ids"], mm,
                                            image_grid_thw=model_inputs.get("image_grid_thw"),
                                            video_grid_thw=model_inputs.get("video_grid_thw"))
    return pos[:, 0, :].numpy(), int(d.reshape(-1)[0])


def aggregated(model, processor, *, text: str | None = None, messages=None, images=None, videos=None,
               video_metadata=None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, inputs=None, request_id=None,
               **proc_kw) -> PDResult:
    """The aggregated reference: the plain HF model on the processor's outputs.

    Hidden states: ``model.model(**inputs).last_hidden_state``; logits: ``lm_head`` on the last position;
    tokens: ``model.generate(**inputs, do_sample=False)`` (an independent implementation of the decode loop).
    ``inputs`` (a processor ``BatchFeature``) skips the processor call.
    """
    timings = {}
    if inputs is None:
        t0 = time.perf_counter()
        _, inputs = process_request(processor, text=text, messages=messages, images=images, videos=videos,
                                    video_metadata=video_metadata, **proc_kw)
        timings["processor_s"] = time.perf_counter() - t0
    model_inputs = {k: v for k, v in dict(inputs).items() if k not in _NON_MODEL_KEYS}
    reset_rope_deltas(model)
    t0 = time.perf_counter()
    with torch.no_grad():
        hidden = model.model(**model_inputs).last_hidden_state[0]
        last_logits = model.lm_head(hidden[-1:])[0]
    timings["forward_s"] = time.perf_counter() - t0
    reset_rope_deltas(model)
    t0 = time.perf_counter()
    tokens: list = []
    if max_new_tokens > 0:
        with torch.no_grad():
            seq = model.generate(**model_inputs, max_new_tokens=max_new_tokens, min_new_tokens=0, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
        tokens = seq[0, model_inputs["input_ids"].shape[1]:].tolist()
    timings["generate_s"] = time.perf_counter() - t0
    reset_rope_deltas(model)
    positions, delta = _hf_rope_index(model, model_inputs)
    reset_rope_deltas(model)
    return PDResult(mode="aggregated", request_id=request_id, prompt_ids=ids_array(model_inputs["input_ids"]),
                    hidden_states=hidden, last_logits=last_logits, tokens=tokens, mrope_position_ids=positions,
                    mrope_position_delta=delta, layout=None, validated=False, timings=timings)
