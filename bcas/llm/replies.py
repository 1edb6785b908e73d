"""What an OpenAI-compatible server's HTTP reply says besides the completion.

The error text it sent (:func:`server_message`, quoted in every error the ``openai``
backend and the preflight raise), the wait a ``Retry-After`` header asks for, whether an
error reply refuses the request's ``response_format`` (the ``openai`` backend then falls
back one schema mode, :mod:`bcas.llm.openai_compat`) and llama.cpp's ``timings``.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import httpx

SCHEMA_REJECT_STATUS = frozenset({400, 422})


def server_timings(timings: Any) -> dict[str, float]:
    """Prompt and decode seconds from llama.cpp's ``timings`` (``prompt_ms``, ``predicted_ms``); {} without them."""
    out: dict[str, float] = {}
    if isinstance(timings, dict):
        for name, key in (("prompt_ms", "prompt_s"), ("predicted_ms", "decode_s")):
            value = timings.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                out[key] = float(value) / 1000.0
    return out


def _rejects_response_format(status: int, message: str) -> bool:
    """Whether an error answer says the server does not accept this ``response_format``.

    A 400/422 must name the response format or the schema (so that, say, a prompt
    that is too long is not mistaken for it); a 500 must be a validation error on
    ``response_format`` (llama-cpp-python's server answers an unknown
    ``response_format.type`` with HTTP 500 and a pydantic validation message).
    """
    lowered = message.lower()
    if status in SCHEMA_REJECT_STATUS:
        return any(word in lowered for word in ("response_format", "json_schema", "schema", "json_object"))
    if status == 500:
        return "response_format" in lowered and "validation" in lowered
    return False


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def server_message(response: httpx.Response, limit: int = 500) -> str:
    """The error text the server sent (OpenAI ``error.message``, FastAPI ``detail``, or the body).

    At most ``limit`` characters.
    """
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:limit] or response.reason_phrase[:limit]
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:limit]
        if isinstance(error, str):
            return error[:limit]
        if "detail" in payload:
            return json.dumps(payload["detail"])[:limit]
        if payload.get("message"):
            return str(payload["message"])[:limit]
    return json.dumps(payload)[:limit]
