"""Run ``llama_cpp.server`` with llama.cpp's extra CPU weight buffers turned off, and ``GET /props``.

``bcas serve --model FILE.gguf --host 127.0.0.1 --port 8080 --n_ctx 8192``
takes exactly the arguments of ``python -m llama_cpp.server`` and runs that server.
Three changes:

* ``use_extra_bufts = False`` in llama.cpp's default model parameters: on AMX-capable
  CPUs the AMX weight path of the llama.cpp bundled with llama-cpp-python 0.3.x crashes
  on multi-token batches (see ``bcas.llm.embedded``);
* a ``GET /props`` route, as llama.cpp's own server has, reporting what the server
  serves, read from the loaded model: ``model_path``, ``default_generation_settings.n_ctx``
  (the context it was started with), ``chat_template`` and ``meta`` (the keys of
  llama.cpp's ``/v1/models`` ``meta``: parameter count, size in bytes, vocabulary,
  trained context, embedding width).  A served model is identified by these
  (:mod:`bcas.llm.served`), not by the name a client asks for;
* ``--chat_format chatml-function-calling`` (native tool calls) shows the model its
  tool results: that handler's template (llama-cpp-python 0.3.x) writes a ``tool``
  message's role and drops its content, so here tool results reach it as
  ``<tool_response>`` user turns (:func:`bcas.llm.tool_calls.tool_results_as_user`),
  as the embedded backend sends them.
"""

from __future__ import annotations

from typing import Any


def props(llama: Any, alias: str | None) -> dict[str, Any]:
    """llama.cpp's ``/props`` fields for a loaded ``llama_cpp.Llama``."""
    model = llama._model  # llama-cpp-python's model wrapper: the weights' numbers live there
    return {
        "model_path": str(llama.model_path),
        "default_generation_settings": {"n_ctx": int(llama.n_ctx()), "model": alias},
        "total_slots": 1,
        "chat_template": (llama.metadata or {}).get("tokenizer.chat_template"),
        "meta": {
            "n_params": int(model.n_params()),
            "size": int(model.size()),
            "n_vocab": int(model.n_vocab()),
            "n_ctx_train": int(model.n_ctx_train()),
            "n_embd": int(model.n_embd()),
        },
    }


def with_props(create_app: Any) -> Any:
    """``create_app`` whose app also answers ``GET /props`` (behind the server's API key, if it has one)."""

    def create(*args: Any, **kwargs: Any) -> Any:
        from fastapi import Depends
        from llama_cpp.server import app as server_app

        app = create_app(*args, **kwargs)

        def get_props() -> dict[str, Any]:
            proxy: Any = server_app._llama_proxy  # set by create_app; reading the loaded model takes no lock
            return props(proxy(None), getattr(proxy, "_current_model_alias", None))

        app.add_api_route("/props", get_props, methods=["GET"], dependencies=[Depends(server_app.authenticate)])
        return app

    return create


FUNCTION_CALLING = "chatml-function-calling"


def show_tool_results() -> None:
    """Register llama-cpp-python's ``chatml-function-calling`` handler again, with tool results shown."""
    from llama_cpp import llama_chat_format

    from bcas.llm.tool_calls import tool_results_as_user

    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()  # type: ignore[no-untyped-call]
    original: Any = registry.get_chat_completion_handler_by_name(FUNCTION_CALLING)

    def handler(*args: Any, messages: Any, **kwargs: Any) -> Any:
        return original(*args, messages=tool_results_as_user(messages), **kwargs)

    registry.register_chat_completion_handler(FUNCTION_CALLING, handler, overwrite=True)


def main() -> None:  # the server's own main is untyped
    import llama_cpp.llama_cpp as llama_c

    original = llama_c.llama_model_default_params

    def default_params() -> Any:  # llama.cpp's ctypes struct
        params = original()
        params.use_extra_bufts = False
        return params

    llama_c.llama_model_default_params = default_params
    show_tool_results()

    import llama_cpp.server.__main__ as server_main

    server_main.create_app = with_props(server_main.create_app)  # type: ignore[attr-defined]
    server_main.main()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
