"""Preflight of an OpenAI-compatible endpoint before any case runs.

A run against a user's own server should fail in seconds, with the cause, when the
server is not there, refuses the key or does not serve the model -- not after every
item has retried for a while.  :func:`preflight` makes three requests:

1. ``GET {base_url}/models`` (with the API key, if any): the names the server serves.
2. ``POST {base_url}/chat/completions`` with ``max_tokens=1`` for the requested model.
3. ``GET /props`` beside ``/v1`` (llama.cpp's server): what it serves; a server without
   the route is not at fault.

Outcomes:

* the chat request succeeds and the name is listed: fine;
* it succeeds but the name is not listed (llama.cpp's server answers any name with its
  one model): a warning, returned in :attr:`PreflightResult.warnings`;
* it is refused with HTTP 404 (vLLM answers an unknown name so): :class:`PreflightError`
  listing what the server serves;
* anything else -- connection refused, a timeout, HTTP 401/403, a malformed reply --
  :class:`PreflightError` naming the URL, the model and the cause.  A 401/403 names the
  environment variable that holds the key, never the key itself, and every server
  message is redacted of the key before it is shown.

Off the ledger: the 1-token chat request of step 2 (one per server, so two in a session
whose judge is served apart from the model) answers no item and is on no record, so
no summary, price or per-query call count includes it; it costs a 3-word prompt and at
most one completion token per server (``docs/fidelity.md``).

The result also carries what identifies the served model (:mod:`bcas.llm.served`): the
id the server reports for it, what ``/models`` and ``/props`` report about it (model
path, ``root``, weights, chat template, context length) and the ``system_fingerprint``
of the chat answer when the server gives one.  :attr:`PreflightResult.fingerprint` is
the model's identity made of them; :attr:`PreflightResult.context_window` its context
length (``None`` when the server does not say).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bcas.identity import server_fingerprint
from bcas.keys import key_name_problem
from bcas.llm.replies import server_message
from bcas.llm.served import ServerFacts, read_server_facts

DEFAULT_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 5.0
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
TRANSIENT_ATTEMPTS = 3


class PreflightError(RuntimeError):
    """An endpoint cannot serve the run; the message names URL, model and cause."""


@dataclass
class PreflightResult:
    base_url: str
    model: str
    served: list[str] = field(default_factory=list)
    served_id: str | None = None
    system_fingerprint: str | None = None
    warnings: list[str] = field(default_factory=list)
    facts: ServerFacts = field(default_factory=ServerFacts)

    @property
    def context_window(self) -> int | None:
        return self.facts.context_window

    @property
    def served_name(self) -> str | None:
        """The served model's own name (:meth:`ServerFacts.name`): a GGUF's file name, vLLM's ``root``."""
        return self.facts.name(self.served_id)

    @property
    def fingerprint(self) -> str:
        """The served model's identity (:func:`bcas.identity.server_fingerprint`)."""
        return server_fingerprint(self.served_id or self.model, self.system_fingerprint, self.facts.identity())

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "served": list(self.served),
            "served_id": self.served_id,
            "served_name": self.served_name,
            "system_fingerprint": self.system_fingerprint,
            "facts": self.facts.to_dict(),
            "context_window": self.context_window,
            "fingerprint": self.fingerprint,
            "warnings": list(self.warnings),
        }


def _transport_cause(exc: Exception) -> str:
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if "refused" in text or "errno 111" in text:
            return "connection refused (is the server running on that port?)"
        return f"cannot connect ({exc})"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"


