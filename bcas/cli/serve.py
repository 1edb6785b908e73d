"""``bcas serve``: a llama.cpp server for the ``openai`` backend (:mod:`bcas.llm.llama_server`).

It takes the arguments of ``python -m llama_cpp.server``; ``bcas models`` prints the
shipped GGUF's path for ``--model``::

    bcas serve --model "$(bcas models --gguf)" --host 127.0.0.1 --port 8080 --n_ctx 8192
"""

from __future__ import annotations

import sys

from bcas.llm.llama_server import main as server_main


def serve_main(argv: list[str], prog: str = "bcas serve") -> int:
    """Run the server in this process until it is stopped; llama_cpp.server reads ``sys.argv``."""
    sys.argv = [prog, *argv]
    server_main()
    return 0
