"""``mm_handoff.accept``: the accept step's earlier home, kept so that its documented names still import.

The step itself and every check it is made of live in :mod:`mm_handoff.checks` (the checking room);
``mm_handoff.accept_layout`` is the name to call.
"""

from __future__ import annotations

from .checks import accept_layout, adapter_value, call_adapter, embedding_shapes_of

__all__ = ["accept_layout", "call_adapter", "adapter_value", "embedding_shapes_of"]
