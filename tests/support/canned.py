"""Canned, valid agent replies for an OpenAI-shaped loopback server (control flow only).

``canned_reply(body)`` reads the JSON schema the ``openai`` backend sent in
``response_format`` and answers like the instant test double: one
``search_database`` action while the search tool is offered and no results have
been shown yet, then ``ready_to_answer``, then the answer ``alpha``.  Used as
``FaultServer(reply=canned_reply)`` where a test or benchmark needs a server that
drives the BCAS loop to completion without a model.
"""

from __future__ import annotations

import json
from typing import Any

ANSWER = "alpha"


def _schema(body: dict[str, Any]) -> dict[str, Any]:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema") or {}
    return fmt.get("schema") or {}


def canned_reply(body: dict[str, Any]) -> str:
    props = _schema(body).get("properties", {})
    messages = body.get("messages") or []
    prompt = " ".join(str(m.get("content", "")) for m in messages)
    if "action" in props:
        tools = props["action"].get("enum", [])
        if "search_database" in tools and "Search results" not in prompt:
            last_user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
            return json.dumps({"thought": "look it up", "action": "search_database", "query": last_user[-80:]})
        return json.dumps({"thought": "done", "action": "ready_to_answer", "query": ""})
    if "answer" in props:
        return json.dumps({"answer": ANSWER})
    return ANSWER
