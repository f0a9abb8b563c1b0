"""What the engine glues (:mod:`mm_handoff.trtllm`, :mod:`mm_handoff.vllm`, :mod:`mm_handoff.sglang`) share:
one lifecycle (:mod:`.instrumentor`: ``install()`` / ``uninstall()`` / ``status()``, idempotent, deciding
from what the installed engine has before touching anything), the patch ledger (:mod:`.ledger`), what a
failed check leads to (:mod:`.policy`: ``raise`` / ``rebuild`` / ``fallback``), and the adapters built for
engine objects (:mod:`.engine_adapters`). Nothing here imports an engine."""
