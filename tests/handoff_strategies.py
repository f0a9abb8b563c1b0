"""Hypothesis strategies: valid expanded prompts of every family, built the way HF builds them."""

from __future__ import annotations

from hypothesis import strategies as st

from mm_handoff.adapters import FAMILIES

#: plain text ids, clear of every family's special ids and of the timestamp pieces
TEXT_IDS = st.integers(min_value=100, max_value=5000)
LAYOUT_FAMILIES = ["qwen3_vl", "qwen3_vl_moe", "cosmos3_omni", "qwen3_5", "qwen3_5_moe", "cosmos3_edge"]


class EdgeTimestampTokenizer:
    """Cosmos3-Edge's tokenizer is not public: a stand-in that spells ``<t seconds>`` with one token per
    character (ids 6000+) and leaves the special ids to the adapter's defaults (19/18/20/21)."""

    PIECES = ["<", ">", ".", *"0123456789", " seconds"]

    def convert_tokens_to_ids(self, token):
        return None

    def convert_ids_to_tokens(self, token_id):
        """Text ids read as letters: nothing merges with a timestamp's ``<`` after them."""
        return "a"

    def encode(self, text, add_special_tokens=False):
        out, i = [], 0
        while i < len(text):
            piece = " seconds" if text.startswith(" seconds", i) else text[i]
            out.append(6000 + self.PIECES.index(piece))
            i += len(piece)
        return out


def make_adapter(family: str, convention: str):
    if family == "cosmos3_edge":
        return FAMILIES[family](tokenizer=EdgeTimestampTokenizer())  # its convention is fixed
    return FAMILIES[family](convention=convention)


@st.composite
def video_metadata(draw, frames: int):
    fps = draw(st.sampled_from([24.0, 30.0, 29.97, 25.0, 2.0, 60.0]))
    step = draw(st.integers(min_value=1, max_value=30))
    start = draw(st.integers(min_value=0, max_value=50))
    return {"fps": fps, "frames_indices": [start + i * step for i in range(frames)],
            "total_num_frames": start + frames * step}


@st.composite
def prompts(draw, family: str | None = None, *, max_items: int = 3, convention: str | None = None,
            image_side: int = 4, video_side: int = 3, max_frames: int = 9, text: tuple = (6, 4)):
    """(adapter, raw_prompt_ids, image_grids, video_grids, video_metadata, expanded_ids). Sizes: grid sides
    up to ``image_side`` / ``video_side`` merged patches, up to ``max_frames`` frames, and up to ``text``
    (before the first item, after each) text ids."""
    family = family or draw(st.sampled_from(LAYOUT_FAMILIES))
    convention = convention or draw(st.sampled_from(["pad_only", "replace_wrapper"]))
    adapter = make_adapter(family, convention)
    spec = adapter.spec
    m = spec.merge_size
    raw = draw(st.lists(TEXT_IDS, min_size=1, max_size=text[0]))
    image_grids, video_grids, metas = [], [], []
    for _ in range(draw(st.integers(min_value=0, max_value=max_items))):
        raw += [spec.vision_start]
        if draw(st.booleans()):
            raw += [spec.image_pad]
            image_grids.append((1, m * draw(st.integers(1, image_side)), m * draw(st.integers(1, image_side))))
        else:
            if convention == "replace_wrapper" and family != "cosmos3_edge":
                # the trio is replaced, so the text before it touches the first timestamp: a newline, after
                # which a '<' stands alone (the adapter has no tokenizer to settle anything else)
                raw.insert(len(raw) - 1, 198)
            raw += [spec.video_pad]
            frames = draw(st.integers(1, max_frames))
            t = -(-frames // spec.temporal_patch_size)
            video_grids.append((t, m * draw(st.integers(1, video_side)), m * draw(st.integers(1, video_side))))
            metas.append(draw(video_metadata(frames)))
        raw += [spec.vision_end] + draw(st.lists(TEXT_IDS, min_size=0, max_size=text[1]))
    expanded = adapter.rebuild_token_ids(raw, image_grid_thw=image_grids, video_grid_thw=video_grids,
                                         video_metadata=metas)
    return adapter, raw, image_grids, video_grids, metas, expanded


@st.composite
def layouts(draw, family: str | None = None, mrope: bool | None = None):
    adapter, _, image_grids, video_grids, _, expanded = draw(prompts(family))
    with_mrope = draw(st.booleans()) if mrope is None else mrope
    return adapter.derive_layout(expanded, image_grid_thw=image_grids, video_grid_thw=video_grids,
                                 mrope=with_mrope)
