"""The glue in every process of SGLang's language-only (PD) server: the main process and each scheduler.

SGLang 0.5.23's HTTP server (``sglang.srt.entrypoints.http_server.launch_server``) runs the
``TokenizerManager`` in the process that calls it (the tokenizer path, ``--encoder-transfer-backend
zmq_to_tokenizer``: ``MMReceiverBase.recv_mm_data`` and ``get_validated_mm_data`` run there) and starts each
scheduler (the scheduler path, ``zmq_to_scheduler`` / ``mooncake``: ``get_validated_mm_data`` in
``_finish_assemble``) in a process of its own, always with multiprocessing's ``spawn`` (``engine.py``'s
``_set_envs_and_config``), so nothing patched in the parent reaches it. ``launch_server`` takes the scheduler's
process entry as its ``run_scheduler_process_func`` argument (and hands it on to the data-parallel controller,
which starts the schedulers when ``--dp-size`` > 1): :func:`run_scheduler_process` is SGLang's own entry with
:func:`install_or_exit` first. A spawned child finds it by its module and name, so it needs nothing from the
parent but ``mm_handoff`` on its path.

Fail closed: a process whose install fails prints one ``mm-handoff: error:`` line naming its role and pid and
exits with :data:`EXIT_NOT_INSTALLED` before SGLang runs anything in it. A scheduler that exits so never
reports ready, and SGLang's launcher stops with "scheduler died" (``_wait_for_scheduler_ready``): the server
never serves with a process that lacks the check. ``examples/sglang_language_only.py`` is the launcher.
"""

from __future__ import annotations

import os
import sys

from ._lifecycle import install

#: the exit code of a process whose install failed (``EX_CONFIG``, as the TensorRT-LLM start-up hook uses)
EXIT_NOT_INSTALLED = 78


def install_or_exit(role: str, *, policy=None) -> dict:
    """:func:`~mm_handoff.sglang.install` in this process, or one error line and ``SystemExit(78)``.

    On success one line on stderr names the role, the pid, the policy and the hook points patched (SGLang
    configures its loggers only later in a scheduler process, so the line is printed, not logged)."""
    try:
        report = install(policy=policy)
    except Exception as exc:  # whatever stops the install, this process must not serve
        print(f"mm-handoff: error: SGLang {role} process {os.getpid()}: the check did not install "
              f"({type(exc).__name__}: {exc}); this process does not serve", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_NOT_INSTALLED) from exc
    hooks = ", ".join(f"{row['target']} [{row['state']}]" for row in report["hooks"])
    print(f"mm-handoff: SGLang {role} process {os.getpid()}: check installed (policy={report['policy']}): {hooks}",
          file=sys.stderr, flush=True)
    return report


def run_scheduler_process(*args, **kwargs):
    """SGLang's ``run_scheduler_process`` (same arguments), after :func:`install_or_exit` in this process.

    Give it to ``launch_server(server_args, run_scheduler_process_func=...)``."""
    install_or_exit("scheduler")
    from sglang.srt.managers.scheduler import run_scheduler_process as sglang_run_scheduler_process

    return sglang_run_scheduler_process(*args, **kwargs)
