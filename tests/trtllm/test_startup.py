"""Reaching other processes: real interpreters started through ``mm-handoff run --`` (and without it).

The grandchild is the stand-in's spawned executor worker. The probe sends it a request whose mRoPE ids
are 16 long for a 10-token prompt, bypassing the parent's checks (PreprocessedInputs): a worker with
mm-handoff installed refuses it at ingress, a stock worker silently cuts the ids.
"""

import json
import textwrap

from trtllm_helpers import REPO, run_python

PROBE = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import mm_handoff.trtllm as glue
    from mm_handoff._ledger import WRAPPER_MARK
    from tensorrt_llm.llmapi.llm import LLM, BaseLLM, PreprocessedInputs
    from tensorrt_llm.inputs.multimodal import MultimodalParams
    from tensorrt_llm._torch.model_config import register_pretrained_config
    from tensorrt_llm._torch.shared_tensor import SharedTensorContainer
    import stand_in_helpers as H

    handle = lambda a: SharedTensorContainer.from_tensor(np.asarray(a)).dump_to_dict()
    register_pretrained_config("probe", H.make_qwen3vl_config())
    llm = LLM(model="probe", tokenizer=H.FakeTokenizer())
    data = {"mrope_config": {"mrope_position_ids": handle(np.zeros((3, 1, 16), dtype=np.int64)),
                             "mrope_position_deltas": handle(np.zeros((1, 1), dtype=np.int32))}}
    pre = PreprocessedInputs(prompt_token_ids=list(range(1000, 1010)),
                             multimodal_params=MultimodalParams(multimodal_data=data))
    try:
        out = llm.generate_async(pre).result()
        worker = "stock: pid %d" % out._stand_in_trace["worker_pid"]
    except Exception as exc:
        worker = str(exc)
    finally:
        llm.shutdown()
    print(json.dumps({"installed": glue.is_installed(),
                      "wrapped": hasattr(vars(BaseLLM)["_preprocess"], WRAPPER_MARK),
                      "worker": worker}))
""")


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


def test_absent_or_broken_engine_does_not_crash_the_child(tmp_path):
    """Autoinstall with no tensorrt_llm, a too-old one, or one whose import fails: the child runs on."""
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
    assert too_old.returncode == 0 and too_old.stdout.split() == ["imported", "0.9.0", "False"], too_old.stderr
    assert "automatic install skipped" in too_old.stderr and "0.9.0" in too_old.stderr

    broken = tmp_path / "broken" / "tensorrt_llm"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise RuntimeError('no CUDA driver')\n")
    crashed = run_python(code, env=dict(env, PYTHONPATH=str(broken.parent)), stand_in=False, launcher=True)
    assert crashed.returncode == 0 and crashed.stdout.split()[:2] == ["broken:", "no"], crashed.stderr


def test_launcher_chains_an_existing_sitecustomize(tmp_path):
    """A sitecustomize already on PYTHONPATH still runs after mm-handoff's."""
    (tmp_path / "sitecustomize.py").write_text("import sys; sys.stderr.write('user sitecustomize ran\\n')\n")
    code = "import sys, mm_handoff._startup as s; print(any(isinstance(f, s._PostImportFinder) for f in sys.meta_path))"
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
    from mm_handoff._startup import PTH_LINE

    (tmp_path / "mm_handoff_autoinstall.pth").write_text(PTH_LINE + "\n")
    code = (f"import site, sys; site.addsitedir({str(tmp_path)!r}); "
            "print(any(type(f).__name__ == '_PostImportFinder' for f in sys.meta_path), "
            "'mm_handoff' in sys.modules)")
    on = run_python(code, stand_in=False, env={"MM_HANDOFF_AUTOINSTALL": "1"})
    yes = run_python(code, stand_in=False, env={"MM_HANDOFF_AUTOINSTALL": " Yes "})
    off = run_python(code, stand_in=False)
    zero = run_python(code, stand_in=False, env={"MM_HANDOFF_AUTOINSTALL": "0"})
    assert on.stdout.split() == yes.stdout.split() == ["True", "True"], on.stderr + yes.stderr
    assert off.stdout.split() == zero.stdout.split() == ["False", "False"], off.stderr + zero.stderr
    assert PTH_LINE in (REPO / "docs" / "trtllm.md").read_text()  # the documented line is this one
