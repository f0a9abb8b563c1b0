"""The HF reference E/PD pipeline serves interleaved requests without mixing their layouts."""

import concurrent.futures
import copy

import pytest

pytest.importorskip("torchvision")
torch = pytest.importorskip("torch")

from mm_handoff.hf.aggregated import aggregated  # noqa: E402
from mm_handoff.hf.encode import encode  # noqa: E402
from mm_handoff.hf.prefill import pd_from_encoder  # noqa: E402
from mm_handoff.hf.processors import synthetic_clip, video_messages  # noqa: E402
from mm_handoff.hf.report import load_family  # noqa: E402


def test_interleaved_requests_keep_their_layouts():
    tok, proc, model, adapter = load_family("qwen3_vl")
    requests = []
    for k, (frames, h, w) in enumerate([(4, 64, 64), (6, 64, 96), (3, 96, 64), (8, 64, 64)]):
        video, meta = synthetic_clip(frames, h, w, fps=24.0, seed=k)
        requests.append(dict(messages=video_messages(f"Request {k}: describe."), videos=video, video_metadata=meta))
    refs = [aggregated(model, proc, max_new_tokens=3, **copy.deepcopy(r)) for r in requests]
    encoded = [encode(model, proc, adapter, request_id=f"req-{k}", **copy.deepcopy(r))
               for k, r in enumerate(requests)]
    order = [3, 0, 2, 1, 0, 3, 1, 2]  # interleaved, each request twice

    def serve(k):
        return k, pd_from_encoder(model, adapter, encoded[k], mode="epd", max_new_tokens=3)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(serve, order))
    lengths = {ref.prompt_len for ref in refs}
    assert len(lengths) == len(refs)  # the requests really have different layouts
    for k, res in results:
        assert res.prompt_len == refs[k].prompt_len
        assert res.layout.fingerprint(include_mrope=False) == encoded[k].layout.fingerprint(include_mrope=False)
        assert torch.equal(res.hidden_states, refs[k].hidden_states), k
        assert res.tokens == refs[k].tokens
