"""Stand-in for ``tensorrt_llm/llmapi/llm_args.py`` (``TorchLlmArgs`` reduced to a dataclass).

Unknown keyword arguments are kept in ``extra`` instead of being rejected.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional


@dataclass
class TorchLlmArgs:
    model: str
    backend: Optional[str] = "pytorch"
    mm_encoder_only: bool = False
    max_num_tokens: Optional[int] = 8192
    max_seq_len: Optional[int] = None
    return_perf_metrics: bool = False
    checkpoint_format: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)
