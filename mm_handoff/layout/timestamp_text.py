"""The ``<t seconds>`` text before each video group, read from the ids (both sides and the layout
itself use this one reader, so a layout's timestamps are a function of its ids and spec)."""

from __future__ import annotations

import functools

import numpy as np

from ..errors import LayoutError
from .spec import TokenSpec

#: '<' + up to 7 integer digits + '.' + digit + ' seconds' + '>' (and the marker after it)
MAX_TS_TOKENS = 12


def parse_timestamps(ids: np.ndarray, spec: TokenSpec, offsets: np.ndarray):
    """``(seconds, span starts, span ends)`` of the ``<t seconds>`` text before each group; ``None``
    when any group lacks one.

    The text is ``<`` + integer digits + ``.`` + one digit + `` seconds`` + ``>``, right before the
    group's ``<|vision_start|>`` (what the processor prints with ``:.1f``). One gather takes the 13
    tokens ending at each group's marker (one column per group); row tests read them all at once.
    The value is ``(integer * 10 + tenth) / 10``, the double nearest the printed text. Only the
    canonical spelling counts (no leading zero: ``<05.0 seconds>`` is not what ``:.1f`` prints).

    The first group's ``<`` may be one of the vocabulary's merged tokens (``Ġ<``, ``:<``, ...: HF tokenizes
    the expanded text whole, and the text before a video touches its first timestamp); its span then
    starts at that token. Every later ``<`` follows a ``<|vision_end|>`` and stands alone.
    """
    vocab = spec.timestamps
    if vocab is None or not offsets.shape[0]:
        return None
    marker = offsets - 1
    pos = _WINDOW[:, None] + marker  # (13, groups): one column per group, row 12 is the marker
    if int(marker[0]) >= MAX_TS_TOKENS:  # (offsets are sorted) every window lies inside the prompt
        w = ids[pos].astype(np.int64)
    else:
        w = ids[np.maximum(pos, 0)].astype(np.int64)
        w[pos < 0] = -1
    digits, consecutive, tail = _vocab_arrays(spec)
    is_digit, value = _digit_values(w, digits, consecutive)
    # the fixed tail: '.' digit ' seconds' '>' <|vision_start|>
    ok = (w[8] == vocab.dot) & is_digit[9] & (w[10:] == tail).all(axis=0)
    # the integer part: the last '<' in rows 0..6 (8 = none: argmax gives 0), then only digits up to
    # the '.', without a leading zero (the value has as many digits as there are rows)
    is_open = w[:8] == vocab.open
    opens, whole, integer = _integer_part(is_open, is_digit, value)
    if vocab.open_merged and bool(ok[0]) and not bool(integer[0]):
        # the first group's '<' may have merged with the text before it (8 ids: a set lookup, read again)
        merged = _merged_set(vocab)
        is_open[:, 0] |= [t in merged for t in w[:8, 0].tolist()]
        opens, whole, integer = _integer_part(is_open, is_digit, value)
    ok &= integer
    if not bool(ok.all()):
        return None
    return (whole * 10 + value[9]) / 10, marker - MAX_TS_TOKENS + opens, marker


def _integer_part(is_open: np.ndarray, is_digit: np.ndarray, value: np.ndarray) -> tuple:
    """Per group: where its ``<`` is (the last one in rows 0..6), the integer it spells, and whether only
    digits, without a leading zero, follow it up to the ``.``."""
    opens = 7 - np.argmax(is_open[::-1], axis=0)
    integer = (opens < 7) & (is_digit[:8] | _NOT_INTEGER[:, opens]).all(axis=0)
    whole = (value[:8] * _PLACE[:, opens]).sum(axis=0)
    return opens, whole, integer & (whole >= _LEAST[opens])


#: a group's 13-token window, relative to its <|vision_start|>
_WINDOW = np.arange(-MAX_TS_TOKENS, 1)
#: per position of the '<' (0..7; 8 = none), one column each: which of rows 0..7 are not integer
#: digits, each integer digit's place value; and the least value with that many digits (no leading zero)
_NOT_INTEGER = np.arange(8)[:, None] <= np.minimum(np.arange(9), 7)[None, :]
_PLACE = np.where(~_NOT_INTEGER, 10 ** (7 - np.arange(8))[:, None], 0)
_LEAST = np.array([10 ** (6 - k) if k < 6 else 0 for k in range(9)])


@functools.lru_cache(maxsize=16)
def _merged_set(vocab) -> frozenset:
    return frozenset(vocab.open_merged)


@functools.lru_cache(maxsize=16)
def _vocab_arrays(spec: TokenSpec) -> tuple:
    """A spec's digit ids and tail template as arrays (a deployment has one or two specs)."""
    vocab = spec.timestamps
    if vocab is None:  # (callers return before; a spec without a vocabulary spells no timestamps)
        raise LayoutError("spec.timestamps", "a timestamp vocabulary", None)
    tail = np.asarray((vocab.seconds, vocab.close, spec.vision_start), dtype=np.int64)[:, None]
    digits = np.asarray(vocab.digits, dtype=np.int64)
    return digits, bool((np.diff(digits) == 1).all()), tail


def _digit_values(tokens: np.ndarray, digits: np.ndarray, consecutive: bool) -> tuple:
    """``(is a digit, its value)`` for each token (the value of a non-digit is meaningless); one
    subtraction when the ten ids are consecutive."""
    if consecutive:  # Qwen: '0'..'9' are ids 15..24
        value = tokens - digits[0]
        return value.astype(np.uint64) < 10, value  # negatives wrap to huge values; a non-digit's value is unused
    order = np.argsort(digits, kind="stable")
    slot = np.minimum(np.searchsorted(digits[order], tokens), digits.shape[0] - 1)
    is_digit = digits[order][slot] == tokens
    return is_digit, np.where(is_digit, order[slot], 0)
