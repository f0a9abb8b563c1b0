"""Reaching other processes: real interpreters started through ``mm-handoff run --`` (and without it).

The grandchild is the stand-in's spawned executor worker. The probe sends it a request whose mRoPE ids
are 16 long for a 10-token prompt, bypassing the parent's checks (PreprocessedInputs): a worker with
mm-handoff installed refuses it at ingress, a stock worker silently cuts the ids.
"""

import json
import textwrap

from trtllm_helpers import PROBE, REPO, run_python


def _last_json(proc):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_launcher_installs_in_the_child_and_the_spawned_worker():
    """``mm-handoff run -- python -c ...``: child patched, and its spawned worker refuses the bad request."""
    report = _last_json(run_python(PROBE, launcher=True))
    assert report["installed"] and report["wrapped"]
    assert "mrope_position_ids.shape[-1]: expected 'prompt length 10', got 16" in report["worker"]


def test_without_the_environment_variable_nothing_is_installed():
    """A plain child (no launcher, no MM_HANDOFF_AUTOINSTALL): no wrappers, the worker slices silently."""
    report = _last_json(run_python(PROBE))
    assert report == {"installed": False, "wrapped": False, "worker": report["worker"]}
    assert report["worker"].startswith("stock: pid")


def test_absent_broken_or_unsupported_engine(tmp_path):
    """Autoinstall with no tensorrt_llm or one whose import fails: nothing to protect, the child runs on. A
    too-old one imports but cannot be fixed: the child stops there (one line, exit 78), or with the explicit
    opt-out runs on without the fix and says so."""
    code = textwrap.dedent("""
        import sys
        import mm_handoff.trtllm as glue
        assert "tensorrt_llm" not in sys.modules  # importing the glue imports no engine
        try:
            import tensorrt_llm
            outcome = "imported " + tensorrt_llm.__version__
        except ImportError:
            outcome = "absent"
        except RuntimeError as exc:
            outcome = "broken: %s" % exc
        print(outcome, glue.is_installed())
    """)
    env = {}
    absent = run_python(code, env=env, stand_in=False, launcher=True)
    assert absent.returncode == 0 and absent.stdout.split() == ["absent", "False"], absent.stderr

    old = tmp_path / "old" / "tensorrt_llm"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("__version__ = '0.9.0'\n")
    too_old = run_python(code, env=dict(env, PYTHONPATH=str(old.parent)), stand_in=False, launcher=True)
    assert too_old.returncode == 78 and too_old.stdout == "", too_old.stderr
    assert too_old.stderr.count("\n") == 1 and too_old.stderr.startswith("mm-handoff: error: automatic install "
                                                                         "failed") and "0.9.0" in too_old.stderr
    allowed = run_python(code, env=dict(env, PYTHONPATH=str(old.parent), MM_HANDOFF_ALLOW_UNPROTECTED="1"),
                         stand_in=False, launcher=True)
    assert allowed.returncode == 0 and allowed.stdout.split() == ["imported", "0.9.0", "False"], allowed.stderr
    assert "serving WITHOUT the fix" in allowed.stderr and "0.9.0" in allowed.stderr

    broken = tmp_path / "broken" / "tensorrt_llm"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise RuntimeError('no CUDA driver')\n")
    crashed = run_python(code, env=dict(env, PYTHONPATH=str(broken.parent)), stand_in=False, launcher=True)
    assert crashed.returncode == 0 and crashed.stdout.split()[:2] == ["broken:", "no"], crashed.stderr


def test_launcher_chains_an_existing_sitecustomize(tmp_path):
    """A sitecustomize already on PYTHONPATH still runs after mm-handoff's."""
    (tmp_path / "sitecustomize.py").write_text("import sys; sys.stderr.write('user sitecustomize ran\\n')\n")
    code = ("import sys, mm_handoff.trtllm._startup as s; "
            "print(any(isinstance(f, s._PostImportFinder) for f in sys.meta_path))")
    proc = run_python(code, launcher=True, stand_in=False, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True"]
    assert "user sitecustomize ran" in proc.stderr


def test_run_command_strips_the_separator_and_needs_a_command(capsys):
    """``mm-handoff run`` with nothing to run exits 2 with one line; ``--`` alone counts as nothing."""
    from mm_handoff.cli import main

    assert main(["run"]) == 2
    assert main(["run", "--"]) == 2
    assert capsys.readouterr().err.count("mm-handoff: error: run needs a command") == 2


def test_documented_pth_line_registers_the_hook_only_when_enabled(tmp_path):
    """The .pth line from the docs, processed by site: the hook is armed with the variable, absent without."""
    from mm_handoff.trtllm._startup import PTH_LINE

    (tmp_path / "mm_handoff_autoinstall.pth").write_text(PTH_LINE + "\n")
    code = (f"import site, sys; site.addsitedir({str(tmp_path)!r}); "
            "print(any(type(f).__name__ == '_PostImportFinder' for f in sys.meta_path), "
            "'mm_handoff' in sys.modules)")
    on = run_python(code, stand_in=False, env={"MM_HANDOFF_AUTOINSTALL": "1"})
    yes = run_python(code, stand_in=False, env={"MM_HANDOFF_AUTOINSTALL": " Yes "})
    off = run_python(code, stand_in=False)
    zero = run_python(code, stand_in=False, env={"MM_HANDOFF_AUTOINSTALL": "0"})
    typo = run_python(code, stand_in=False, env={"MM_HANDOFF_AUTOINSTALL": "ture"})
    assert on.stdout.split() == yes.stdout.split() == ["True", "True"], on.stderr + yes.stderr
    assert off.stdout.split() == zero.stdout.split() == ["False", "False"], off.stderr + zero.stderr
    assert typo.returncode == 78 and typo.stdout == "" and "MM_HANDOFF_AUTOINSTALL" in typo.stderr  # never a guess
    assert "s.PTH_LINE + '\\n'" in (REPO / "docs" / "trtllm.md").read_text()  # the documented way to write it
