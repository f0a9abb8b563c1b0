"""Benchmarks: run with ``pytest benchmarks`` (or ``mm-handoff bench``); not part of ``make test``."""

import os
import sys

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
# the TensorRT-LLM stand-in provides the faithful emulation of upstream's stock single-run rebuild
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "stand_in"))
# the tests' stand-ins for vLLM's processor objects (tests/vllm_fakes.py), read by test_bench_signals.py
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
