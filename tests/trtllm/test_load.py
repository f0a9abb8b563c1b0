"""Load: 1,000 requests through the admission check from 8 threads, a fraction of them bad.

Every good request gets its own encoder's prompt and layout back, every bad one its own typed error
naming it, and nothing crosses between requests.
"""

import concurrent.futures
import copy
import random

from trtllm_helpers import PROMPT, video_request

import mm_handoff.trtllm as glue
from mm_handoff.errors import HandoffError, MropeLengthError

N_REQUESTS = 1000
N_THREADS = 8


def _sp():
    from tensorrt_llm.sampling_params import SamplingParams

    return SamplingParams(max_tokens=2)


def test_thousand_requests_from_threads_no_cross_talk(deployment):
    glue.install()
    dep = deployment()
    # distinct encoder outputs: different frame counts give different prompts and layouts
    encoded = []
    for frames in (2, 3, 4, 5, 6, 7, 8, 9):
        out = dep.encoder.generate_async(video_request(n_frames=frames)).result()
        out.disaggregated_params.request_type = "context_and_generation"
        encoded.append(out)
    rng = random.Random(0)
    plan = []
    for rid in range(N_REQUESTS):
        enc = encoded[rng.randrange(len(encoded))]
        dp = copy.deepcopy(enc.disaggregated_params)
        dp.disagg_request_id = rid
        bad = rng.random() < 0.15
        if bad:  # the encoder's mRoPE handle no longer matches the prompt it came with
            size = dp.mrope_position_ids_handle["tensor_size"]
            dp.mrope_position_ids_handle["tensor_size"] = [3, 1, size[-1] + rng.choice([-5, -1, 1, 7])]
        plan.append((rid, enc, dp, bad))

    def admit(item):
        rid, enc, dp, bad = item
        try:
            pre = dep.pd.preprocess({"prompt": PROMPT}, _sp(), dp)
        except HandoffError as exc:
            return rid, exc
        return rid, pre

    with concurrent.futures.ThreadPoolExecutor(N_THREADS) as pool:
        results = dict(pool.map(admit, plan))
    n_bad = 0
    for rid, enc, dp, bad in plan:
        got = results[rid]
        if bad:
            n_bad += 1
            assert isinstance(got, MropeLengthError), (rid, got)
            assert got.request_id == rid and f"request {rid}" in str(got)
            assert got.expected == f"prompt length {len(enc.prompt_token_ids)}"
        else:
            assert not isinstance(got, Exception), (rid, got)
            assert got.prompt_token_ids == list(enc.prompt_token_ids)
            lengths = got.multimodal_params.multimodal_data["multimodal_embedding_lengths"]
            assert lengths == [h["tensor_size"][0] for h in dp.multimodal_embedding_handles]
    assert 100 < n_bad < 200


def test_install_uninstall_raced_from_threads_leaves_one_consistent_state(engine):
    """8 threads x 50 random install/uninstall calls: afterwards either every hook point carries exactly
    one mm-handoff wrapper (installed) or every original is back (uninstalled), never a mix."""
    import threading

    from tensorrt_llm.executor.base_worker import BaseWorker
    from tensorrt_llm.llmapi.llm import BaseLLM

    targets = [(BaseLLM, "_preprocess"), (BaseWorker, "_enqueue_request")]
    originals = [vars(cls)[attr] for cls, attr in targets]
    barrier = threading.Barrier(8)

    def churn(seed):
        rng = random.Random(seed)
        barrier.wait()
        for _ in range(50):
            (glue.install if rng.random() < 0.5 else glue.uninstall)()

    threads = [threading.Thread(target=churn, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    current = [vars(cls)[attr] for cls, attr in targets]
    if glue.is_installed():
        for fn, orig in zip(current, originals, strict=True):
            assert fn is not orig and getattr(fn, "__wrapped__", None) is orig  # one layer, over the original
    else:
        assert all(fn is orig for fn, orig in zip(current, originals, strict=True))
    glue.uninstall()
    assert [vars(cls)[attr] for cls, attr in targets] == originals and not glue.is_installed()
