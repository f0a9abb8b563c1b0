"""TensorRT-LLM's stock PD prefill, emulated with upstream's operations for timing.

Upstream (``modeling_qwen3vl.py`` @ 002f3cc3, ``build_disagg_prefill_multimodal_inputs`` and
``_expand_prompt_token_ids_for_mm_handoff``) tokenizes the raw text prompt, allocates a torch tensor
of the expanded length, copies text tokens one by one and fills each placeholder's run with a slice
assignment, converts the result with ``.to(torch.int32).tolist()``, and builds
``DisaggPrefillMultimodalInputs``, whose ``__post_init__`` checks every id is an int. This module
re-does those steps (written here, not copied) so the baseline costs what upstream costs; the
stand-in's own expansion favours readability over speed and would overstate it.
"""

from __future__ import annotations


def stock_prefill(tokenizer, text: str, mm_handles: list, *, image_pad: int, video_pad: int, vision_start: int):
    import torch
    from tensorrt_llm.inputs.multimodal import DisaggPrefillMultimodalInputs

    input_ids = tokenizer(text, return_tensors="pt").input_ids[0]
    tokens = input_ids.tolist()
    places = [i for i, t in enumerate(tokens) if t in (image_pad, video_pad)]
    rows = [int(h["tensor_size"][0]) for h in mm_handles]
    out = torch.empty(len(tokens) - len(places) + sum(rows), dtype=input_ids.dtype)
    positions, lengths, emb, types, cu, specials = [], [], [], [], [0], []
    write, item, flat = 0, 0, 0
    for read, tok in enumerate(tokens):
        if tok not in (image_pad, video_pad):
            out[write] = tok
            write += 1
            continue
        lead = read > 0 and int(input_ids[read - 1].item()) == vision_start
        start = write - 1 if lead else write
        out[write:write + rows[item]] = tok
        positions.append(start)
        lengths.append(rows[item] + int(lead))
        emb.append(rows[item])
        types.append(0 if tok == image_pad else 1)
        cu.append(len(positions))
        if lead:
            specials.append(flat)
        flat += lengths[-1]
        write += rows[item]
        item += 1
    return DisaggPrefillMultimodalInputs(
        prompt_token_ids=out.to(torch.int32).tolist(), multimodal_lengths=lengths, multimodal_positions=positions,
        multimodal_embedding_lengths=emb, multimodal_item_run_cu_offsets=cu, multimodal_run_positions=list(positions),
        multimodal_run_lengths=list(lengths), special_token_offsets=specials, item_types=types)
