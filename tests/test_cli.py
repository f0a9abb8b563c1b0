"""The command line: the demo (the README's main job), inspect, diff, selfcheck, and clean failures."""

import json
import os
import subprocess
import sys

import pytest

RAW = [151644, 872, 198, 151652, 151656, 151653, 74785, 419, 2766, 13, 151645, 198, 151644, 77091, 198]


def cli(*args, stdin=None, timeout=300):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "mm_handoff", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from mm_handoff import get_adapter

    d = tmp_path_factory.mktemp("cli")
    a = get_adapter("qwen3_vl")
    grid = [[4, 4, 6]]
    meta = {"fps": 24.0, "frames_indices": list(range(8)), "total_num_frames": 8}
    agg = a.rebuild_token_ids(RAW, video_grid_thw=grid, video_metadata=[meta]).tolist()
    stock = a.stock_token_ids(RAW, video_grid_thw=grid).tolist()
    (d / "agg.json").write_text(json.dumps({"token_ids": agg, "video_grid_thw": grid}))
    (d / "stock.json").write_text(json.dumps({"token_ids": stock, "video_grid_thw": grid}))
    (d / "wire.json").write_text(json.dumps(a.derive_layout(agg, video_grid_thw=grid, mrope=False).to_wire()))
    (d / "wire_delta.json").write_text(json.dumps(a.derive_layout(agg, video_grid_thw=grid).to_wire()))
    (d / "bad.json").write_text("{not json")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "bin.json").write_bytes(b"\xff\xfe\x00")
    return d


def test_demo_shows_bug_and_fix():
    """The default demo: E/PD fixed equals aggregated bitwise; the stock path is caught."""
    r = cli("demo", "--json", "--frames", "8", "--height", "64", "--width", "96")
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["hidden_bitwise_equal"] == {"epd": True, "epd-rebuild": True, "epd-stock": False}
    assert report["tokens_equal"]["epd"] and report["stock_error"]["type"] == "MropeLengthError"
    assert report["lengths"]["aggregated"] - report["lengths"]["epd-stock"] == 4 * 8  # 4 groups x (6 ts + 2 markers)
    assert "aggregated: processor" in r.stderr  # progress is shown


def test_demo_table_output():
    r = cli("demo", "--frames", "4", "--height", "64", "--width", "64", "--family", "qwen3_5")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "E/PD fixed (mm-handoff)" in r.stdout and "result: FIXED" in r.stdout
    assert "first differing prompt index: 4" in r.stdout


@pytest.mark.slow
def test_demo_720p_reports_the_bug_report_sizes():
    """On the 40-frame 720p clip: 12,054 aggregated ids vs 11,894 stock under transformers 5.23."""
    r = cli("demo", "--720p", "--json", timeout=600)
    report = json.loads(r.stdout)
    assert report["lengths"]["aggregated"] == 12054 and report["lengths"]["epd-stock"] == 11894
    assert report["hidden_bitwise_equal"]["epd"]


def test_inspect_and_diff(files):
    r = cli("inspect", str(files / "agg.json"))
    assert r.returncode == 0 and "runs [11,17) [25,31) [39,45) [53,59)" in r.stdout
    assert "timestamps 0.0 0.1 0.2 0.3" in r.stdout
    j = json.loads(cli("inspect", str(files / "wire.json"), "--json").stdout)
    assert j["length"] == 70 and j["trtllm"]["multimodal_run_lengths"] == [6, 6, 6, 6]
    r = cli("inspect", "-", "--video-grid-thw", "[[4,4,6]]",
            stdin=json.dumps(json.loads((files / "stock.json").read_text())["token_ids"]))
    assert r.returncode == 0 and "runs [4,28)" in r.stdout and "timestamps -" in r.stdout
    r = cli("diff", str(files / "agg.json"), str(files / "stock.json"))
    assert r.returncode == 1 and "first difference at index 4" in r.stdout
    r = cli("diff", str(files / "wire.json"), str(files / "wire_delta.json"))
    assert r.returncode == 1 and "mrope_position_delta: None vs -12" in r.stdout


def test_the_dict_form_and_the_wire_form_of_one_layout_are_one_layout(files):
    """The ids + grids form carries the delta its ids give, as the encoder's wire form does: diff finds them
    equal and inspect prints one fingerprint for both."""
    r = cli("diff", str(files / "agg.json"), str(files / "wire_delta.json"))
    assert r.returncode == 0 and "layouts are equal" in r.stdout, r.stdout + r.stderr
    prints = [json.loads(cli("inspect", str(files / f), "--json").stdout)["fingerprint"]
              for f in ("agg.json", "wire_delta.json")]
    assert prints[0] == prints[1]
    r = cli("diff", str(files / "agg.json"), str(files / "wire.json"))  # a wire form that carries no delta
    assert r.returncode == 1 and "mrope_position_delta: -12 vs None" in r.stdout