def preflight(
    base_url: str,
    model: str,
    *,
    api_key_env: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    transport: httpx.BaseTransport | None = None,
) -> PreflightResult:
    """Check that ``base_url`` serves ``model``; raise :class:`PreflightError` if not."""
    base = base_url.rstrip("/")
    key: str | None = None
    if api_key_env:
        problem = key_name_problem(api_key_env)
        if problem is not None:  # a key given in place of its variable's name: never repeated
            raise PreflightError(f"{base}: api_key_env: the value {problem}")
        key = os.environ.get(api_key_env)
        if not key:
            raise PreflightError(f"{base}: model {model!r}: the API key variable {api_key_env} is not set or empty")
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    check = _Check(base, model, key, api_key_env)

    result = PreflightResult(base_url=base, model=model)
    limits = httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT_S, timeout))
    with httpx.Client(timeout=limits, headers=headers, transport=transport) as client:
        listing = _served_models(client, check)
        result.served = _model_names(listing)
        payload = _one_token_answer(client, check, result.served)
        result.served_id = str(payload.get("model") or model)
        fingerprint = payload.get("system_fingerprint")
        result.system_fingerprint = str(fingerprint) if fingerprint else None
        result.facts = read_server_facts(client, base, model, result.served_id, listing)
    if result.served and model not in result.served:
        result.warnings.append(
            f"{base} lists {', '.join(result.served)} but not {model!r}, and answered for it anyway "
            f"(llama.cpp's server does this): the answers come from the model it serves, {result.served_name}, "
            "named beside it in the summary, the report and run.json"
        )
    return result


@dataclass(frozen=True)
class _Check:
    """The endpoint under check: builds its errors, naming URL and model, with the key redacted."""

    base: str
    model: str
    key: str | None
    api_key_env: str | None

    def fail(self, cause: str) -> PreflightError:
        text = f"{self.base}: model {self.model!r}: {cause}"
        return PreflightError(text.replace(self.key, "***") if self.key else text)

    def refused(self, response: httpx.Response) -> PreflightError:
        """HTTP 401/403: names the variable that holds the key (never the key) and the server's message."""
        where = f"the key in ${self.api_key_env}" if self.api_key_env else "no API key was given (--bcas-api-key-env)"
        return self.fail(f"HTTP {response.status_code} (not authorised: {where}): {_server_text(response)}")


def _server_text(response: httpx.Response) -> str:
    return server_message(response, limit=300)


def _served_models(client: httpx.Client, check: _Check) -> dict[str, Any]:
    """Step 1: the reply to ``GET /models`` (an empty list when the gateway has no such route)."""
    try:
        response = client.get(f"{check.base}/models")
    except httpx.HTTPError as exc:
        raise check.fail(_transport_cause(exc)) from None
    if response.status_code in (401, 403):
        raise check.refused(response)
    if response.status_code == 404:  # some gateways have no /models route: the chat request decides
        return {"data": []}
    if response.status_code != 200:
        raise check.fail(f"GET /models answered HTTP {response.status_code}: {_server_text(response)}")
    try:
        payload = response.json()
    except ValueError as exc:
        raise check.fail(f"malformed reply to GET /models ({exc}): {response.text[:200]!r}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise check.fail(f"malformed reply to GET /models (no 'data' list): {response.text[:200]!r}")
    return payload


def _model_names(listing: dict[str, Any]) -> list[str]:
    """The model names a ``GET /models`` reply lists."""
    return [str(m.get("id")) for m in listing["data"] if isinstance(m, dict) and m.get("id") is not None]


def _one_token_answer(client: httpx.Client, check: _Check, served: list[str]) -> dict[str, Any]:
    """Step 2: one 1-token chat request for the model; its reply, or the error that says why not."""
    body = {
        "model": check.model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "temperature": 0,
    }
    # A transient 5xx/429 is asked again (twice at most, after 0.5 s and 1 s), a refused
    # connection or a timeout is not.
    for attempt in range(TRANSIENT_ATTEMPTS):
        try:
            response = client.post(f"{check.base}/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise check.fail(_transport_cause(exc)) from None
        if response.status_code not in TRANSIENT_STATUS or attempt == TRANSIENT_ATTEMPTS - 1:
            break
        time.sleep(0.5 * 2**attempt)
    status = response.status_code
    if status in (401, 403):
        raise check.refused(response)
    if status == 404:
        listed = ", ".join(served) if served else "(it lists none)"
        raise check.fail(
            f"the server does not serve this model (HTTP 404: {_server_text(response)}); it serves: {listed}"
        )
    if status >= 400:
        raise check.fail(f"a 1-token request answered HTTP {status}: {_server_text(response)}")
    try:
        payload = response.json()
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError("no choices")
    except ValueError as exc:
        raise check.fail(f"malformed reply to a 1-token request ({exc}): {response.text[:200]!r}") from None
    return dict(payload)


__all__ = ["PreflightError", "PreflightResult", "preflight"]
