"""The text a video's first timestamp touches, as HF's tokenizer reads it.

HF's processor expands a placeholder inside the prompt's *text* and tokenizes the whole string, so the
``<`` of a video's first ``<t seconds>`` is split into pre-tokens together with the characters before it:
byte-level BPE makes ``"this <"`` ``this``, ``Ġ<`` and ``"clip:<"`` ``clip``, ``:<``. Only the first
timestamp can merge: every later one follows ``<|vision_end|>``, an added token, and so does nothing after
a ``>`` (``<|vision_start|>`` follows it). The digits after ``<`` are pre-tokens of their own.

A pre-token never runs from a letter, mark or number into punctuation or spaces (the Qwen3 and Qwen3.5
split patterns), so only the text's trailing run of spaces and punctuation can change; it is settled
there, a few tokens, never by re-tokenizing the prompt. :class:`BoundaryReader` does it with the tokenizer;
without one, a ``<`` is known to stand alone only after an added token, a newline or nothing at all, and
anything else is a typed error: the side lacks what exactness needs.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np

from ..errors import HandoffError, TokenMismatchError


@functools.lru_cache(maxsize=1)
def _byte_table() -> dict:
    """GPT-2's byte-level alphabet, reversed, as a ``str.translate`` table: the code point a vocabulary uses for
    each byte -> the character of that byte's value (so ``piece.translate(table).encode("latin-1")`` is its bytes)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {c: chr(b) for b, c in zip(printable, chars, strict=True)}


#: the most bytes that may wait for a character to complete before the ids are taken for no text at all
_MOST_SPLIT_BYTES = 256


def _word(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


def _refused(field: str, actual, request_id, hint: str) -> HandoffError:
    return HandoffError(field, "text whose tokens the timestamp's '<' can be settled against", actual,
                        request_id=request_id, hint=hint)


class BoundaryReader:
    """Settles the ``<`` of a video's first timestamp against the text before it, with the tokenizer."""

    def __init__(self, tokenizer, open_id: int, open_merged: tuple, marker_ids) -> None:
        self._tok = tokenizer
        self._open = open_id
        self._opens = frozenset(open_merged) | {open_id}
        added = getattr(tokenizer, "added_tokens_decoder", None)
        #: the added tokens and the family's markers: matched before the text is split, nothing merges across
        self._added = frozenset(int(i) for i in (added if isinstance(added, dict) else ())) | frozenset(marker_ids)
        self._table = _byte_table()

    def _piece_bytes(self, piece, token_id: int, request_id) -> bytes:
        """A token's bytes. A piece outside the byte-level alphabet is refused where it cannot be bytes; one that
        reads as other bytes is caught when the text is encoded again (:meth:`_merged`)."""
        try:
            return piece.translate(self._table).encode("latin-1")
        except (AttributeError, TypeError, UnicodeEncodeError):
            raise _refused("prompt_token_ids", f"token {token_id} ({piece!r})", request_id,
                           "the tokenizer is not byte-level BPE") from None

    def _encode(self, text: str) -> list:
        return list(self._tok.encode(text, add_special_tokens=False))

    def settle(self, text_ids: np.ndarray, *, field: str, request_id=None) -> tuple:
        """``(n, ids)``: the last ``n`` of ``text_ids`` (the prompt's text right before a video placeholder,
        back to the previous item) and the first timestamp's ``<`` are ``ids`` in HF's tokenization of the
        whole text; ``ids`` ends in the token that holds the ``<``. ``(0, [<])`` when nothing merges."""
        # back from the placeholder, token by token; a token's bytes are decoded once, with the bytes of the
        # tokens after it while those end inside a character (linear in the tokens read)
        n, context, pending = 0, 0, b""
        pieces: list = []  # the tokens' strings, fetched from the tokenizer a chunk at a time
        for k in range(1, text_ids.shape[0] + 1):
            token = int(text_ids[-k])
            if token in self._added:  # matched before the text is split: nothing runs across it
                break
            if k > len(pieces):
                chunk = text_ids[max(0, text_ids.shape[0] - k - 63):text_ids.shape[0] - k + 1].tolist()
                pieces.extend(reversed(self._tok.convert_ids_to_tokens(chunk)))
            pending = self._piece_bytes(pieces[k - 1], token, request_id) + pending
            try:
                new = pending.decode("utf-8")
            except UnicodeDecodeError:  # a character split over tokens: take the next one too
                if len(pending) > _MOST_SPLIT_BYTES:
                    break
                continue
            pending = b""
            if new and _word(new[-1]):  # the pre-token before the run of spaces and punctuation ends here
                context = k - n
                break
            n = k
        if pending:  # bytes that no character completes: these ids are no text (HF's never are)
            raise _refused(field, "tokens that are not whole characters", request_id, "the prompt's ids do not "
                           "spell text")
        if n == 0:
            return 0, [self._open]
        span = text_ids[text_ids.shape[0] - n - context:]
        merged = self._merged(span, field, request_id)
        if merged[:context] != span[:context].tolist():  # the word before changed too: take the whole text
            start = text_ids.shape[0] - n - context
            while start > 0 and int(text_ids[start - 1]) not in self._added:
                start -= 1
            span, context = text_ids[start:], 0
            merged = self._merged(span, field, request_id)
            n = span.shape[0]
        out = merged[context:]
        if not out or out[-1] not in self._opens:
            raise _refused(field, f"the '<' read as token {out[-1] if out else None}", request_id,
                           "the tokenizer's '<' tokens are not the spec's (open, open_merged)")
        return n, out

    def _merged(self, span: np.ndarray, field: str, request_id) -> list:
        """The tokens of ``span``'s text followed by ``<``; ``span`` must be what the tokenizer makes of its text
        (otherwise no text gives these ids, and HF's cannot be told)."""
        ids = span.tolist()
        try:
            text = b"".join(self._piece_bytes(p, t, request_id) for p, t in zip(
                self._tok.convert_ids_to_tokens(ids), ids, strict=True)).decode("utf-8")
        except UnicodeDecodeError:
            raise _refused(field, "tokens that are not whole characters", request_id,
                           "the prompt's ids do not spell text") from None
        own = self._encode(text)
        if own != span.tolist():
            at = next((i for i, (a, b) in enumerate(zip(own, span.tolist(), strict=False)) if a != b),
                      min(len(own), span.shape[0]))
            raise TokenMismatchError(field, "the tokenizer's own ids of their text", "other ids", index=at,
                                     expected_context=own[at:at + 4], actual_context=span[at:at + 4].tolist(),
                                     request_id=request_id,
                                     hint="the prompt's ids are not the tokenizer's own; HF's processor, which "
                                     "tokenizes the text, cannot give them")
        return self._encode(text + "<")


def settle_without_tokenizer(text_ids: np.ndarray, open_id: int, safe_before: frozenset, first_added_id: int | None,
                             *, field: str, request_id=None) -> tuple:
    """:meth:`BoundaryReader.settle` without a tokenizer: ``(0, [<])`` where the ``<`` stands alone for certain
    (no text before it, or an added token or a newline right before it); a typed error otherwise."""
    if text_ids.shape[0] == 0:
        return 0, [open_id]
    last = int(text_ids[-1])
    if last in safe_before or (first_added_id is not None and last >= first_added_id):
        return 0, [open_id]
    raise _refused(field, f"text ending in token {last}", request_id,
                   "HF tokenizes the expanded text whole, so the first timestamp's '<' may merge with the text "
                   "before it; pass the tokenizer (get_adapter(..., tokenizer=...)) to settle it")
