"""Stand-in for ``tensorrt_llm/version.py``.

Upstream file: ``tensorrt_llm/version.py`` (NVIDIA/TensorRT-LLM). No version
file of the pinned commit 002f3cc3d0554c4ebd530d1354f96e89666d93b8 was read;
the string below is the release named by upstream issue #20138 (1.3.0rc25,
commit 785c948), whose behaviour this stand-in reproduces.
"""

__version__ = "1.3.0rc25"
