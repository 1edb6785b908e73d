"""Run ``llama_cpp.server`` with llama.cpp's extra CPU weight buffers turned off.

``python -m bcas.llm.llama_server --model FILE.gguf --host 127.0.0.1 --port 8080`` takes
exactly the arguments of ``python -m llama_cpp.server`` and runs that server.  The
only change is ``use_extra_bufts = False`` in llama.cpp's default model parameters:
on AMX-capable CPUs the AMX weight path of the llama.cpp bundled with
llama-cpp-python 0.3.x crashes on multi-token batches (see ``bcas.llm.embedded``).
"""

from __future__ import annotations

from typing import Any


def main() -> None:  # the server's own main is untyped
    import llama_cpp.llama_cpp as llama_c

    original = llama_c.llama_model_default_params

    def default_params() -> Any:  # llama.cpp's ctypes struct
        params = original()
        params.use_extra_bufts = False
        return params

    llama_c.llama_model_default_params = default_params

    from llama_cpp.server.__main__ import main as server_main

    server_main()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
