"""vLLM glue: the exact E -> PD handoff through vLLM's precomputed-embeddings path.

Importing this package imports nothing from ``vllm`` (nor torch); the functions that need them
import them when called. Encoder side: :func:`embeds_request` builds the raw prompt, the embeddings
with their deepstack levels, the grids and HF's timestamps from a layout. PD side:
:func:`check_output` / :func:`check_expansion` compare what vLLM expanded with the carried layout;
:func:`install` (or ``MM_HANDOFF_VLLM_CHECK=1`` through vLLM's plugin entry point) runs the same
check inside the engine. See ``docs/vllm.md``.
"""

from ..glue.unexpanded import LAYOUT_KWARG, raw_prompt_ids
from ._carrier import EmbedsRequest, embeds_request, item_embeddings
from ._checks import check_expansion, check_output, check_raw_prompt
from ._hooks import engine_adapter, vllm_convention
from ._lifecycle import install, is_installed, status, uninstall
from .doctor import doctor_report

__all__ = [
    "embeds_request",
    "EmbedsRequest",
    "item_embeddings",
    "raw_prompt_ids",
    "check_expansion",
    "check_output",
    "check_raw_prompt",
    "install",
    "uninstall",
    "is_installed",
    "status",
    "doctor_report",
    "engine_adapter",
    "vllm_convention",
    "LAYOUT_KWARG",
]
