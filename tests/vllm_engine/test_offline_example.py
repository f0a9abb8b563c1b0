"""``examples/vllm_offline.py`` runs as pasted (its own engine start: one, in a subprocess, as a user runs it)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vllm_offline.py"


def test_offline_example_runs_as_pasted(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MM_HANDOFF_VLLM_CHECK"}  # the example installs the check
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    # the example's own lines (vLLM logs to stdout too)
    heads = ("encoder:", "vLLM:", "pre-expanded prompt refused:")
    lines = [line for line in done.stdout.splitlines() if line.startswith(heads)]
    assert [line.split(":")[0] + ":" for line in lines] == list(heads), done.stdout[-3000:]
    assert "equal to the encoder's" in lines[1]
    assert "TokenMismatchError" in lines[2]
