"""Load on upstream code: 512 E -> PD requests through upstream's ``MultimodalEncoder.generate_async`` and the
PD ``BaseLLM._preprocess``, from 8 threads and from asyncio tasks, with mm-handoff installed.

Mixed families (every Qwen3-VL-layout family the tree registers), images and videos, each with its own
content (so upstream's own multimodal hashes differ), one in ten stamps corrupted in transit. Checked per
request: a good PD prompt equals that request's own aggregated prompt, and the embedding it carries,
restored by upstream's own ``MultimodalParams.to_tensor`` as the worker does, is its own (rows == its pads);
a bad one is a typed ``HandoffError`` naming that request's ``disagg_request_id``; no capture slot or
admission record is left open in the thread or task; every shared-memory handle the run made is consumed
(``/dev/shm`` holds as many entries at the end as before); resident memory grows by at most
``RSS_BOUND_MIB`` from after the warm-up request to the end.
"""

import asyncio
import gc
import os
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from upstream import flows

from mm_handoff.errors import HandoffError

REQUESTS_PER_MODE = 256  # threads, then asyncio tasks: 512 in all
THREADS = 8
CORRUPT_EVERY = 10
RSS_BOUND_MIB = 64
LAYOUT_KEY = "mm_handoff.layout"
IMAGE_PROMPT = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is this?<|im_end|>\n"
                "<|im_start|>assistant\n")


def _rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _inputs(index: int):
    rng = np.random.default_rng(index)
    if index % 8 == 3:  # one in eight a video (8 frames, its own pixels)
        video = flows.video_inputs(fps=2.0)
        for frame in video["multi_modal_data"]["video"][0].frames:
            frame[:] = rng.integers(0, 255, frame.shape, dtype=np.uint8)
        return video
    image = rng.integers(0, 255, (64, 96, 3), dtype=np.uint8)
    return {"prompt": IMAGE_PROMPT, "multi_modal_data": {"image": [image]}}


def _shm_entries() -> int:
    """This process's shared-memory files (torch names them ``torch_<pid>_...``; other processes' come and go)."""
    mine = f"torch_{os.getpid()}_"
    return sum(name.startswith(mine) for name in os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else 0


def _consume(upstream, *handles):
    """Rebuild and drop each one-use handle, as the worker process would."""
    container = upstream.shared_tensor.SharedTensorContainer
    for handle in handles:
        if isinstance(handle, dict) and "method_key" in handle:
            container.from_dict(handle).get_local_view()


def _one(upstream, model, index: int) -> tuple:
    """Encoder -> (maybe corrupted) transit -> PD; ("ok"|"refused"|..., index, detail)."""
    from mm_handoff.trtllm import _admission, _encoder

    inputs = _inputs(index)
    enc = flows.encoder(upstream, model.processor, model.config)
    out = enc.generate_async(inputs)
    enc._executor.requests[0]["multimodal_params"].to_tensor("multimodal_data")  # the encoder worker's restore
    params = flows.pd_params(upstream, out)
    params.disagg_request_id = 100000 + index
    corrupt = index % CORRUPT_EVERY == 0
    if corrupt:
        stamp = dict(params.multimodal_embedding_handles[0][LAYOUT_KEY])
        stamp["checksum"] = "0" * len(stamp["checksum"])
        params.multimodal_embedding_handles[0] = dict(params.multimodal_embedding_handles[0], **{LAYOUT_KEY: stamp})
    pd = flows.pd_llm(upstream, model.processor, model.config)
    try:
        preprocessed = pd._preprocess({"prompt": inputs["prompt"]}, None, params)
    except HandoffError as exc:
        result = ("refused" if corrupt else "unexpected-refusal", index, str(exc))
        _consume(upstream, *params.multimodal_embedding_handles, params.mrope_position_ids_handle,
                 params.mrope_position_deltas_handle)
    else:
        ids, mm_params = preprocessed[0], flows.multimodal_params_of(preprocessed)
        mm_params.to_tensor("multimodal_data")  # upstream's restore, as BaseWorker._enqueue_request does
        rows = mm_params.multimodal_data["multimodal_embedding"][0].shape[0]
        pads = int(np.isin(np.asarray(ids), [model.config.image_token_id, model.config.video_token_id]).sum())
        if corrupt:
            result = ("corruption-accepted", index, "")
        elif ids != out.prompt_token_ids or rows != pads:
            result = ("mismatch", index, f"{len(ids)} vs {len(out.prompt_token_ids)} ids, {rows} rows vs {pads} pads")
        else:
            result = ("ok", index, "")
    leftover = (_encoder._SLOT.get(), _admission._CURRENT.get())
    if leftover != (None, None):
        result = ("slot-left-open", index, repr(leftover))
    return result


def _check(results, offset):
    bad = [r for r in results if r[0] not in ("ok", "refused")]
    assert not bad, bad[:5]
    refused = [r for r in results if r[0] == "refused"]
    assert len(refused) == sum(1 for i in range(offset, offset + REQUESTS_PER_MODE) if i % CORRUPT_EVERY == 0)
    for _, index, message in refused:
        assert str(100000 + index) in message, message  # the error names its own request


def test_load_threads_and_asyncio_on_upstream_code(upstream, models, glue):
    glue.install(policy="raise")
    families = sorted(upstream.families)
    built = {family: models(family) for family in families}
    pick = random.Random(0)
    plan = [built[pick.choice(families)] for _ in range(2 * REQUESTS_PER_MODE)]

    _one(upstream, plan[0], 2 * REQUESTS_PER_MODE + 1)  # warm-up outside the measured window
    rss, shm = [_rss_mib()], _shm_entries()
    with ThreadPoolExecutor(THREADS) as pool:
        threaded = list(pool.map(lambda i: _one(upstream, plan[i], i), range(REQUESTS_PER_MODE)))
    rss.append(_rss_mib())
    _check(threaded, 0)

    async def task(index):
        await asyncio.sleep(0)  # interleave the tasks between requests
        return _one(upstream, plan[index], index)

    async def run_all():
        return await asyncio.gather(*(task(i) for i in range(REQUESTS_PER_MODE, 2 * REQUESTS_PER_MODE)))

    tasks = asyncio.run(run_all())
    rss.append(_rss_mib())
    _check(tasks, REQUESTS_PER_MODE)
    gc.collect()
    print(f"RSS MiB after warm-up / threads / tasks: {rss}; /dev/shm entries {shm} -> {_shm_entries()}")
    assert rss[-1] - rss[0] <= RSS_BOUND_MIB, rss
    assert _shm_entries() == shm
