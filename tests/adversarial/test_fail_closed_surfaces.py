"""The surfaces around the accept step that a deployment reaches before any request: its settings, the
command line, the start-up launcher, the adapter plugins (issue 31).

One section per class of failure. Each case ends in a typed HandoffError (named field, at most 1,000
characters), or in the command line's one ``mm-handoff: error:`` line and exit 2, or in the correct
answer, within 100 MiB (``adversary``'s meter, whose clock is a hang guard).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
from unittest import mock

import attrs
import pytest
from adversary import HANG_CPU_SECONDS, MAX_BYTES, MAX_MESSAGE, answer
from hypothesis import given, settings
from hypothesis import strategies as st

from mm_handoff import HandoffLayout, Limits, _env, get_adapter
from mm_handoff.adapters.registry import AdapterRegistry
from mm_handoff.checks import accept_layout, validate
from mm_handoff.cli import main
from mm_handoff.reading import MAX_COUNT, limits_from_env, resolve_limits

QWEN = get_adapter("qwen3_vl")
LIMIT_NAMES = [f.name for f in attrs.fields(Limits)]
PREFIX = "mm-handoff: error: "


# ------------------------------------------------------------------ settings the CLI cannot survive (4)
def _digits(n: int) -> str:
    return "9" * n


#: what an environment variable can hold: no NUL; a surrogate only as the escape of an undecodable byte
ENV_CHARS = st.one_of(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                      st.sampled_from(["\udcff", "\udc80"]))
#: a limit's value: huge digit strings (past int()'s 4,300-digit bound too), the edges of [1, 2**62],
#: any number, malformed text
LIMIT_VALUES = st.one_of(
    st.sampled_from(["1", "0", "00", str(MAX_COUNT), str(MAX_COUNT + 1), str(2**63), "0" * 30 + "7",
                     _digits(19), _digits(20), _digits(4300), _digits(4301), _digits(5000), _digits(100_000),
                     "1_000", "+5", "-5", " 5 ", "\u00b2", "\u0663", "5e3", "0x10", "", "\udcff"]),
    st.integers(0, 2**70).map(str),
    st.integers(1, 120_000).map(_digits),
    st.text(ENV_CHARS, max_size=12),
)
LIMITS_SETTING = st.one_of(
    st.tuples(st.sampled_from(LIMIT_NAMES + ["max_nothing", ""]), LIMIT_VALUES).map(lambda kv: "=".join(kv)),
    st.lists(st.tuples(st.sampled_from(LIMIT_NAMES), LIMIT_VALUES).map(lambda kv: "=".join(kv)), max_size=6)
    .map(",".join),
    st.text(ENV_CHARS, max_size=40),
)
#: a switch's or the policy's value: the words, their near misses, huge and odd text
WORDS = st.one_of(
    st.sampled_from([*_env.TRUTHY, *_env.FALSY, " Yes ", "ture", "2", "raise", "rebuild", "fallback", "REBUILD",
                     " fallback ", "rebuidl", " ", "\udcff", "x" * 100_000, _digits(5000)]),
    st.text(ENV_CHARS, max_size=20),
)
SETTINGS = st.one_of(
    st.tuples(st.just(_env.LIMITS), LIMITS_SETTING),
    st.tuples(st.sampled_from([_env.POLICY, _env.AUTOINSTALL, _env.ALLOW_UNPROTECTED, _env.VLLM_CHECK]), WORDS),
)


def _expected_limits(text: str) -> Limits | None:
    """What ``MM_HANDOFF_LIMITS=text`` means, worked out here: the limits, or None when it is malformed."""
    text = text.strip()
    if not text:
        return Limits()
    values: dict = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or name not in LIMIT_NAMES or name in values or not (value.isascii() and value.isdigit()):
            return None
        if len(value.lstrip("0")) > 19 or not 1 <= int(value) <= MAX_COUNT:
            return None
        values[name] = int(value)
    return Limits(**values)


def _setting_ok(name: str, value: str) -> bool:
    if name == _env.LIMITS:
        return _expected_limits(value) is not None
    if name == _env.POLICY:
        return value == "" or value.strip().lower() in ("raise", "rebuild", "fallback")
    return value.strip().lower() in _env.TRUTHY + _env.FALSY


@contextlib.contextmanager
def _setting(name: str, value: str):
    """The process environment with only this one mm-handoff setting."""
    with mock.patch.dict(os.environ):
        for key in [k for k in os.environ if k.startswith("MM_HANDOFF_")]:
            del os.environ[key]
        os.environ[name] = value
        yield


def _metered(call):
    """``call()`` under the meter (memory bound, hang guard); whatever it raises propagates."""
    tracemalloc.start()
    t0 = time.process_time()
    try:
        return call()
    finally:
        seconds, peak = time.process_time() - t0, tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert seconds < HANG_CPU_SECONDS, f"{seconds:.2f} CPU s"
        assert peak < MAX_BYTES, f"{peak / 2**20:.0f} MiB"


@pytest.fixture(scope="module")
def layout_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("surfaces")
    (d / "ids.json").write_text("[1,2,3]")  # 7 bytes: any admitted max_payload_chars reads it in 7
    (d / "boot").mkdir()
    return d


def _cli(argv, stdin: bytes = b"[1,2,3]"):
    """``mm-handoff ARGV`` in this process: exit code, stdout, stderr, whether ``run`` would have exec'd."""
    out, err = io.StringIO(), io.StringIO()
    boot = os.path.join(_BOOT[0], "boot")  # where `run` writes its start-up hook (one folder, not one per case)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin))), \
            mock.patch("os.execvpe") as execvpe, mock.patch("tempfile.mkdtemp", return_value=boot):
        code = _metered(lambda: main(argv))
    return code, out.getvalue(), err.getvalue(), execvpe.called


