"""Stand-in for ``tensorrt_llm/logger.py``: a plain ``logging`` logger.

Upstream has its own ``Logger`` singleton; the mirrored code only logs warnings here.
"""

import logging

logger = logging.getLogger("tensorrt_llm")
