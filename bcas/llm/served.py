"""What an OpenAI-compatible server says it serves: the facts a served model is identified by.

The name a client sends is only a request: llama.cpp's server answers any name with its
one model, and another file can be put behind the same name tomorrow.  These readings
come from the server itself, without generating anything:

* ``GET {base}/models``: the entry of the served model.  vLLM reports ``root`` (the
  checkpoint it loaded) and ``max_model_len`` (its context length); llama.cpp's own
  server reports ``meta`` (parameter count, size in bytes, vocabulary, trained context);
* ``GET {root}/props`` (``root`` is the base URL without its ``/v1``): llama.cpp's server
  reports ``model_path``, ``default_generation_settings.n_ctx`` (the context it was
  started with) and ``chat_template``.  ``bcas serve`` answers the
  same route with the same fields (plus ``meta``), read from the loaded model.

:func:`read_server_facts` returns them as :class:`ServerFacts`; a route a server does
not have, refuses or answers with something else gives no fact (a hosted API reports
little; its identity is then its reported id and ``system_fingerprint`` alone).
:meth:`ServerFacts.identity` is the part that enters the model's fingerprint
(:func:`bcas.identity.server_fingerprint`): the model path, ``root``, ``meta``, the chat
template's hash and the context length; the URL and the name asked for do not.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import httpx

# llama.cpp's /v1/models ``meta`` keys that describe the weights (not the process).
META_KEYS = ("n_params", "size", "n_vocab", "n_ctx_train", "n_embd", "vocab_type")
# How servers word a request that does not fit the context (llama.cpp, vLLM, llama-cpp-python, OpenAI).
CONTEXT_EXCEEDED = re.compile(
    r"exceeds? the available context size|maximum context length|context_length_exceeded|"
    r"exceed context window|context window exceeded|exceed_context_size",
    re.IGNORECASE,
)
_WINDOW_NUMBER = re.compile(
    r"(?:maximum context length is|context window of|context size \(?|n_ctx\s*[=:]\s*)\s*(\d+)", re.IGNORECASE
)


@dataclass(frozen=True)
class ServerFacts:
    """What a server reported about the model it serves (``None``: not reported)."""

    model_path: str | None = None
    root: str | None = None
    context_window: int | None = None
    chat_template_sha: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # The id of the served model's ``/models`` entry (llama.cpp: its alias or model path): a name, not an identity.
    model_id: str | None = field(default=None, compare=False)

    def identity(self) -> dict[str, Any]:
        """The reported facts that identify the served model (empty when the server reported none)."""
        facts: dict[str, Any] = {
            "model_path": self.model_path,
            "root": self.root,
            "context_window": self.context_window,
            "chat_template_sha": self.chat_template_sha,
            "meta": dict(sorted(self.meta.items())) or None,
        }
        return {k: v for k, v in facts.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return self.identity()

    def name(self, served_id: str | None = None) -> str | None:
        """The served model's own name: the file name of ``model_path`` (llama.cpp's GGUF),
        else ``root`` (vLLM's checkpoint), else the id of its ``/models`` entry (a GGUF path: its
        file name), else ``served_id`` (the id the server answered with)."""
        if self.model_path:
            return PurePath(self.model_path.replace("\\", "/")).name or self.model_path
        if self.root:
            return self.root
        listed = PurePath(self.model_id).name if self.model_id and self.model_id.endswith(".gguf") else self.model_id
        return listed or served_id or None


def server_root(base_url: str) -> str:
    """``http://host:8000/v1`` -> ``http://host:8000`` (llama.cpp serves ``/props`` beside ``/v1``)."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _positive_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _get_json(client: httpx.Client, url: str) -> dict[str, Any] | None:
    try:
        response = client.get(url)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        payload = response.json()
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def model_entry(models_payload: dict[str, Any] | None, served_id: str | None, model: str) -> dict[str, Any]:
    """The ``/models`` entry of the served model: the one named ``served_id``, else ``model``, else a lone entry."""
    data = models_payload.get("data") if isinstance(models_payload, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    for wanted in (served_id, model):
        for entry in entries:
            if wanted is not None and str(entry.get("id")) == wanted:
                return entry
    return entries[0] if len(entries) == 1 else {}


def facts_from(entry: dict[str, Any], props: dict[str, Any] | None) -> ServerFacts:
    """:class:`ServerFacts` from a ``/models`` entry and a ``/props`` reply (either may be empty)."""
    props = props or {}
    settings = props.get("default_generation_settings")
    n_ctx = _positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    template = props.get("chat_template")
    meta_source = entry.get("meta") if isinstance(entry.get("meta"), dict) else props.get("meta")
    meta = {k: meta_source[k] for k in META_KEYS if isinstance(meta_source, dict) and meta_source.get(k) is not None}
    root = entry.get("root")
    path = props.get("model_path")
    return ServerFacts(
        model_path=str(path) if path else None,
        root=str(root) if root else None,
        context_window=n_ctx or _positive_int(entry.get("max_model_len")),
        chat_template_sha=hashlib.sha256(template.encode()).hexdigest()[:16]
        if isinstance(template, str) and template
        else None,
        meta=meta,
        model_id=str(entry["id"]) if entry.get("id") else None,
    )


def context_exceeded(response: httpx.Response, message: str) -> tuple[bool, int | None]:
    """Whether an error reply says the request exceeds the context, and the window it names (if any).

    llama.cpp's server puts ``n_ctx`` in its error object; vLLM and llama-cpp-python say
    "maximum context length is N tokens"; the code ``context_length_exceeded`` (OpenAI)
    or the type ``exceed_context_size_error`` (llama.cpp) mark it too.
    """
    try:
        payload = response.json()
    except ValueError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    error = error if isinstance(error, dict) else {}
    marks = " ".join(str(error.get(k) or "") for k in ("code", "type"))
    if not (CONTEXT_EXCEEDED.search(message) or CONTEXT_EXCEEDED.search(marks)):
        return False, None
    found = _WINDOW_NUMBER.search(message)
    return True, _positive_int(error.get("n_ctx")) or (int(found.group(1)) if found else None)


def read_server_facts(
    client: httpx.Client, base_url: str, model: str, served_id: str | None = None, models_payload: Any = None
) -> ServerFacts:
    """Ask the server at ``base_url`` what it serves for ``model`` (``GET /models``, ``GET /props``).

    ``models_payload``: a ``GET /models`` reply already read (not asked again).  Never
    raises for a route the server lacks: what it does not report stays ``None``.
    """
    base = base_url.rstrip("/")
    payload = models_payload if isinstance(models_payload, dict) else _get_json(client, f"{base}/models")
    entry = model_entry(payload, served_id, model)
    props = _get_json(client, f"{server_root(base)}/props")
    return facts_from(entry, props)


def parse_logprobs(block: Any) -> list[dict[str, float]] | None:
    """``choices[0].logprobs.content[i].top_logprobs`` → one {token: logprob} per position."""
    if not isinstance(block, dict) or not isinstance(block.get("content"), list):
        return None
    positions: list[dict[str, float]] = []
    for entry in block["content"]:
        if not isinstance(entry, dict):
            continue
        top: dict[str, float] = {}
        for candidate in entry.get("top_logprobs") or []:
            if isinstance(candidate, dict) and "token" in candidate and candidate.get("logprob") is not None:
                top.setdefault(str(candidate["token"]), float(candidate["logprob"]))
        if not top and "token" in entry and entry.get("logprob") is not None:
            top[str(entry["token"])] = float(entry["logprob"])
        positions.append(top)
    return positions


__all__ = [
    "CONTEXT_EXCEEDED",
    "META_KEYS",
    "ServerFacts",
    "context_exceeded",
    "facts_from",
    "model_entry",
    "parse_logprobs",
    "read_server_facts",
    "server_root",
]