#: the test's folder (set by the test that uses it)
_BOOT = [""]


def _one_error_line(err: str) -> bool:
    lines = err.splitlines()
    return len(lines) == 1 and lines[0].startswith(PREFIX) and len(lines[0]) <= len(PREFIX) + MAX_MESSAGE


@settings(max_examples=400)
@given(setting=SETTINGS, command=st.sampled_from(["inspect", "inspect -", "diff", "selfcheck", "doctor", "run"]))
def test_every_setting_through_every_command_is_one_error_line_or_works(layout_files, setting, command):
    """Huge, extreme and malformed values of every setting, through every command: exit 2 with one
    ``mm-handoff: error:`` line, or the command's own answer; never a traceback, never the limit allocated."""
    _BOOT[0] = str(layout_files)
    ids = str(layout_files / "ids.json")
    argv = {"inspect": ["inspect", ids], "inspect -": ["inspect", "-"], "diff": ["diff", ids, ids],
            "selfcheck": ["selfcheck"], "doctor": ["doctor"], "run": ["run", "--", "true"]}[command]
    name, value = setting
    ok = _setting_ok(name, value)
    with _setting(name, value):
        code, out, err, execd = _cli(argv)
    if code == 2:
        assert _one_error_line(err), err[:2000]
    else:
        assert PREFIX not in err and "Traceback" not in err, err[:2000]
    limits = _expected_limits(value) if name == _env.LIMITS else Limits()
    if command in ("inspect", "inspect -", "diff", "selfcheck"):  # they read the limits, nothing else
        if limits is None:
            assert code == 2 and _env.LIMITS in err
        elif all(getattr(limits, n) >= getattr(Limits(), n) for n in LIMIT_NAMES):  # admits what they read
            assert code == 0, err[:2000]
            assert command != "inspect" or "length 3" in out
    elif command == "doctor":  # the report, and the first bad setting as the error line
        assert (code == 2 and name in err) if not ok else code in (0, 1)
    else:  # run: every bad setting stops it before the command starts (the launcher sets the switch itself)
        allowed = name == _env.ALLOW_UNPROTECTED and ok
        if ok or name == _env.AUTOINSTALL or allowed:
            assert code == 0 and execd, err[:2000]
        else:
            assert code == 2 and not execd and name in err


