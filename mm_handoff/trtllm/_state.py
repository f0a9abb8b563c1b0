"""Process-wide installer state: one lock, one ledger, the active policy."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional

from ..policy import Policy
from ._ledger import Ledger

__all__ = ["LOCK", "LEDGER", "STATE", "InstallState"]

LOCK = threading.RLock()
LEDGER = Ledger()


@dataclass
class InstallState:
    installed: bool = False
    #: the policy every check point applies (set by install())
    policy: Policy = Policy.RAISE
    #: upstream already carries the layout: install() stood down without patching
    standing_down: bool = False
    upstream_fix_fields: list = field(default_factory=list)
    engine_version: Optional[str] = None


STATE = InstallState()