def test_ids_with_pads_and_no_grid_say_where_the_grid_goes(files):
    ids_only = files / "ids_only.json"
    ids_only.write_text(json.dumps(json.loads((files / "agg.json").read_text())["token_ids"]))
    r = cli("inspect", str(ids_only))
    assert r.returncode == 2 and "--video-grid-thw" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, needle", [
    (("inspect", "{d}/bad.json"), "not valid JSON"),
    (("inspect", "{d}/bin.json"), "not UTF-8"),
    (("inspect", "{d}/missing.json"), "cannot read"),
    (("inspect", "{d}/agg.json", "--video-grid-thw", "[[4,4,8]]"), "video pads"),
    (("inspect", "{d}/agg.json", "--video-grid-thw", "nope"), "must be JSON"),
    (("diff", "{d}/agg.json", "{d}/bad.json"), "not valid JSON"),
    (("inspect", "{d}/deep.json"), "JSON objects and lists"),  # (counted before it could nest too deeply)
])
def test_bad_input_is_one_line_and_exit_2(files, args, needle):
    r = cli(*[a.format(d=files) for a in args])
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1



def doctor_sections(out: str) -> dict:
    """The doctor's report per engine: the line that names it, and the lines under it."""
    sections: dict = {}
    current = None
    for line in out.splitlines():
        head = line.split(":")[0]
        if head in ("tensorrt_llm", "vllm", "sglang", "metrics"):
            current = head
            sections[current] = [line]
        elif current and line:
            sections[current].append(line)
    return sections


def test_doctor_without_an_engine_reports_each_as_not_installed_and_exits_zero():
    """The project's venv has no engine: one line each, and nothing installed is nothing failing (was: the
    TensorRT-LLM report alone, 'not importable', exit 1)."""
    r = cli("doctor")
    sections = doctor_sections(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {k: v for k, v in sections.items() if k != "metrics"} == {
        name: [f"{name}: not installed (skipped)"] for name in ("tensorrt_llm", "vllm", "sglang")}


def test_doctor_fails_for_an_installed_engine_that_is_not_ready(tmp_path):
    """An SGLang outside the range, without the hook points' modules: its report says so, exit 1; the engines
    that are not installed stay one line each."""
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text("__version__ = '0.6.0'\n")
    env = dict(os.environ, PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "mm_handoff", "doctor"], capture_output=True, text=True, timeout=300,
                       env=env)
    sections = doctor_sections(r.stdout)
    assert r.returncode == 1, r.stdout + r.stderr
    assert sections["vllm"] == ["vllm: not installed (skipped)"]
    sglang = "\n".join(sections["sglang"])
    assert "sglang        0.6.0  (supported: sglang >= 0.5.23, < 0.5.24  -> OUT OF RANGE)" in sglang
    assert "[ missing] sglang.srt.multimodal.processors.qwen_vl:QwenVLImageProcessor.get_validated_mm_data" in sglang
    assert sections["sglang"][-1] == "not ready: see above"

def test_doctor_reads_the_figures_every_process_wrote_in_multiprocess_mode(tmp_path):
    """With PROMETHEUS_MULTIPROC_DIR (the engines' multiprocess mode), doctor prints mm-handoff's counters summed
    over the processes that wrote there: two processes, one accepted and one refused each."""
    pytest.importorskip("prometheus_client")
    env = dict(os.environ, PYTHONWARNINGS="ignore", PROMETHEUS_MULTIPROC_DIR=str(tmp_path), MM_HANDOFF_METRICS="1")
    record = ("from mm_handoff.glue.signals import SIGNALS\n"
              "from mm_handoff.errors import TokenMismatchError\n"
              "SIGNALS.record('sglang', 'admission', 'qwen3_vl', 'accepted', 1e-5)\n"
              "SIGNALS.record('sglang', 'admission', 'qwen3_vl', 'refused', 1e-5,\n"
              "               TokenMismatchError('f', 1, 2, index=0))\n")
    for _ in range(2):  # each process exits: what it recorded is in the files then
        subprocess.run([sys.executable, "-c", record], env=env, check=True, timeout=120)
    r = subprocess.run([sys.executable, "-m", "mm_handoff", "doctor"], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    metrics = "\n".join(doctor_sections(r.stdout)["metrics"])
    assert "prometheus_client installed; on" in metrics and f"PROMETHEUS_MULTIPROC_DIR {tmp_path}: 3 series" in metrics
    for series in ("mm_handoff_checks_total{check_point=admission,engine=sglang,family=qwen3_vl,outcome=accepted} 2",
                   "mm_handoff_checks_total{check_point=admission,engine=sglang,family=qwen3_vl,outcome=refused} 2",
                   "mm_handoff_refusals_total{check_point=admission,engine=sglang,error=TokenMismatchError} 2"):
        assert series in metrics, metrics


def test_doctor_says_where_the_figures_are_without_a_shared_directory():
    env = dict(os.environ, PYTHONWARNINGS="ignore", MM_HANDOFF_METRICS="0")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    r = subprocess.run([sys.executable, "-m", "mm_handoff", "doctor"], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert doctor_sections(r.stdout)["metrics"][0].endswith("off (figures in process only: mm_handoff.stats())")


def test_selfcheck():
    r = cli("selfcheck")
    assert r.returncode == 0 and "+160" in r.stdout and "caught" in r.stdout


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
        ["token_ids", "family", "video_grid_thw", "image_grid_thw", "format", "x"]), inner, max_size=4)),
    max_leaves=10,
)


