"""``mm-handoff doctor`` in a healthy vLLM environment (``.venv-vllm``): the vLLM report, exit 0; no engine starts."""

import os
import subprocess
import sys


def doctor(**env):
    environ = {key: value for key, value in os.environ.items() if key != "MM_HANDOFF_VLLM_CHECK"}
    environ.update(PYTHONWARNINGS="ignore", **env)
    return subprocess.run([sys.executable, "-m", "mm_handoff", "doctor"], capture_output=True, text=True, timeout=600,
                          env=environ)


def test_doctor_is_ready_in_a_healthy_vllm_environment():
    """vLLM in range, its hook point found in its files, the plugin entry point registered, the switch off
    (reported, not a failure); the engines that are not installed one line each; exit 0 (was: the TensorRT-LLM
    report alone, 'not ready', exit 1)."""
    r = doctor()
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "tensorrt_llm: not installed (skipped)" in out and "sglang: not installed (skipped)" in out
    vllm = out[out.index("vllm:"):out.index("sglang:")]
    assert "OUT OF RANGE" not in vllm and "(supported: vllm >= 0.32, < 0.34)" in vllm
    assert "plugin        vllm.general_plugins mm_handoff.vllm.plugin:register: registered" in vllm
    assert "switch        MM_HANDOFF_VLLM_CHECK: off  (set MM_HANDOFF_VLLM_CHECK=1" in vllm
    assert "[   found] vllm.model_executor.models.qwen3_vl:Qwen3VLMultiModalProcessor.apply" in vllm
    assert vllm.rstrip().endswith("ok")


def test_doctor_reads_the_switch():
    """On: said so, still ready. A value that does not parse: named, not ready."""
    r = doctor(MM_HANDOFF_VLLM_CHECK="1")
    assert r.returncode == 0 and "MM_HANDOFF_VLLM_CHECK: on  (vLLM's processes install the check)" in r.stdout
    r = doctor(MM_HANDOFF_VLLM_CHECK="ture")
    assert r.returncode in (1, 2) and "MM_HANDOFF_VLLM_CHECK: invalid" in r.stdout, r.stdout + r.stderr
