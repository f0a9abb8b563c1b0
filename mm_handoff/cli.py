"""``mm-handoff``: demo, inspect, diff, selfcheck, bench, corpus, doctor, run.

Engine imports happen inside the commands, so ``mm-handoff --help`` stays fast. Bad input (a
missing file, bad JSON, an invalid layout) ends with one ``mm-handoff: error: ...`` line on stderr
and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Sequence

# UsageError: a user-facing failure, printed as one line, exit code 2
from .errors import GridMismatchError, HandoffError, UsageError


# ----------------------------------------------------------------------------- input parsing
def _read_bounded(path: str, most: int) -> bytes:
    """At most ``most`` bytes of a regular file, or of stdin (``-``); one more is an error, never a cut.

    The file is opened without blocking and checked before it is read: a FIFO, a device (``/dev/zero``,
    ``/dev/urandom``), a socket or a directory is refused, so no path hangs or reads without end. It is read
    in chunks as it comes (:func:`_read_upto`): what is allocated follows what the file holds, never the
    limit (``max_payload_chars=2**62`` reads an 8-byte file in 8 bytes)."""
    if path == "-":
        if sys.stdin is None or not hasattr(sys.stdin, "buffer"):
            raise UsageError("'-': there is no standard input to read")
        data = _read_upto(sys.stdin.buffer, most + 1)
        size = len(data)
    else:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                kind = _KINDS.get(stat.S_IFMT(info.st_mode), "special file")
                raise UsageError(f"{path!r} is not a regular file (a {kind}); give a file, or - for stdin")
            data = b"" if info.st_size > most else _read_upto(f, most + 1)  # too large: refused unread
            size = max(info.st_size, len(data))
    if size > most:
        raise UsageError(f"{path!r} holds more than {most} bytes (limits.max_payload_chars; raise it with "
                         "MM_HANDOFF_LIMITS=max_payload_chars=N)")
    return data


#: the most bytes one read asks for (a read allocates what it asks for before anything arrives)
_CHUNK = 1 << 20


def _read_upto(stream, most: int) -> bytes:
    """What ``stream`` holds, up to ``most`` bytes, read a chunk at a time."""
    chunks, size = [], 0
    while size < most:
        chunk = stream.read(min(_CHUNK, most - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


_KINDS = {stat.S_IFIFO: "FIFO", stat.S_IFCHR: "character device", stat.S_IFBLK: "block device",
          stat.S_IFSOCK: "socket", stat.S_IFDIR: "directory"}


def _read_json(path: str):
    """The file's JSON, its size and its number of objects, lists and values bounded before it is parsed
    (what the largest layout, token list or ``{"token_ids", grids}`` object allowed by the limits holds)."""
    from .reading import resolve_limits

    limits = resolve_limits(None)
    try:
        text = _read_bounded(path, limits.max_payload_chars).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path!r} is not UTF-8 text") from None
    opens, most = text.count("{") + text.count("["), 2 * limits.max_items + 8
    if opens > most:
        raise UsageError(f"{path!r} holds {opens} JSON objects and lists; a layout or token list has at most {most} "
                         "(limits.max_items)")
    values, most = text.count(",") + text.count(":"), limits.max_prompt_len + 16 * limits.max_items + 128
    if values > most:
        raise UsageError(f"{path!r} holds {values} JSON values; a layout or token list has at most {most} "
                         "(limits.max_prompt_len)")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path!r} is not valid JSON ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path!r} is nested too deeply to be a token list or a layout") from None


def _grids(value, name: str):
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise UsageError(f"--{name.replace('_', '-')} must be JSON like [[20,36,66]]") from None
    if not isinstance(value, list) or not all(isinstance(g, list) and len(g) == 3 for g in value):
        raise UsageError(f"{name} must be a list of [t, h, w] triples")
    return value


def load_layout(path: str, *, family: str | None = None, image_grid_thw=None, video_grid_thw=None):
    """A layout from a wire payload, an object with token ids + grids, or a bare list of ids."""
    from . import HandoffLayout, get_adapter

    data = _read_json(path)
    try:
        if isinstance(data, dict) and data.get("format") == "mm-handoff.layout":
            return HandoffLayout.from_wire(data)
        if isinstance(data, list):
            data = {"token_ids": data}
        if not isinstance(data, dict) or "token_ids" not in data:
            raise UsageError(f"{path!r}: expected a wire payload, a list of token ids, or an object with "
                           f"'token_ids' (and optional 'family', 'image_grid_thw', 'video_grid_thw')")
        fam = family or data.get("family") or "qwen3_vl"
        if not isinstance(fam, str):
            raise UsageError(f"{path!r}: 'family' must be a string")
        adapter = get_adapter(fam)
        images = _grids(image_grid_thw if image_grid_thw is not None else data.get("image_grid_thw"), "image_grid_thw")
        videos = _grids(video_grid_thw if video_grid_thw is not None else data.get("video_grid_thw"), "video_grid_thw")
        try:
            layout = adapter.derive_layout(data["token_ids"], image_grid_thw=images, video_grid_thw=videos,
                                           mrope=False)
        except GridMismatchError as exc:
            if images is None and videos is None:  # ids with pads and no grid: say where the grids go
                raise UsageError(f"{path!r}: {exc}; the ids hold image or video pads: give their grids with "
                                 "--image-grid-thw / --video-grid-thw (or 'image_grid_thw' / 'video_grid_thw' in "
                                 "the file)") from None
            raise
        # the delta its ids and grids give: what the wire form of the same layout carries (its mRoPE ids do not
        # travel), so the two forms of one layout are equal and print one fingerprint
        try:
            delta = adapter.layout_mrope_delta(layout)
        except GridMismatchError:  # runs HF's mRoPE cannot place (the stock PD layout: one run for a multi-group
            return layout  # video): it has no delta, and neither has the wire form of it
        return layout.with_mrope(None, delta)
    except HandoffError as exc:
        raise UsageError(f"{path!r}: {exc}") from None


# ---------------------------------------------------------------------------------- commands
def cmd_inspect(args) -> int:
    from .layout.summary import format_layout, layout_summary

    layout = load_layout(args.file, family=args.family, image_grid_thw=args.image_grid_thw,
                         video_grid_thw=args.video_grid_thw)
    summary = layout_summary(layout)
    print(json.dumps(summary, indent=1) if args.json else format_layout(summary))
    return 0


def describe_difference(a, b) -> str | None:
    """The first difference between two layouts, in words; None when equal."""
    from .errors import TokenMismatchError
    from .layout.tokens import check_token_ids

    if a.family != b.family:
        return f"family: {a.family} vs {b.family}"
    if a.convention != b.convention:
        return f"convention: {a.convention} vs {b.convention}"
    if a.spec != b.spec:
        return f"spec: {a.spec.as_dict()} vs {b.spec.as_dict()}"
    if a.tokenizer_digest != b.tokenizer_digest:
        return f"tokenizer_digest: {a.tokenizer_digest} vs {b.tokenizer_digest}"
    try:
        check_token_ids(a.token_ids, b.token_ids)
    except TokenMismatchError as exc:
        return (f"token ids: lengths {a.prompt_len} vs {b.prompt_len}; first difference at index {exc.index}: "
                f"{exc.expected_context} vs {exc.actual_context}")
    for k, (x, y) in enumerate(zip(a.items, b.items, strict=False)):
        if x != y:
            for field in ("modality", "grid_thw", "embedding_length", "runs", "timestamps", "timestamp_spans"):
                if getattr(x, field) != getattr(y, field):
                    return f"items[{k}].{field}: {getattr(x, field)!r:.200} vs {getattr(y, field)!r:.200}"
    if len(a.items) != len(b.items):
        return f"items: {len(a.items)} vs {len(b.items)}"
    if a.mrope_position_delta != b.mrope_position_delta:
        return f"mrope_position_delta: {a.mrope_position_delta} vs {b.mrope_position_delta}"
    return None


def cmd_diff(args) -> int:
    a = load_layout(args.a, family=args.family)
    b = load_layout(args.b, family=args.family)
    diff = describe_difference(a, b)
    if args.json:
        print(json.dumps({"equal": diff is None, "difference": diff}))
    else:
        print("layouts are equal" if diff is None else f"layouts differ: {diff}")
    return 0 if diff is None else 1


def cmd_selfcheck(args) -> int:
    """Exercise the core end to end on the 720p40 layout without any engine."""
    import time

    from . import HandoffLayout, get_adapter, validate
    from .errors import MropeLengthError

    adapter = get_adapter(args.family)
    s = adapter.spec
    raw = [1, 2, s.vision_start, s.video_pad, s.vision_end, 3, 4]
    meta = {"fps": 24.0, "frames_indices": list(range(40)), "total_num_frames": 40}
    grid = [[20, 36, 66]]
    t0 = time.perf_counter()
    agg = adapter.derive_layout(adapter.rebuild_token_ids(raw, video_grid_thw=grid, video_metadata=[meta]),
                                video_grid_thw=grid)
    stock = adapter.derive_layout(adapter.stock_token_ids(raw, video_grid_thw=grid), video_grid_thw=grid, mrope=False)
    back = HandoffLayout.from_wire(json.dumps(agg.to_wire()))
    validate(back, embedding_rows=11880)
    try:
        validate(stock, mrope_position_ids=agg.mrope_position_ids, request_id="selfcheck")
        verdict = "NOT CAUGHT"
    except MropeLengthError as exc:
        verdict = f"caught: {exc}"
    ms = (time.perf_counter() - t0) * 1e3
    print(f"{adapter.family}: aggregated {agg.prompt_len} ids, stock {stock.prompt_len} ids "
          f"(+{agg.prompt_len - stock.prompt_len}); wire round trip ok; stock path {verdict}; {ms:.1f} ms")
    return 0 if verdict.startswith("caught") else 1


def cmd_demo(args) -> int:
    if args.engine == "vllm":
        from .vllm.demo import run_demo as run_vllm_demo
        return run_vllm_demo(args)
    from .hf.demo import run_demo
    return run_demo(args)


def cmd_bench(args) -> int:
    """Run the suite of a clone: ``benchmarks/report.py`` sits next to the package there, not in the wheel."""
    import importlib.util
    from pathlib import Path

    report = Path(__file__).resolve().parent.parent / "benchmarks" / "report.py"
    if not report.is_file():
        raise UsageError("the benchmark suite (benchmarks/) is not next to this installation; "
                         "run from a clone after `make setup`")
    spec = importlib.util.spec_from_file_location("mm_handoff_bench_report", report)
    if spec is None or spec.loader is None:
        raise UsageError(f"{report} cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_bench(args)


#: each engine's import name and the module of its report (``run_doctor(args, out=...)``: 0 ready, 1 not)
DOCTORS = (("tensorrt_llm", "mm_handoff.trtllm.doctor"), ("vllm", "mm_handoff.vllm.doctor"),
           ("sglang", "mm_handoff.sglang.doctor"))


def engine_installed(name: str) -> bool:
    """Whether ``name`` is installed (found on the path, not a namespace left by something else), without
    importing it: an engine that is installed but does not import is reported by its doctor, and fails it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