@settings(max_examples=400)
@given(value=LIMITS_SETTING)
def test_every_limits_setting_reads_as_worked_out_or_is_typed(value):
    """``MM_HANDOFF_LIMITS`` of any size: the limits it says, or a typed error naming the variable."""
    result, exc = answer(lambda: limits_from_env({_env.LIMITS: value}))
    expected = _expected_limits(value)
    if expected is None:
        assert exc is not None and exc.field == _env.LIMITS and len(str(exc)) <= MAX_MESSAGE
    else:
        assert exc is None and result == expected


@settings(max_examples=200)
@given(value=LIMITS_SETTING)
def test_library_entry_points_are_typed_whatever_the_limits_setting(value):
    """Every entry point that reads the process limits: its answer, or a typed error (never an untyped
    ValueError from a value int() cannot read)."""
    wire = QWEN.derive_layout([1, 2, 3], mrope=False, limits=Limits()).to_wire()
    calls = [lambda: resolve_limits(None),
             lambda: HandoffLayout([1, 2, 3], (), QWEN.spec, family="qwen3_vl", convention=QWEN.convention),
             lambda: QWEN.derive_layout([1, 2, 3], mrope=False),
             lambda: HandoffLayout.from_wire(wire),
             lambda: validate(HandoffLayout.from_wire(wire, limits=Limits()), QWEN, prompt_token_ids=[1, 2, 3]),
             lambda: accept_layout(wire, QWEN, prompt_token_ids=[1, 2, 3])]
    with _setting(_env.LIMITS, value):
        for call in calls:
            result, exc = answer(call)
            if exc is not None:
                assert len(str(exc)) <= MAX_MESSAGE and exc.field
                assert _expected_limits(value) is None or exc.field != _env.LIMITS
            else:
                assert _expected_limits(value) is not None


def _cli_process(*args, env=None, stdin=None):
    full = {k: v for k, v in os.environ.items() if not k.startswith("MM_HANDOFF_")}
    full.update(env or {}, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "mm_handoff", *args], capture_output=True, text=True, env=full,
                          input=stdin, timeout=120)


@pytest.mark.parametrize("args", [("inspect", "{ids}"), ("inspect", "-"), ("diff", "{ids}", "{ids}"), ("selfcheck",),
                                  ("doctor",), ("run", "--", "true")])
def test_the_reported_settings_end_in_one_line_in_a_real_process(layout_files, args):
    """The issue's cases in the real command: a 5,000-digit limit (was: AttributeError / ValueError
    tracebacks, exit 1) is one line and exit 2; ``max_payload_chars=2**62`` reads the 7-byte file (was:
    MemoryError, the limit allocated up front)."""
    args = [a.format(ids=layout_files / "ids.json") for a in args]
    huge = _cli_process(*args, env={_env.LIMITS: "max_prompt_len=" + _digits(5000)}, stdin="[1,2,3]")
    assert huge.returncode == 2 and _one_error_line(huge.stderr) and _env.LIMITS in huge.stderr, huge.stderr[-2000:]
    if args[0] in ("inspect", "diff", "selfcheck"):
        extreme = _cli_process(*args, env={_env.LIMITS: f"max_payload_chars={2**62}"}, stdin="[1,2,3]")
        assert extreme.returncode == 0 and extreme.stderr == "", extreme.stderr[-2000:]


# --------------------------------------------------------- the start-up hook cannot be skipped (5)
#: CPython's flags that take no argument, and the ones among them that skip PYTHONPATH or site
FLAGS = "bBdEiIOPqRsSuvx"
SKIPPING = "EIS"
#: what -X / -W / --check-hash-based-pycs may be given: values that look like options too
OPTION_VALUES = st.sampled_from(["dev", "utf8", "faulthandler", "importtime", "I", "E", "S", "-I", "-E", "-S",
                                 "ignore", "default", "error::DeprecationWarning", "-", "--", "-c", "x=I"])