@settings(max_examples=300)
@given(st.one_of(st.binary(max_size=60), JSONISH.map(lambda v: json.dumps(v).encode())))
def test_cli_fuzz_inspect_never_tracebacks(content):
    """Any file content: exit 0 with a layout, or exit 2 with one 'mm-handoff: error:' line."""
    import contextlib
    import io
    import tempfile

    from mm_handoff.cli import main

    with tempfile.NamedTemporaryFile(suffix=".json") as fh:
        fh.write(content)
        fh.flush()
        out_buf, err_buf = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
            code = main(["inspect", fh.name])
    out, err = out_buf.getvalue(), err_buf.getvalue()
    assert code in (0, 2)
    if code == 2:
        assert err.startswith("mm-handoff: error: ") and len(err.strip().splitlines()) == 1
    else:
        assert out.startswith("family ")


def _one_line_error(r, *words):
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout[:200], r.stderr[-500:])
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("mm-handoff: error: "), r.stderr[-500:]
    assert all(w in r.stderr for w in words), r.stderr


@pytest.mark.parametrize("command", ["inspect", "diff"])
def test_every_path_that_is_no_regular_file_is_refused_unread(tmp_path, command):
    """Devices that never end (/dev/zero, /dev/urandom), a FIFO with no writer (it would block), a directory:
    one line, exit 2, at once (the timeout is the hang the reader must not have)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "character device"), ("/dev/urandom", "character device"),
                       (str(fifo), "FIFO"), (str(tmp_path), "")):
        args = [path] if command == "inspect" else [path, path]
        _one_line_error(cli(command, *args, timeout=120), path, kind)


def test_input_beyond_the_payload_limit_is_refused_not_cut(tmp_path):
    """A file over the limit is refused from its size, unread; stdin stops one byte past the limit."""
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(17 << 20)
    _one_line_error(cli("inspect", str(big)), "max_payload_chars")
    env = dict(os.environ, PYTHONWARNINGS="ignore", MM_HANDOFF_LIMITS="max_payload_chars=64")
    r = subprocess.run([sys.executable, "-m", "mm_handoff", "inspect", "-"], input=json.dumps(RAW + RAW + RAW),
                       capture_output=True, text=True, timeout=60, env=env)
    _one_line_error(r, "more than 64 bytes")
    with open("/dev/zero", "rb") as zero:
        r = subprocess.run([sys.executable, "-m", "mm_handoff", "inspect", "-"], stdin=zero, capture_output=True,
                           text=True, timeout=60, env=env)
    _one_line_error(r, "more than 64 bytes")


def test_json_of_many_small_values_is_refused_before_it_is_parsed(tmp_path):
    """Within the size limit, millions of lists or values: counted in one scan, refused before json.loads."""
    lists = tmp_path / "lists.json"
    lists.write_text("[" + ",".join(["[]"] * 2_000_000) + "]")
    _one_line_error(cli("inspect", str(lists), timeout=60), "JSON objects and lists")
    numbers = tmp_path / "numbers.json"
    numbers.write_text("[" + ",".join(["1e5"] * 3_000_000) + "]")
    _one_line_error(cli("inspect", str(numbers), timeout=60), "JSON values")


def test_no_standard_input_is_one_line():
    r = subprocess.run([sys.executable, "-m", "mm_handoff", "inspect", "-"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"), close_fds=True)
    assert r.returncode == 2  # empty input: not JSON
    closed = subprocess.run(f"{sys.executable} -m mm_handoff inspect - <&-", shell=True, capture_output=True,
                            text=True, timeout=60, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    _one_line_error(closed, "no standard input")
