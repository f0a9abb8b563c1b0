"""The start-up hook fails closed: a process that asked for the fix never serves without it.

Real interpreters, started the three ways a deployment starts them: through ``mm-handoff run --``, with
the generated ``sitecustomize`` on the path (what every child of the launcher runs), and with the
documented ``.pth`` line. The probe is the stand-in's spawned worker fed a request whose mRoPE ids (16)
are longer than its prompt (10): a worker with the fix refuses it, a stock worker cuts it silently.
"""

import json
import os
import subprocess
import sys

import pytest
from trtllm_helpers import PROBE, STAND_IN_DIR, run_python

from mm_handoff import _env
from mm_handoff.trtllm._launcher import prepare_environment
from mm_handoff.trtllm._startup import EXIT_CODE, PTH_LINE

#: one mistyped value per setting a serving process reads (the launcher sets AUTOINSTALL itself)
BAD_SETTINGS = [
    (_env.POLICY, "rebuidl"),
    (_env.LIMITS, "max_runs=0"),
    (_env.LIMITS, "max_prompt_len=lots"),
    (_env.LIMITS, "max_frames"),
    (_env.VLLM_CHECK, "2"),
    (_env.ALLOW_UNPROTECTED, "maybe"),
]


def _hooked_env(tmp_path, **settings):
    """The environment ``mm-handoff run`` gives its command (its sitecustomize first on the path)."""
    env = prepare_environment({})
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(STAND_IN_DIR)])
    return {"PYTHONPATH": env["PYTHONPATH"], _env.AUTOINSTALL: "1", **settings}


def _stopped(proc, name):
    """Stopped before serving: nothing on stdout, one stderr line naming the setting."""
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mm-handoff: error: ") and name in lines[0], proc.stderr


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS)
def test_the_launcher_refuses_to_start_a_command_on_a_bad_setting(name, value):
    proc = run_python(PROBE, launcher=True, env={name: value})
    assert proc.returncode == 2
    _stopped(proc, name)


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS)
def test_every_hooked_interpreter_stops_at_start_on_a_bad_setting(tmp_path, name, value):
    """What the launcher's children run (the server, spawned and MPI workers): exit 78 before any request."""
    proc = run_python(PROBE, env=_hooked_env(tmp_path, **{name: value}))
    assert proc.returncode == EXIT_CODE
    _stopped(proc, name)


@pytest.mark.parametrize(("name", "value"), [*BAD_SETTINGS, (_env.AUTOINSTALL, "ture")])
def test_the_pth_line_stops_the_interpreter_on_a_bad_setting(tmp_path, name, value):
    (tmp_path / "mm_handoff_autoinstall.pth").write_text(PTH_LINE + "\n")
    code = f"import site; site.addsitedir({str(tmp_path)!r}); print('started')"
    env = {_env.AUTOINSTALL: "1", name: value} if name != _env.AUTOINSTALL else {name: value}
    proc = run_python(code, env=env, stand_in=False)
    assert proc.returncode == EXIT_CODE
    _stopped(proc, name)


def test_the_explicit_opt_out_serves_unprotected_and_says_so(tmp_path):
    """With MM_HANDOFF_ALLOW_UNPROTECTED=1 a bad setting is a warning and the worker is stock: the silent
    cut of #20138 is back, which is what the opt-out means (it is never the default)."""
    proc = run_python(PROBE, env=_hooked_env(tmp_path, **{_env.POLICY: "rebuidl", _env.ALLOW_UNPROTECTED: "1"}))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["installed"] is False and report["worker"].startswith("stock: pid")
    assert "serving WITHOUT the fix" in proc.stderr and _env.POLICY in proc.stderr


def test_a_good_setting_is_installed_in_the_worker(tmp_path):
    """The same hook with settings that parse: the parent is patched and the worker refuses the request."""
    proc = run_python(PROBE, env=_hooked_env(tmp_path, **{_env.POLICY: " Raise ", _env.LIMITS: "max_runs=32768"}))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["installed"] and "mrope_position_ids.shape[-1]: expected 'prompt length 10', got 16" in \
        report["worker"]