@st.composite
def interpreter_options(draw, flags=FLAGS, values=OPTION_VALUES, program=True, helps=True):
    """``(argv after the interpreter, whether an option skips the hook)``: flags and options with an argument in
    any order, combined into clusters (``-BIs``, ``-BW ignore``, ``-BWignore``), each argument attached or
    separate, then the program (``-c``/``-m`` attached or not, a script, ``-``, ``--``, or nothing) and its own
    arguments, which may look like options."""
    units = draw(st.lists(st.one_of(st.sampled_from(flags).map(lambda f: ("flag", f)),
                                    st.tuples(st.sampled_from(["X", "W"]), values).map(lambda u: ("arg", *u)),
                                    st.sampled_from(["default", "always", "never"]).map(lambda v: ("long", v)),
                                    st.sampled_from(["--help-env", "--help-xoptions"] if helps else ["-u"])
                                    .map(lambda v: ("bare", v))),
                          max_size=8))
    argv: list = []
    cluster = ""  # flags waiting to be written as one argument
    skipping = False
    for unit in units:
        if unit[0] == "flag":
            skipping |= unit[1] in SKIPPING
            if cluster and draw(st.booleans()):
                cluster += unit[1]
            else:
                argv += [cluster] if cluster else []
                cluster = "-" + unit[1]
            continue
        head = cluster if cluster and draw(st.booleans()) else None  # the option joins the open cluster
        if head is None and cluster:
            argv.append(cluster)
        cluster = ""
        if unit[0] == "arg":
            option = (head or "-") + unit[1]
            argv += [option + unit[2]] if draw(st.booleans()) else [option, unit[2]]
        else:
            argv += ([head] if head else []) + (["--check-hash-based-pycs", unit[1]] if unit[0] == "long"
                                                else [unit[1]])
    argv += [cluster] if cluster else []
    if program:
        rest = draw(st.lists(st.sampled_from(["-I", "-E", "-S", "-X", "dev", "x"]), max_size=3))
        start = draw(st.sampled_from(["-c", "-m", "script", "-", "--", "none"]))
        if start in ("-c", "-m"):
            value = "pass" if start == "-c" else "json.tool"
            argv += [start + value] if draw(st.booleans()) else [start, value]
            argv += rest
        elif start == "script":
            argv += ["serve.py", *rest]
        elif start in ("-", "--"):
            argv += [start, *(["serve.py"] if start == "--" else []), *rest]
    return argv, skipping


def _run(command):
    """``mm-handoff run -- COMMAND`` in this process: exit code, stderr, whether the command was exec'd."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), mock.patch("os.execvpe") as execvpe, \
            mock.patch("tempfile.mkdtemp", return_value=_BOOT[0]):
        code = main(["run", "--", *command])
    return code, err.getvalue(), execvpe.called


@settings(max_examples=2000)
@given(case=interpreter_options(), python=st.sampled_from(["python", "python3", "/usr/bin/python3.11", "python3.13t"]))
def test_every_order_of_interpreter_options_that_skips_the_hook_is_refused(tmp_path_factory, case, python):
    """``-E``/``-I``/``-S`` anywhere among the interpreter's options, however combined or ordered around ``-X``,
    ``-W`` and ``--check-hash-based-pycs``, is refused (one line, exit 2, nothing run); an option's or the
    program's argument that looks like one is not read as one."""
    if not _BOOT[0]:
        _BOOT[0] = str(tmp_path_factory.mktemp("boot"))
    argv, skipping = case
    code, err, execd = _run([python, *argv])
    if skipping:
        assert code == 2 and not execd and _one_error_line(err) and "start-up hook" in err, (argv, err)
    else:
        assert code == 0 and execd and err == "", (argv, err)


@pytest.mark.parametrize("argv", [["-X", "dev", "-I"], ["-W", "ignore", "-I"], ["-IX", "dev"], ["-Xdev", "-E"],
                                  ["-BIs"], ["-bS"], ["--check-hash-based-pycs", "always", "-S"], ["-X", "dev", "-BE"],
                                  ["-Wignore", "-X", "utf8", "-s", "-I"], ["-u", "-IS", "-c", "pass"]])
def test_the_reported_orders_are_refused(tmp_path, argv):
    """The issue's command lines (the old scan stopped at the first -X / -W and let them serve unhooked)."""
    _BOOT[0] = str(tmp_path)
    code, err, execd = _run(["python", *argv, "serve.py"])
    assert code == 2 and not execd and _one_error_line(err)


@settings(max_examples=150)
@given(case=interpreter_options(flags="bBEIOPqRsSu", values=st.sampled_from(
    ["dev", "utf8", "I", "E", "S", "-I", "-E", "-S", "ignore", "default", "-", "--", "-c"]), program=False,
    helps=False))
