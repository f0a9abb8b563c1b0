"""Each hook's cost per request from one image to 341k ids, on what the engine passes (see ``hooks.py``).

Requests: 1, 4, 16 and 64 images of grid (1, 14, 14) (49 pads each: the small requests that dominate a
busy server), and the three video cases of ``cases.py`` (12k ids in 20 groups, 14k ids in 384 groups,
341k ids in 384 groups). Each row records its ids and pad runs, so ``report.py`` can plot cost against
size on log-log axes and give the requests per second one core sustains per hook (``F``, converting
the ids at all, is timed beside them).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from cases import CASES, RAW_IDS, expanded
from hooks import LAYOUT_KEY, carried_handles, encoder_hook, prefill_hook

from mm_handoff import HandoffLayout, get_adapter

IMAGES = {f"{k}img": k for k in (1, 4, 16, 64)}
SCALE = [*IMAGES, *CASES]
ROUNDS = {"1img": 2000, "4img": 1000, "16img": 500, "64img": 200, "720p40": 200, "768f-official": 100,
          "768f-720p": 10}


@functools.cache
def _request(name: str):
    """(adapter, raw ids, expanded ids as a list, grids, layout, handle row width)."""
    if name in IMAGES:
        adapter = get_adapter("qwen3_vl")
        s = adapter.spec
        raw = RAW_IDS[:3] + [s.vision_start, s.image_pad, s.vision_end, 100] * IMAGES[name] + RAW_IDS[-5:]
        grids = {"image_grid_thw": [[1, 14, 14]] * IMAGES[name]}
        ids = adapter.rebuild_token_ids(raw, **grids)
    else:
        adapter, ids, _ = expanded(name)
        raw, grids = RAW_IDS, {"video_grid_thw": [list(CASES[name].grid)]}
    layout = adapter.derive_layout(ids, mrope=False, **grids)
    width = adapter.hidden_size * (1 + adapter.deepstack_levels)
    return adapter, raw, ids.tolist(), grids, layout, width


def _run(benchmark, name, role, fn):
    adapter, _, ids, _, layout, _ = _request(name)
    benchmark.group = f"scale/{name}"
    benchmark.extra_info.update(tokens=len(ids), runs=len(layout.run_positions), items=len(layout.items), role=role)
    return benchmark.pedantic(fn, rounds=ROUNDS[name], iterations=1, warmup_rounds=2)


@pytest.mark.parametrize("name", SCALE)
def test_scale_F(benchmark, name):
    ids = _request(name)[2]
    out = _run(benchmark, name, "unit", lambda: np.fromiter(ids, np.int32, count=len(ids)))
    assert out.shape == (len(ids),)


@pytest.mark.parametrize("name", SCALE)
def test_scale_encoder_hook(benchmark, name):
    adapter, _, ids, grids, layout, width = _request(name)
    handle = _run(benchmark, name, "encoder hook", lambda: encoder_hook(adapter, ids, grids, width))
    assert HandoffLayout.from_wire(handle[LAYOUT_KEY]) == layout


@pytest.mark.parametrize("name", SCALE)
def test_scale_prefill_hook(benchmark, name):
    adapter, raw, ids, _, layout, width = _request(name)
    handles = carried_handles(layout, width)
    out = _run(benchmark, name, "prefill hook", lambda: prefill_hook(adapter, handles, raw, len(ids)))
    assert out["prompt_token_ids"] == ids and out["multimodal_run_lengths"] == layout.run_lengths
