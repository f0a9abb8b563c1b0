"""Stand-in for ``tensorrt_llm/sampling_params.py``.

Only the fields the mirrored pre-processing and the stand-in executor read.
"""

from dataclasses import dataclass
from typing import Any, List, Optional


@dataclass
class SamplingParams:
    max_tokens: Optional[int] = 8
    temperature: Optional[float] = None
    top_k: Optional[int] = None
    end_id: Optional[int] = None
    pad_id: Optional[int] = None
    add_special_tokens: bool = True
    truncate_prompt_tokens: Optional[int] = None
    logits_processor: Optional[Any] = None
    return_perf_metrics: bool = False
    ignore_eos: bool = False
    stop_token_ids: Optional[List[int]] = None