def test_the_refusal_is_what_cpython_itself_reads(tmp_path_factory, case):
    """The oracle: this interpreter, given the same options, reports -I / -E / -S in ``sys.flags`` exactly when
    ``mm-handoff run`` refuses the command line (the ``--help-*`` options are left out: they print and exit, so
    the probe would not run; the launcher refuses them with -I all the same, and nothing serves)."""
    if not _BOOT[0]:
        _BOOT[0] = str(tmp_path_factory.mktemp("boot"))
    argv, _ = case
    probe = "import sys; f = sys.flags; print(int(bool(f.isolated or f.ignore_environment or f.no_site)))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, *argv, "-c", probe], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0, (argv, done.stderr[-500:])
    code, err, execd = _run([sys.executable, *argv, "-c", probe])
    assert (code == 2) == (done.stdout.split()[-1] == "1"), (argv, err)


# ------------------------------------------------- a third-party plugin cannot break every lookup (6)
class _Unprintable(BaseException):
    def __str__(self):
        raise RuntimeError("no text")


class _Custom(BaseException):
    pass


#: every kind of failure but KeyboardInterrupt: SystemExit (argparse at import time), GeneratorExit, a
#: BaseException of the plugin's own, exceptions (one whose message is huge, one whose str() raises)
FAILURES = st.sampled_from([lambda: SystemExit(2), lambda: SystemExit("usage: plugin [-h]"), lambda: SystemExit(None),
                            GeneratorExit, _Custom, _Unprintable, lambda: RuntimeError("x" * 100_000),
                            lambda: ImportError("no module named torch"), RecursionError, MemoryError,
                            lambda: AttributeError("register")])


class _EntryPoint:
    def __init__(self, name, hook=None, failure=None):
        self.name, self.value = name, f"plugin_{name}:register"
        self._hook, self._failure = hook, failure

    def load(self):
        if self._failure is not None:  # the import itself fails
            raise self._failure()
        return self._hook


def _plugin(name, failure=None, *, partial=False):
    """A plugin registering family ``name``; with ``failure``, it fails after registering (``partial``) or first."""
    def register(registry):
        if failure is None or partial:
            registry.register(name, lambda **kw: get_adapter("qwen3_vl"))
        if failure is not None:
            raise failure()
    return register


@st.composite
def plugin_sets(draw):
    """Good and failing plugins in any order: ``(entry points, good names, failing names)``."""
    eps, good, bad = [], [], []
    for k in range(draw(st.integers(1, 6))):
        name = f"fam{k}"
        failure = draw(st.none() | FAILURES)
        if failure is None:
            eps.append(_EntryPoint(name, _plugin(name)))
            good.append(name)
        elif draw(st.booleans()):  # at import time (ep.load())
            eps.append(_EntryPoint(name, failure=failure))
            bad.append(name)
        else:
            eps.append(_EntryPoint(name, _plugin(name, failure, partial=draw(st.booleans()))))
            bad.append(name)
    return eps, good, bad


def _registry_with(eps):
    import importlib.metadata

    with mock.patch.object(importlib.metadata, "entry_points", lambda group=None: list(eps)):
        reg = AdapterRegistry()
        reg.families()  # the first lookup loads the group
    return reg


@settings(max_examples=300)
@given(case=plugin_sets())
def test_a_plugin_that_fails_in_any_way_is_skipped_rolled_back_and_named(case):
    """Any BaseException but KeyboardInterrupt, at import or while registering: the lookups work, nothing of
    that plugin stays, a warning names it, every plugin after it loads."""
    eps, good, bad = case
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logger = logging.getLogger("mm_handoff")
    logger.addHandler(handler)
    try:
        reg = _metered(lambda: _registry_with(eps))
    finally:
        logger.removeHandler(handler)
    families = reg.families()
    assert set(good) <= set(families) and not set(bad) & set(families)
    assert type(reg.get("qwen3_vl")).__name__ == "Qwen3VLAdapter"
    for name in bad:
        assert f"adapter entry point {name!r} skipped" in log.getvalue()
    assert all(len(line) <= 1000 for line in log.getvalue().splitlines())


