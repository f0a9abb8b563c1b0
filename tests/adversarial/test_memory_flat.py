"""A long-running server does not grow with the variety of its requests: 1,000 varied requests through
derive_layout, the wire, accept_layout, rebuild_token_ids and mrope_positions in one process leave at most
the caches' own bounds behind (4 MiB of mRoPE run patterns, 256 KiB of timestamp ids per adapter)."""

from __future__ import annotations

import gc
import random
import tracemalloc

from handoff_strategies import make_adapter

from mm_handoff import accept_layout
from mm_handoff.layout.mrope import PATTERNS

FAMILIES = ["qwen3_vl", "qwen3_vl_moe", "cosmos3_omni", "qwen3_5", "qwen3_5_moe", "cosmos3_edge"]


def _request(rng: random.Random, adapter):
    s = adapter.spec
    m = s.merge_size
    raw, images, videos, metas = [rng.randrange(100, 5000)], [], [], []
    for _ in range(rng.randrange(1, 4)):
        if rng.random() < 0.5:
            raw += [s.vision_start, s.image_pad, s.vision_end]
            images.append((1, m * rng.randrange(1, 65), m * rng.randrange(1, 65)))
        else:
            raw += [s.vision_start, s.video_pad, s.vision_end]
            frames = rng.randrange(1, 33)
            videos.append((-(-frames // s.temporal_patch_size), m * rng.randrange(1, 12), m * rng.randrange(1, 12)))
            step = rng.randrange(1, 40)
            metas.append({"fps": rng.choice([2.0, 23.976, 24.0, 29.97, 30.0, 60.0]) * rng.uniform(0.5, 2.0),
                          "frames_indices": [rng.randrange(0, 90) + i * step for i in range(frames)]})
        raw += [rng.randrange(100, 5000) for _ in range(rng.randrange(0, 5))]
    return raw, images, videos, metas


def _serve(rng, adapters):
    adapter = adapters[rng.choice(FAMILIES)]
    raw, images, videos, metas = _request(rng, adapter)
    ids = adapter.rebuild_token_ids(raw, image_grid_thw=images, video_grid_thw=videos, video_metadata=metas)
    layout = adapter.derive_layout(ids, image_grid_thw=images, video_grid_thw=videos)
    back = accept_layout(layout.to_wire(), adapter, prompt_token_ids=raw, image_grid_thw=images, video_grid_thw=videos)
    positions, delta = adapter.mrope_positions(back.token_ids, image_grid_thw=images, video_grid_thw=videos)
    assert back == layout and delta == layout.mrope_position_delta and positions.shape[1] == len(ids)


def test_memory_stays_flat_over_1000_varied_requests():
    rng = random.Random(20138)
    adapters = {f: make_adapter(f, "pad_only") for f in FAMILIES}  # one per family, as a server keeps them
    bound = PATTERNS.max_bytes + sum(a._ts_cache.max_bytes for a in adapters.values()) + (1 << 20)
    tracemalloc.start()
    try:
        for _ in range(50):  # warm-up: imports, numpy's own first-use allocations
            _serve(rng, adapters)
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            _serve(rng, adapters)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert grown <= bound, f"{grown / 2**20:.1f} MiB kept (bound {bound / 2**20:.1f} MiB)"
    assert PATTERNS.nbytes <= PATTERNS.max_bytes
