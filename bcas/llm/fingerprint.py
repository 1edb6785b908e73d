"""The fingerprint of a model as a run reaches it (see :mod:`bcas.identity`).

``model_fingerprint(backend, model, ...)`` never loads the model: a GGUF is hashed from
its file, a checkpoint from its folder, a served model is asked for what it is (the
preflight: the id the server reports, what ``/models`` and ``/props`` say about the
model it serves, the ``system_fingerprint`` of a 1-token answer).  Without asking
(``verify=False``, ``--bcas-no-preflight``: offline replay) a served model is given
the identity last verified on this machine for the same URL and name (remembered in
``$BCAS_CACHE_DIR/served.json``), so the generation cache and the records of that
identity are found again; never verified, it is ``served:<name>?unverified``.  A backend registered by a user may give its models a
``fingerprint()`` method; otherwise ``<backend>:<model>`` is used.  Which rule applies is
the backend's declared ``identity`` (:mod:`bcas.llm`), never its name.
"""

from __future__ import annotations

import json
import os
from typing import Any

from bcas.identity import gguf_fingerprint, hf_fingerprint, server_fingerprint
from bcas.llm import backend_meta
from bcas.paths import cache_dir

VERIFIED_FILE = "served.json"


def _verified_path() -> Any:
    return cache_dir() / VERIFIED_FILE


def last_verified(base_url: str, model: str) -> str | None:
    """The fingerprint last verified for ``model`` at ``base_url`` on this machine, or None."""
    try:
        known = json.loads(_verified_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = known.get(f"{base_url}|{model}") if isinstance(known, dict) else None
    return str(value) if isinstance(value, str) else None


def remember_verified(base_url: str, model: str, fingerprint: str) -> None:
    """Remember a verified served fingerprint (best effort: a read-only cache folder only loses the memo)."""
    path = _verified_path()
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    if known.get(f"{base_url}|{model}") == fingerprint:
        return
    known[f"{base_url}|{model}"] = fingerprint
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(known, indent=0, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


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
        from bcas.llm.multi_endpoint import split_base_urls

        # Several servers of one model (a comma list): the preflight checked that they agree; ask the first.
        urls = split_base_urls(base_url)
        first = urls[0] if urls else None
        if not verify or first is None:
            known = last_verified(first, model) if first is not None else None
            return known or server_fingerprint(model) + "?unverified"
        from bcas.llm.preflight import preflight

        fingerprint = preflight(first, model, api_key_env=api_key_env).fingerprint
        remember_verified(first, model, fingerprint)
        return fingerprint
    method = getattr(loaded, "fingerprint", None)
    if callable(method):
        return str(method())
    return f"{backend}:{model}"


__all__ = ["last_verified", "model_fingerprint", "remember_verified"]