def cmd_doctor(args) -> int:
    """A report per installed engine (one line for an engine that is not installed), then the first bad
    ``MM_HANDOFF_*`` setting as the one error line (exit 2): with it, every process that asked for the fix would
    stop at start, whatever the reports say. Exit 0 when every installed engine is ready, 1 otherwise."""
    import importlib

    from ._version import __version__
    from .trtllm._startup import setting_problems

    print(f"mm_handoff    {__version__}")
    _metrics_report(sys.stdout)
    code = 0
    for engine, module in DOCTORS:
        print()
        if not engine_installed(engine):
            print(f"{engine}: not installed (skipped)")
            continue
        print(f"{engine}:")
        code = max(code, importlib.import_module(module).run_doctor(args, out=sys.stdout))
    problems = setting_problems()
    if problems:
        raise problems[0] if isinstance(problems[0], HandoffError) else UsageError(str(problems[0]))
    return code


def _metrics_report(out) -> None:
    """Where the check points' figures go (docs/metrics.md), and, where the processes of a deployment share
    ``PROMETHEUS_MULTIPROC_DIR``, mm-handoff's figures summed over every process that wrote there. Without that
    directory the figures live in each serving process (the engine's ``/metrics``, ``mm_handoff.stats()``)."""
    import os

    from .glue.signals import metrics_setting, prometheus_importable

    importable = prometheus_importable()
    try:
        setting = metrics_setting()
    except HandoffError:  # named as the setting error below
        setting = None
    on = importable if setting is None else setting
    where = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    print(f"metrics:      prometheus_client {'installed' if importable else 'not installed'}; "
          f"{'on' if on else 'off (figures in process only: mm_handoff.stats())'}", file=out)
    if not (on and importable):
        return
    if not where or not os.path.isdir(where):
        print("              one process each: the engine's /metrics serves them (mm_handoff.stats() in code)",
              file=out)
        return
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=where)
    lines = []
    for metric in registry.collect():
        for sample in metric.samples:
            if sample.name in ("mm_handoff_checks_total", "mm_handoff_refusals_total") and sample.value:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                lines.append(f"              {sample.name}{{{labels}}} {sample.value:g}")
    print(f"              PROMETHEUS_MULTIPROC_DIR {where}: {len(lines) or 'no'} series of mm-handoff's"
          + ("" if lines else " yet"), file=out)
    for line in sorted(lines):
        print(line, file=out)


