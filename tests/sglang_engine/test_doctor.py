"""``mm-handoff doctor`` in a healthy SGLang environment (``.venv-sglang``): the SGLang report, exit 0; nothing
is patched and no server starts."""

import os
import subprocess
import sys

HOOKS = ("sglang.srt.multimodal.processors.qwen_vl:QwenVLImageProcessor.get_validated_mm_data",
         "sglang.srt.disaggregation.encoder.receiver:MMReceiverBase.recv_mm_data")


def test_doctor_is_ready_in_a_healthy_sglang_environment():
    """SGLang in range, both hook points found in its files, not installed in the doctor's process; the
    engines that are not installed one line each; exit 0."""
    r = subprocess.run([sys.executable, "-m", "mm_handoff", "doctor"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "tensorrt_llm: not installed (skipped)" in out and "vllm: not installed (skipped)" in out
    sglang = out[out.index("sglang:"):].splitlines()
    assert sglang[1] == "sglang        0.5.23  (supported: sglang >= 0.5.23, < 0.5.24)"
    assert sglang[2].startswith("installed     False  (policy=raise")
    assert sglang[3:] == [f"  [   found] {hook}" for hook in HOOKS] + ["ok"]


def test_doctor_reports_a_hook_point_that_is_gone(tmp_path):
    """A hook point's class without its method (SGLang's file changed): missing, with the reason; exit 1."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sglang.srt.disaggregation.encoder.receiver as r\n"
        "del r.MMReceiverBase.recv_mm_data\n")
    env = {**os.environ, "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "mm_handoff", "doctor"], capture_output=True, text=True, timeout=600,
                       env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"  [ missing] {HOOKS[1]}" in r.stdout
    assert "sglang.srt.disaggregation.encoder.receiver:MMReceiverBase has no recv_mm_data" in r.stdout
    assert r.stdout.rstrip().endswith("not ready: see above")
