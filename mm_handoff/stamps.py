"""The ``<t seconds>`` text before each video group, read from the ids (both sides and the layout
itself use this one reader, so a layout's timestamps are a function of its ids and spec)."""

from __future__ import annotations

import numpy as np

from .spec import TokenSpec

__all__ = ["parse_timestamps", "MAX_TS_TOKENS"]

#: '<' + up to 7 integer digits + '.' + digit + ' seconds' + '>' (and the marker after it)
MAX_TS_TOKENS = 12


def parse_timestamps(ids: np.ndarray, spec: TokenSpec, offsets: np.ndarray):
    """``(seconds, span starts, span ends)`` of the ``<t seconds>`` text before each group; ``None``
    when any group lacks one.

    The text is ``<`` + integer digits + ``.`` + one digit + `` seconds`` + ``>``, right before the
    group's ``<|vision_start|>`` (what the processor prints with ``:.1f``). One gather takes the 13
    tokens ending at each group's marker (one row per group); column tests read them all at once.
    The value is ``(integer * 10 + tenth) / 10``, the double nearest the printed text. Only the
    canonical spelling counts (no leading zero: ``<05.0 seconds>`` is not what ``:.1f`` prints).
    """
    vocab = spec.timestamps
    if vocab is None or not offsets.shape[0]:
        return None
    marker = offsets.astype(np.int64) - 1
    pos = marker[:, None] - np.arange(MAX_TS_TOKENS, -1, -1)[None, :]
    w = np.where(pos >= 0, ids[np.maximum(pos, 0)], -1)  # (groups, 13); column 12 is the marker
    is_digit, value = _digit_values(w, vocab.digits)
    tail = (w[:, 12] == spec.vision_start) & (w[:, 11] == vocab.close) & (w[:, 10] == vocab.seconds) \
        & (w[:, 8] == vocab.dot) & is_digit[:, 9]
    cols = np.arange(8)
    opens = np.where(w[:, :8] == vocab.open, cols, -1).max(axis=1)  # the last '<' before the dot
    integer = cols[None, :] > opens[:, None]
    ok = tail & (opens >= 0) & (opens < 7) & (is_digit[:, :8] | ~integer).all(axis=1)
    lead = value[np.arange(w.shape[0]), np.clip(opens + 1, 0, 7)]  # the first integer digit
    ok &= (opens == 6) | (lead != 0)
    if not bool(ok.all()):
        return None
    acc = (value[:, :8] * np.where(integer, 10 ** (7 - cols), 0)).sum(axis=1) * 10 + value[:, 9]
    return acc / 10, marker - MAX_TS_TOKENS + opens, marker


def _digit_values(tokens: np.ndarray, digits) -> tuple:
    """``(is a digit, its value)`` for each token; one subtraction when the ten ids are consecutive."""
    digits = np.asarray(digits, dtype=np.int64)
    if bool((np.diff(digits) == 1).all()):  # Qwen: '0'..'9' are ids 15..24
        value = tokens - digits[0]
        is_digit = (value >= 0) & (value < digits.shape[0])
        return is_digit, np.where(is_digit, value, 0)
    order = np.argsort(digits, kind="stable")
    slot = np.minimum(np.searchsorted(digits[order], tokens), digits.shape[0] - 1)
    is_digit = digits[order][slot] == tokens
    return is_digit, np.where(is_digit, order[slot], 0)