def test_a_keyboard_interrupt_propagates_rolled_back_and_the_rest_load_at_the_next_lookup():
    interrupted = []

    def interrupt_once(registry):
        registry.register("half", lambda **kw: get_adapter("qwen3_vl"))
        if not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt
    import importlib.metadata

    eps = [_EntryPoint("first", _plugin("first")), _EntryPoint("ctrl_c", interrupt_once),
           _EntryPoint("last", _plugin("last"))]
    with mock.patch.object(importlib.metadata, "entry_points", lambda group=None: list(eps)):
        reg = AdapterRegistry()
        with pytest.raises(KeyboardInterrupt):
            reg.families()
        assert "half" not in reg._by_name and "last" not in reg._by_name  # rolled back; not reached yet
        assert {"first", "half", "last"} <= set(reg.families())  # the next lookup goes on where it stopped


def test_an_argparse_plugin_in_a_real_process_is_skipped(tmp_path):
    """The issue's case: an installed plugin whose import runs argparse (SystemExit) before a good one."""
    (tmp_path / "cli_plugin.py").write_text(textwrap.dedent("""
        import argparse
        from mm_handoff import get_adapter
        argparse.ArgumentParser(prog="cli_plugin").parse_args(["--not-an-option"])
        def register(registry):
            registry.register("from_cli_plugin", lambda **kw: get_adapter("qwen3_vl"))
    """))
    (tmp_path / "good_plugin.py").write_text(textwrap.dedent("""
        from mm_handoff import get_adapter
        def register(registry):
            registry.register("from_good_plugin", lambda **kw: get_adapter("qwen3_vl"))
    """))
    for dist, module in (("a_cli_plugin-1.0", "cli_plugin"), ("b_good_plugin-1.0", "good_plugin")):
        info = tmp_path / f"{dist}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.split('-')[0]}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[mm_handoff.adapters]\n{module} = {module}:register\n")
    code = ("import mm_handoff; print(mm_handoff.get_adapter('qwen3_vl').family); "
            "print(sorted(f for f in mm_handoff.adapters.registry.REGISTRY.families() if f.startswith('from_')))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MM_HANDOFF_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["qwen3_vl", "['from_good_plugin']"]
    assert "'cli_plugin' skipped" in done.stderr and "SystemExit: 2" in done.stderr


@pytest.mark.parametrize("command", [
    ["env", "python", "-I", "serve.py"], ["env", "FOO=1", "python3", "-X", "dev", "-E", "serve.py"],
    ["mpirun", "-np", "4", "python", "-BIs", "serve.py"], ["nohup", "/usr/bin/python3.11", "-S", "serve.py"],
    ["env", "-i", "python", "serve.py"], ["env", "--ignore-environment", "python3", "serve.py"],
    ["env", "-u", "PYTHONPATH", "python", "serve.py"], ["env", "--unset=MM_HANDOFF_AUTOINSTALL", "python", "serve.py"],
    ["env", "-uPYTHONPATH", "python", "serve.py"], ["env", "-", "python", "serve.py"],
])
def test_a_wrapper_does_not_hide_an_interpreter_that_skips_the_hook(tmp_path, command):
    """``env``, ``mpirun`` or ``nohup`` before the interpreter: its options are read all the same, and an ``env``
    that drops the environment the hook starts from (``-i``, ``-u PYTHONPATH``) is refused too."""
    _BOOT[0] = str(tmp_path)
    code, err, execd = _run(command)
    assert code == 2 and not execd and _one_error_line(err) and "start-up hook" in err, (command, err)


@pytest.mark.parametrize("command", [
    ["env", "FOO=1", "python", "serve.py"], ["mpirun", "-np", "4", "python3", "-u", "serve.py", "-I"],
    ["env", "-u", "OTHER", "python", "serve.py"], ["trtllm-serve", "serve", "model"],
    ["python", "python_tool.py", "-I"],
])
def test_a_wrapper_that_keeps_the_hook_runs(tmp_path, command):
    _BOOT[0] = str(tmp_path)
    code, err, execd = _run(command)
    assert code == 0 and execd and err == "", (command, err)
