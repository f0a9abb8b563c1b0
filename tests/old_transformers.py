"""transformers 5.9.0 beside the installed one, for the replace_wrapper convention (transformers <= 5.9): the
wheel unpacked and its pinned tokenizers / huggingface-hub installed under the cache, for a subprocess that puts
them first on its PYTHONPATH (tests/hf/test_convention_old_transformers.py says why and how)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

OLD_VERSION = "5.9.0"
OLD_DEPS = ("tokenizers==0.22.2", "huggingface-hub>=1.5,<2")


def _cache_root() -> Path:
    env = os.environ.get("MM_HANDOFF_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "mm-handoff"


def _pip(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout)


def prepare_old_transformers() -> tuple:
    """(transformers dir, deps dir), downloading and unpacking once; pytest.skip with the reason on failure."""
    root = _cache_root()
    tf_dir = root / f"tf-{OLD_VERSION}"
    deps_dir = root / f"tf-{OLD_VERSION}-deps"
    marker_tf = tf_dir / ".complete"
    marker_deps = deps_dir / ".complete"
    if not marker_tf.exists():
        wheels = root / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        whl = wheels / f"transformers-{OLD_VERSION}-py3-none-any.whl"
        if not whl.exists():
            r = _pip("download", "-q", "--no-deps", f"transformers=={OLD_VERSION}", "-d", str(wheels))
            if r.returncode != 0 or not whl.exists():
                pytest.skip(f"cannot download transformers=={OLD_VERSION}: {r.stderr.strip()[-400:]}")
        tmp = tf_dir.with_name(tf_dir.name + f".tmp{os.getpid()}")
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(tmp)
        if tf_dir.exists():
            import shutil
            shutil.rmtree(tf_dir)
        os.replace(tmp, tf_dir)
        marker_tf.write_text(OLD_VERSION)
    if not marker_deps.exists():
        r = _pip("install", "-q", "--target", str(deps_dir), "--upgrade", *OLD_DEPS)
        if r.returncode != 0 or not (deps_dir / "tokenizers").is_dir():
            pytest.skip(f"cannot install {OLD_DEPS} for transformers {OLD_VERSION}: {r.stderr.strip()[-400:]}")
        marker_deps.write_text(" ".join(OLD_DEPS))
    return tf_dir, deps_dir


