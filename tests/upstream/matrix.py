"""``make conformance``: the upstream suite once per TensorRT-LLM tree, and one table tree x test.

Trees: ``MM_HANDOFF_TRTLLM_SRC`` (one path, or several joined with ``:``), or ``MM_HANDOFF_TRTLLM_TREES``
(a file listing one tree per line; ``#`` starts a comment). Each tree runs in its own pytest process
(the import shim serves one tree per interpreter). Fetches nothing: a tree is a TensorRT-LLM checkout
or any directory holding its ``tensorrt_llm/`` Python files.

Per test and tree: ``passed``, ``FAILED`` (a glue failure or an upstream finding the suite asserts),
``GAP`` (a harness gap: upstream read something the harness does not provide, named with the upstream
line), ``n/a`` (not applicable to that tree). Exit status 1 when any test failed or hit a gap on any tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHORT = {"passed": "passed", "failed": "FAILED", "harness-gap": "GAP", "n/a": "n/a", "skipped": "skipped"}


def trees_from_env(env=os.environ) -> list:
    listing = env.get("MM_HANDOFF_TRTLLM_TREES")
    if listing:
        lines = Path(listing).read_text().splitlines()
        return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]
    source = env.get("MM_HANDOFF_TRTLLM_SRC", "")
    return [part for part in source.split(":") if part]


def run_tree(tree: str, pytest_args: list) -> tuple:
    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", delete=False) as fh:
        report = fh.name
    env = dict(os.environ, MM_HANDOFF_TRTLLM_SRC=tree, MM_HANDOFF_CONFORMANCE_REPORT=report)
    env.pop("MM_HANDOFF_TRTLLM_TREES", None)
    cmd = [sys.executable, "-m", "pytest", str(HERE), "-p", "no:cacheprovider", "-q", *pytest_args]
    done = subprocess.run(cmd, env=env)
    rows = [json.loads(line) for line in Path(report).read_text().splitlines() if line.strip()]
    os.unlink(report)
    return done.returncode, rows


def table(results: dict) -> str:
    names = list(results)
    tests = []
    for rows in results.values():
        for row in rows:
            if row["test"] not in tests:
                tests.append(row["test"])
    by_tree = {tree: {row["test"]: row for row in rows} for tree, rows in results.items()}
    width = max([len(t) for t in tests] + [4])
    out = [f"{'test':<{width}}  " + "  ".join(f"{Path(n).name:<10}" for n in names)]
    for test in tests:
        cells = [SHORT.get(by_tree[n].get(test, {}).get("kind", "n/a"), "?") for n in names]
        out.append(f"{test:<{width}}  " + "  ".join(f"{c:<10}" for c in cells))
    for tree, rows in results.items():
        for row in rows:
            if row["kind"] in ("failed", "harness-gap"):
                out.append(f"  [{Path(tree).name}] {row['test']}: {row['message']}")
    return "\n".join(out)


def main(argv=None) -> int:
    trees = trees_from_env()
    if not trees:
        print("set MM_HANDOFF_TRTLLM_SRC=<tree>[:<tree>...] or MM_HANDOFF_TRTLLM_TREES=<file listing trees>")
        return 2
    missing = [t for t in trees if not Path(t, "tensorrt_llm").is_dir()]
    if missing:
        print("no tensorrt_llm/ directory in: " + ", ".join(missing))
        return 2
    pytest_args = list(argv if argv is not None else sys.argv[1:])
    results, status = {}, 0
    for tree in trees:
        print(f"===== TensorRT-LLM tree {tree}", flush=True)
        code, rows = run_tree(tree, pytest_args)
        results[tree] = rows
        bad = [r for r in rows if r["kind"] in ("failed", "harness-gap")]
        status |= 1 if (code not in (0, 5) or bad) else 0
    print("\n===== conformance matrix (tree x test)")
    print(table(results))
    return status


if __name__ == "__main__":
    sys.exit(main())
