"""``examples/sglang_language_only.py``: SGLang 0.5.23's language-only server, started as pasted, as far as a CPU goes.

What runs: the launcher in its own process (SGLang's ``prepare_server_args``, then ``launch_server``), the check
installed in that process (the tokenizer manager), SGLang's scheduler spawned (multiprocessing ``spawn``) with
``mm_handoff.sglang.run_scheduler_process`` as its entry, the check installed there too, then SGLang's own
scheduler. Where it stops: SGLang's model runner building the tiny Qwen3-VL (no weights are needed that far):
the vision tower's rotary embedding imports ``vllm._custom_ops`` on a machine without SGLang's CUDA kernels, the
scheduler dies, SGLang's launcher kills its process tree. Fail closed: an install that fails in the launcher
stops it before SGLang starts anything; one that fails in a spawned scheduler stops that process before SGLang's
scheduler runs in it.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import mm_handoff.sglang as glue

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sglang_language_only.py"
HOOKS = ("sglang.srt.multimodal.processors.qwen_vl:QwenVLImageProcessor.get_validated_mm_data",
         "sglang.srt.disaggregation.encoder.receiver:MMReceiverBase.recv_mm_data")
INSTALLED = re.compile(r"^mm-handoff: SGLang (?P<role>tokenizer manager|scheduler) process (?P<pid>\d+): "
                       r"check installed \(policy=raise\): (?P<hooks>.*)$", re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A Qwen3-VL model folder without weights: the tiny config (SGLang's architecture name) and the real processor."""
    from mm_handoff.hf.processors import build_processor
    from mm_handoff.hf.tiny import tiny_config

    directory = tmp_path_factory.mktemp("qwen3_vl_model")
    config = tiny_config("qwen3_vl")
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    config.save_pretrained(directory)
    build_processor("qwen3_vl").save_pretrained(directory)
    return directory


def _launch(model_dir, *, env=None, timeout=540):
    """Run the example as pasted; ``(exit code, stdout + stderr)``. Its process group is ended on a timeout."""
    argv = [sys.executable, str(EXAMPLE), "--model-path", str(model_dir), "--language-only",
            "--encoder-urls", f"http://127.0.0.1:{_free_port()}", "--device", "cpu", "--port", str(_free_port())]
    environ = {**os.environ, "MM_HANDOFF_POLICY": "raise", **(env or {})}
    proc = subprocess.Popen(argv, cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the launcher ran past {timeout} s:\n{out[-4000:]}")
    return proc.returncode, out


def test_the_launcher_installs_in_the_server_process_and_in_the_spawned_scheduler(model_dir):
    """Both processes print their install line with both hook points patched, each with its own pid, the
    scheduler's before SGLang's scheduler starts loading; then SGLang stops at the model runner on this CPU."""
    code, out = _launch(model_dir)
    found = {m["role"]: m for m in INSTALLED.finditer(out)}
    assert set(found) == {"tokenizer manager", "scheduler"}, out[-4000:]
    assert found["tokenizer manager"]["pid"] != found["scheduler"]["pid"]
    for match in found.values():
        assert match["hooks"] == ", ".join(f"{hook} [patched]" for hook in HOOKS), match[0]
    scheduler_line = found["scheduler"].start()
    assert scheduler_line < out.index("Load weight begin")  # installed before SGLang's scheduler runs
    # how far a CPU goes: SGLang builds the model and its rotary embedding falls back to vLLM's kernels
    assert "sglang/srt/model_loader/loader.py" in out and "No module named 'vllm'" in out, out[-4000:]
    assert code != 0


def test_a_bad_setting_stops_the_launcher_before_sglang_starts(model_dir):
    """The launcher's own install fails (a policy that does not parse): one error line, exit 78, no scheduler."""
    code, out = _launch(model_dir, env={"MM_HANDOFF_POLICY": "rebuidl"}, timeout=300)
    assert code == glue.EXIT_NOT_INSTALLED, out[-4000:]
    assert re.search(r"^mm-handoff: error: SGLang tokenizer manager process \d+: the check did not install "
                     r"\(.*MM_HANDOFF_POLICY.*rebuidl.*\); this process does not serve$", out, re.M), out[-4000:]
    assert "check installed" not in out and "scheduler process" not in out and "Load weight begin" not in out


def test_a_spawned_scheduler_whose_install_fails_exits_before_sglang_runs(monkeypatch, capfd):
    """``run_scheduler_process`` in a spawned child (as SGLang starts it) with a setting that does not parse:
    exit 78 and the error line; SGLang's scheduler entry is never called (its arguments here would make it fail
    another way)."""
    monkeypatch.setenv("MM_HANDOFF_POLICY", "rebuidl")
    child = multiprocessing.get_context("spawn").Process(target=glue.run_scheduler_process,
                                                         args=("server_args", "port_args", 0, 0, 0, None, None))
    child.start()
    child.join(300)
    err = capfd.readouterr().err
    assert child.exitcode == glue.EXIT_NOT_INSTALLED, err[-4000:]
    assert f"mm-handoff: error: SGLang scheduler process {child.pid}: the check did not install" in err
    assert "this process does not serve" in err and "Traceback" not in err
