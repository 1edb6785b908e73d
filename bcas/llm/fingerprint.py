"""The fingerprint of a model as a run reaches it (see :mod:`bcas.identity`).

``model_fingerprint(backend, model, ...)`` never loads the model: a GGUF is hashed from
its file, a checkpoint from its folder, a served model is asked for what it is (the
preflight's ``/models`` list and one 1-token answer give the id the server reports and
its ``system_fingerprint``).  A backend registered by a user may give its models a
``fingerprint()`` method; otherwise ``<backend>:<model>`` is used.  Which rule applies is
the backend's declared ``identity`` (:mod:`bcas.llm`), never its name.
"""

from __future__ import annotations

from typing import Any

from bcas.identity import gguf_fingerprint, hf_fingerprint, server_fingerprint
from bcas.llm import backend_meta


def model_fingerprint(
    backend: str,
    model: str | None,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    verify: bool = True,
    loaded: Any = None,
) -> str:
    """Identity of ``model`` under ``backend``.

    ``verify``: for a server, ask it (one 1-token request); without it the fingerprint is
    the requested name marked ``?unverified``.  ``loaded``: the model object, consulted
    for a ``fingerprint()`` method when the backend is not one of bcas's own.
    """
    identity = backend_meta(backend, "identity") if backend else None
    if identity == "gguf":
        if model is None:
            from bcas.llm.embedded import default_gguf_path

            return gguf_fingerprint(default_gguf_path())
        return gguf_fingerprint(model)
    if identity == "checkpoint":
        if model is None:
            import os

            from bcas.llm.convert import default_output_dir

            return hf_fingerprint(str(os.environ.get("BCAS_VLLM_CHECKPOINT") or default_output_dir()))
        return hf_fingerprint(model)
    if identity == "mock":
        return f"mock:{model or 'gold'}"
    if identity == "served":
        if not model:
            raise ValueError("a served model needs a name")
        if not verify or not base_url:
            return server_fingerprint(model) + "?unverified"
        from bcas.llm.multi_endpoint import split_base_urls
        from bcas.llm.preflight import preflight

        # Several servers of one model (a comma list): the preflight checked that they agree; ask the first.
        result = preflight(split_base_urls(base_url)[0], model, api_key_env=api_key_env)
        return server_fingerprint(result.served_id or model, result.system_fingerprint)
    method = getattr(loaded, "fingerprint", None)
    if callable(method):
        return str(method())
    return f"{backend}:{model}"


__all__ = ["model_fingerprint"]
