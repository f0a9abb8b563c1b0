"""Stand-in for the ``tensorrt_llm`` package (NOT the real TensorRT-LLM).

Mirrors the hook points that the mm-handoff plugin touches, at upstream
commit 002f3cc3d0554c4ebd530d1354f96e89666d93b8 (per-file commits are named in
each module docstring and in ``tests/stand_in/README.md``). Importing it pulls
in nothing heavy: only the standard library and numpy.

Upstream's ``__init__`` eagerly imports ``LLM``, ``MultimodalEncoder``,
``SamplingParams`` and ``DisaggregatedParams``; here only ``__version__`` (and
the ``_STAND_IN`` marker) are defined: import the submodules.
"""

from .version import __version__

_STAND_IN = True
