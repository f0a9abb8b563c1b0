"""Stand-in for ``tensorrt_llm/logger.py``: a thin wrapper over ``logging``.

Upstream has its own ``Logger`` singleton; only the methods the mirrored code
calls are provided (debug/info/warning/error/warning_once).
"""

import logging


class _Logger:
    def __init__(self) -> None:
        self._log = logging.getLogger("tensorrt_llm")
        self._once = set()

    def debug(self, msg, *args):
        self._log.debug(msg, *args)

    def info(self, msg, *args):
        self._log.info(msg, *args)

    def warning(self, msg, *args):
        self._log.warning(msg, *args)

    def error(self, msg, *args):
        self._log.error(msg, *args)

    def warning_once(self, msg, *args, key=None):
        k = key if key is not None else msg
        if k not in self._once:
            self._once.add(k)
            self._log.warning(msg, *args)


logger = _Logger()