def cmd_corpus(args) -> int:
    """Write the stored corpus (HF's answers on the oracle's requests, per family and convention) into a folder."""
    from .hf.corpus import export

    try:
        written = export(args.out)
    except OSError as exc:
        raise UsageError(f"{args.out!r}: cannot write the corpus there ({exc.strerror or exc})") from None
    print(f"wrote {len(written)} files to {args.out} (README.md says what each field is)")
    return 0


def cmd_run(args) -> int:
    from .trtllm._launcher import run_command
    return run_command(args.command)


def _layout_command(sub, name: str, help_text: str, files: tuple, func, *, grids: bool) -> None:
    """A verb that reads layouts from files: the files, then --family [--*-grid-thw] --json."""
    cmd = sub.add_parser(name, help=help_text)
    for file in files:
        cmd.add_argument(file)
    cmd.add_argument("--family")
    if grids:
        cmd.add_argument("--image-grid-thw")
        cmd.add_argument("--video-grid-thw")
    cmd.add_argument("--json", action="store_true")
    cmd.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__
    from .adapters.families import HF_FAMILIES

    p = argparse.ArgumentParser(prog="mm-handoff", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"mm-handoff {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("demo", help="show the E/PD video bug and the fix on a tiny Qwen3-VL (TensorRT-LLM #20138)")
    d.add_argument("--family", default="qwen3_vl",
                   choices=[name for name, row in HF_FAMILIES.items() if row.qwen_processor])
    d.add_argument("--frames", type=int, default=40)
    d.add_argument("--height", type=int, default=224)
    d.add_argument("--width", type=int, default=224)
    d.add_argument("--fps", type=float, default=24.0)
    d.add_argument("--720p", dest="hd", action="store_true", help="the bug report's 720x1280 clip (about 20-60 s)")
    d.add_argument("--max-new-tokens", type=int, default=6)
    d.add_argument("--report-prompt", action="store_true",
                   help="use the bug report's JSON-events prompt instead of 'Describe this video.'")
    d.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    d.add_argument("--engine", choices=["hf", "vllm"], default="hf",
                   help="hf: the HF reference E/PD engine (default); vllm: vLLM's embeds path (needs vLLM)")
    d.set_defaults(func=cmd_demo)

    _layout_command(sub, "inspect", "print the layout of a prompt's token ids (file or - for stdin)",
                    ("file",), cmd_inspect, grids=True)
    _layout_command(sub, "diff", "compare two layouts and name the first difference (exit 1 if they differ)",
                    ("a", "b"), cmd_diff, grids=False)

    sc = sub.add_parser("selfcheck", help="engine-free end-to-end check of the core")
    sc.add_argument("--family", default="qwen3_vl")
    sc.set_defaults(func=cmd_selfcheck)

    b = sub.add_parser("bench", help="run the CPU benchmark suite and print a table")
    b.add_argument("--plot", metavar="PNG", help="also save per-request overhead vs prompt length")
    b.add_argument("--json", metavar="FILE", help="also save the raw figures")
    b.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    b.set_defaults(func=cmd_bench)

    co = sub.add_parser("corpus", help="write the layout corpus (HF's answers per family and convention) as JSON")
    co.add_argument("--out", required=True, metavar="DIR")
    co.set_defaults(func=cmd_corpus)

    dr = sub.add_parser("doctor", help="each installed engine: version, hook points, patch status")
    dr.set_defaults(func=cmd_doctor)

    r = sub.add_parser("run", help="run CMD with mm-handoff installed in every Python process it starts")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    r.set_defaults(func=cmd_run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UsageError, HandoffError) as exc:
        print(f"mm-handoff: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mm-handoff: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
