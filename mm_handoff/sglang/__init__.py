"""SGLang glue: the exact E -> PD handoff through SGLang's EPD (``--encoder-only`` / ``--language-only``).

Importing this package imports nothing from ``sglang`` (nor torch); the functions that need them
import them when called. Request side: :func:`epd_inputs` builds, from a layout, what SGLang's PD
receiver hands its processor (raw prompt, embeddings per modality, grids, HF's timestamps);
:func:`attach_layout` carries the layout in a request's ``mm_processor_kwargs``. PD side:
:func:`check_mm_output` compares what ``get_validated_mm_data`` produced (ids, item offsets, mRoPE
ids and delta) with the carried layout; :func:`check_stamped` refuses the silent one-run fallback of
a video without timestamps; :func:`install` runs them inside SGLang. See ``docs/sglang.md``.
"""

from ..glue.unexpanded import LAYOUT_KWARG
from ._carrier import SGLANG_CONVENTION, EPDInputs, attach_layout, carried_layout, epd_inputs
from ._checks import (
    STAMPING_MODEL_TYPES,
    EngineInputs,
    check_derived,
    check_mm_output,
    check_own_inputs,
    check_stamped,
    compare_output,
    engine_inputs,
    output_runs,
)
from ._hooks import engine_adapter, output_from_layout
from ._lifecycle import install, is_installed, status, uninstall
from .doctor import doctor_report
from .launch import EXIT_NOT_INSTALLED, install_or_exit, run_scheduler_process

__all__ = [
    "epd_inputs",
    "EPDInputs",
    "attach_layout",
    "carried_layout",
    "check_mm_output",
    "check_own_inputs",
    "compare_output",
    "check_stamped",
    "check_derived",
    "engine_inputs",
    "EngineInputs",
    "output_runs",
    "output_from_layout",
    "install",
    "uninstall",
    "is_installed",
    "status",
    "doctor_report",
    "install_or_exit",
    "run_scheduler_process",
    "EXIT_NOT_INSTALLED",
    "engine_adapter",
    "STAMPING_MODEL_TYPES",
    "SGLANG_CONVENTION",
    "LAYOUT_KWARG",
]
