"""The wheel holds no top-level ``adapters`` and ``import mm_handoff`` needs only attrs and numpy."""

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Built from a copy of the sources, so the checkout gets no build/ or *.egg-info."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "mm_handoff", src / "mm_handoff", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    before = sorted(p.name for p in ROOT.iterdir())
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                             "-w", str(out), str(src)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "deprecat" not in result.stderr.lower(), result.stderr  # e.g. setuptools' license-table banner
    assert sorted(p.name for p in ROOT.iterdir()) == before
    (path,) = out.glob("mm_handoff-*.whl")
    return path


def test_wheel_layout(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert "adapters" not in tops and "tests" not in tops and "benchmarks" not in tops
    assert "mm_handoff/adapters/__init__.py" in names and "mm_handoff/py.typed" in names
    meta = next(n for n in names if n.endswith("METADATA"))
    lines = zipfile.ZipFile(wheel).read(meta).decode().splitlines()
    requires = [line for line in lines if line.startswith("Requires-Dist")]
    core = [r for r in requires if "extra ==" not in r]
    assert sorted(r.split()[1].split(">")[0] for r in core) == ["attrs", "numpy"]
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "mm_handoff.adapters:register_builtin" in zipfile.ZipFile(wheel).read(entry).decode()


def test_import_without_engines(wheel, tmp_path):
    """A fresh environment with only attrs + numpy imports mm_handoff and resolves every family."""
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    import attrs
    import numpy  # copy the two dependencies from this environment, nothing else
    for mod in (attrs, numpy):
        src = Path(mod.__file__).parent
        os.symlink(src, Path(site) / src.name)
    os.symlink(Path(attrs.__file__).parent.parent / "attr", Path(site) / "attr")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    code = ("import sys, mm_handoff; from mm_handoff import get_adapter; "
            "import mm_handoff.adapters, mm_handoff.trtllm, mm_handoff.hf; "
            "a = get_adapter('qwen3_5'); assert a.family == 'qwen3_5'; "
            "bad = [m for m in ('torch', 'transformers', 'tensorrt_llm') if m in sys.modules]; "
            "assert not bad, bad; print('ok')")
    result = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    # the engine-free example, as the README shows it, runs there as it is
    example = Path(__file__).resolve().parent.parent / "examples" / "engine_free.py"
    result = subprocess.run([str(py), str(example)], capture_output=True, text=True, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "PD side: accepted, 12054 ids" in result.stdout and "stock prompt (11894 ids)" in result.stdout
    # the wheel ships the corpus
    result = subprocess.run([str(py), "-m", "mm_handoff", "corpus", "--out", str(tmp_path / "corpus")],
                            capture_output=True, text=True, cwd=str(tmp_path))
    assert result.returncode == 0 and (tmp_path / "corpus" / "qwen3_vl.pad_only.json").is_file(), result.stderr


def test_the_readme_shows_the_engine_free_example_as_it_is():
    """The README's engine-free block is examples/engine_free.py after its docstring, verbatim."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    block = readme.split("## The contract without an engine", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    source = (root / "examples" / "engine_free.py").read_text()
    body = source.split('"""', 2)[2].lstrip("\n")
    assert block == body


def test_the_readme_shows_the_sglang_launcher_as_it_is():
    """The README's SGLang block is examples/sglang_language_only.py after its docstring, verbatim (the file runs
    as pasted in ``.venv-sglang``: tests/sglang_engine/test_launcher.py)."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    block = readme.split("## With SGLang", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    source = (root / "examples" / "sglang_language_only.py").read_text()
    assert block == source.split('"""', 2)[2].lstrip("\n")
