"""Test oracles: plain-Python reference implementations the package's fast code is compared with."""

from mm_handoff.errors import GridMismatchError
from mm_handoff.layout import IMAGE, VIDEO, HandoffLayout, MultimodalItem, PlaceholderRun
from mm_handoff.layout.spec import TokenSpec, normalize_grids

_MAX_TS_TOKENS = 12  # '<' + up to 8 digits + '.' + digit + ' seconds' + '>'


def derive_layout_naive(token_ids, spec: TokenSpec, *, image_grid_thw=None, video_grid_thw=None,
                        family: str, convention: str, tokenizer_digest: str | None = None) -> HandoffLayout:
    """Reference derivation: one Python pass per modality, no numpy; the property tests compare the
    package's vectorised derivation against it."""
    ids = [int(t) for t in token_ids]
    m2 = spec.merge_size ** 2
    groups = []
    m = spec.merge_size
    image = normalize_grids(image_grid_thw, "image_grid_thw", merge_size=m)
    video = normalize_grids(video_grid_thw, "video_grid_thw", merge_size=m)
    for modality, pad, grids in ((IMAGE, spec.image_pad, image), (VIDEO, spec.video_pad, video)):
        need = [t * h * w // m2 for t, h, w in grids]
        pads = [i for i, t in enumerate(ids) if t == pad]
        if len(pads) != sum(need):
            raise GridMismatchError(f"{modality} pads", sum(need), len(pads))
        k = 0
        for grid, count in zip(grids, need, strict=True):
            mine = pads[k:k + count]
            k += count
            runs = []
            for p in mine:
                if runs and runs[-1][0] + runs[-1][1] == p:
                    runs[-1][1] += 1
                else:
                    runs.append([p, 1])
            groups.append((mine[0], modality, grid, [PlaceholderRun(a, b) for a, b in runs]))
    groups.sort(key=lambda g: g[0])
    items = []
    for _, modality, grid, runs in groups:
        ts = spans = None
        vocab = spec.timestamps
        if modality == VIDEO and vocab is not None:
            ts, spans = [], []
            for r in runs:
                e = r.offset - 1
                if e < 2 or ids[e] != spec.vision_start or ids[e - 1] != vocab.close or ids[e - 2] != vocab.seconds:
                    ts = spans = None
                    break
                s = next((e - k for k in range(4, _MAX_TS_TOKENS + 1) if e - k >= 0 and ids[e - k] == vocab.open), None)
                chars = {d: str(i) for i, d in enumerate(vocab.digits)}
                chars[vocab.dot] = "."
                try:
                    text = "".join(chars[t] for t in ids[s + 1:e - 2]) if s is not None else ""
                except KeyError:
                    text = ""
                # printed with ':.1f': integer digits, one dot, exactly one decimal
                whole, dot, tenth = text.partition(".")
                ok = whole.isdigit() and dot == "." and len(tenth) == 1 and tenth.isdigit()
                ts.append(float(text) if ok else None)
                if ts[-1] is None:
                    ts = spans = None
                    break
                spans.append((s, e))
        items.append(MultimodalItem(modality, tuple(runs), sum(r.length for r in runs), grid, ts, spans))
    return HandoffLayout(ids, tuple(items), spec, family=family, convention=convention,
                         tokenizer_digest=tokenizer_digest)
