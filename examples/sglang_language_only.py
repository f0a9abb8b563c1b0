"""SGLang's language-only (PD) server with mm-handoff's check in every process that runs a hook point.

Run it where `sglang serve` would run, with the same arguments (docs/sglang.md#processes):

    python examples/sglang_language_only.py --model-path Qwen/Qwen3-VL-8B-Instruct --language-only \
        --encoder-urls http://encoder-host:30000 --port 30001
"""

import os
import sys

import mm_handoff.sglang as ms

if __name__ == "__main__":
    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    load_plugins()  # what `sglang serve` does first
    server_args = prepare_server_args(sys.argv[1:])
    # this process runs the tokenizer path's hook points; a failed install prints one line and exits 78
    ms.install_or_exit("tokenizer manager")
    try:
        # each scheduler process SGLang spawns runs ms.run_scheduler_process: install_or_exit, then SGLang's own
        launch_server(server_args, run_scheduler_process_func=ms.run_scheduler_process)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)