def test_an_interpreter_without_mm_handoff_may_not_import_tensorrt_llm(tmp_path):
    """A child that inherited the launcher's environment but cannot import mm_handoff (another venv, a broken
    install): other Python tools run on; an import of TensorRT-LLM there would be unprotected, so it stops."""
    shadow = tmp_path / "shadow" / "mm_handoff"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('a broken mm_handoff install')\n")
    env = _hooked_env(tmp_path)
    boot = env["PYTHONPATH"].split(os.pathsep)[0]  # the generated sitecustomize, then the shadow, then the engine
    env["PYTHONPATH"] = os.pathsep.join([boot, str(shadow.parent), str(STAND_IN_DIR)])
    tool = run_python("print('a tool ran')", env=env)
    assert tool.returncode == 0 and tool.stdout.strip() == "a tool ran", tool.stderr
    engine = run_python("import tensorrt_llm; print('served')", env=env)
    assert engine.returncode == EXIT_CODE
    _stopped(engine, "mm_handoff does not import")


def test_import_never_fails_on_a_setting_and_each_use_names_it():
    """Every setting garbage at once: ``import mm_handoff`` works; what reads a bad setting raises the typed
    error naming it (a request, a CLI command), and the CLI prints it as one line with exit 2."""
    garbage = {_env.POLICY: "rebuidl", _env.LIMITS: "max_runs=0", _env.VLLM_CHECK: "2", _env.AUTOINSTALL: "0",
               _env.ALLOW_UNPROTECTED: "maybe", _env.BLOCK_ADAPTERS: ",,,"}
    code = ("import json, mm_handoff\n"
            "out = {}\n"
            "for name, call in (('limits', lambda: mm_handoff.get_adapter('qwen3_vl').derive_layout([1, 2])),\n"
            "                   ('policy', lambda: mm_handoff.glue.policy.resolve_policy())):\n"
            "    try:\n"
            "        call(); out[name] = 'no error'\n"
            "    except mm_handoff.HandoffError as exc:\n"
            "        out[name] = exc.field\n"
            "print(json.dumps(out))\n")
    proc = run_python("import mm_handoff.glue.policy\n" + code, env=garbage, stand_in=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"limits": _env.LIMITS, "policy": _env.POLICY}
    cli = run_python("import sys; from mm_handoff.cli import main; sys.exit(main(['inspect', '-']))",
                     env=garbage, stand_in=False)
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1 and _env.LIMITS in cli.stderr, cli.stderr


@pytest.mark.parametrize("option", ["-E", "-I", "-S", "-IS", "-bE"])
def test_the_launcher_refuses_an_interpreter_that_would_skip_the_hook(option):
    """``python -E``/``-I`` ignore PYTHONPATH and ``-S`` skips site: the hook would never run there."""
    skip = subprocess.run([sys.executable, "-m", "mm_handoff", "run", "--", sys.executable, option, "-c", "print(1)"],
                          capture_output=True, text=True, timeout=60)
    assert skip.returncode == 2
    _stopped(skip, option)


def test_an_availability_check_before_the_import_leaves_the_hook_armed(tmp_path):
    """``importlib.util.find_spec('tensorrt_llm')`` (what libraries do to see what is installed) is a lookup,
    not an import: the real import later is still hooked and installs."""
    code = ("import importlib.util as u; u.find_spec('tensorrt_llm'); u.find_spec('tensorrt_llm')\n"
            "import tensorrt_llm, mm_handoff.trtllm as glue; print(glue.is_installed())")
    proc = run_python(code, env=_hooked_env(tmp_path))
    assert proc.returncode == 0 and proc.stdout.split() == ["True"], proc.stderr


def test_the_pth_line_also_stops_an_import_of_tensorrt_llm_where_mm_handoff_does_not_import(tmp_path):
    """The .pth line runs the same guard as the launcher's sitecustomize (run from another directory than the
    checkout, whose own ``mm_handoff`` would import)."""
    shadow = tmp_path / "shadow" / "mm_handoff"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('a broken mm_handoff install')\n")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "mm_handoff_autoinstall.pth").write_text(PTH_LINE + "\n")
    env = {**os.environ, _env.AUTOINSTALL: "1", "PYTHONPATH": os.pathsep.join([str(shadow.parent), str(STAND_IN_DIR)])}
    start = f"import site; site.addsitedir({str(tmp_path / 'site')!r}); "

    def run(code):
        return subprocess.run([sys.executable, "-c", start + code], env=env, cwd=str(tmp_path), capture_output=True,
                              text=True, timeout=60)

    tool = run("print('a tool ran')")
    assert tool.returncode == 0 and tool.stdout.strip() == "a tool ran", tool.stderr
    engine = run("import tensorrt_llm; print('served')")
    assert engine.returncode == EXIT_CODE
    _stopped(engine, "mm_handoff does not import")
