"""Native tool calling in the chat API's form, shared by the backends.

The conversation carries calls and results as the OpenAI chat API does: an assistant
message holds ``tool_calls`` (``{"id", "type": "function", "function": {"name",
"arguments"}}``) and each call is answered by ``{"role": "tool", "tool_call_id": ...,
"content": ...}``.  Servers with a tool-call parser (vLLM ``--tool-call-parser``,
llama.cpp's function-calling chat formats, hosted APIs) take and return exactly that.

Two helpers cover chat templates that do not:

* :func:`tool_results_as_user`: llama-cpp-python's ``chatml-function-calling`` template
  (0.3.x) writes a ``tool`` message's role and drops its content, so the model never
  sees a tool's result.  The embedded backend and ``bcas serve``
  send such results as a user turn wrapped in ``<tool_response>`` tags instead, the
  way Qwen2.5's and Hermes' ChatML templates render them.
* :func:`parse_tool_calls_text`: a model served in process (vLLM's engine, no server
  parser) writes its calls as text; this reads the two common conventions, Hermes/Qwen
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks and a bare JSON
  object ``{"name": ..., "parameters": {...}}`` (Llama 3.x).

Nothing here executes model output: calls are read as JSON data only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from bcas.llm.base import ToolCall

TOOLS_HINT = (
    "the server must parse tool calls (vLLM: --enable-auto-tool-choice --tool-call-parser NAME; llama.cpp: --jinja; "
    "bcas serve: --chat_format chatml-function-calling), or use action_format json or text"
)
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def function_definition(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """One entry of ``ChatRequest.tools``."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def tool_names(tools: Iterable[dict[str, Any]] | None) -> list[str]:
    """The function names of a ``tools`` list."""
    return [str((t.get("function") or {}).get("name") or "") for t in tools or ()]


def assistant_message(content: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The assistant message of a turn that made ``calls`` (``content``: any text written beside them)."""
    return {"role": "assistant", "content": content, "tool_calls": [c.to_dict() for c in calls]}


def tool_message(call: ToolCall, content: str) -> dict[str, Any]:
    """The result of ``call`` as a ``tool`` message."""
    return {"role": "tool", "tool_call_id": call.id, "content": content}


def has_tool_messages(messages: Iterable[dict[str, Any]]) -> bool:
    """Whether a conversation holds tool calls or tool results."""
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def tool_results_as_user(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each ``tool`` message turned into a user turn in ``<tool_response>`` tags.

    Consecutive tool results share one user turn; every other message is kept as it is
    (assistant messages keep their ``tool_calls``, with ``content`` set to ``""`` when it
    was missing or ``None``, which ChatML templates need).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "tool":
            block = f"{TOOL_RESPONSE_OPEN}\n{message.get('content') or ''}\n{TOOL_RESPONSE_CLOSE}"
            if out and out[-1].get("role") == "user" and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_results": True})
            continue
        copy = dict(message)
        if copy.get("role") == "assistant" and copy.get("content") is None:
            copy["content"] = ""
        out.append(copy)
    for message in out:
        message.pop("_tool_results", None)
    return out


def calls_from_message(message: dict[str, Any]) -> tuple[ToolCall, ...]:
    """The tool calls of a chat-completion ``message`` (``tool_calls``, or a legacy ``function_call``)."""
    raw = message.get("tool_calls")
    if isinstance(raw, list) and raw:
        return tuple(ToolCall.from_dict(c) for c in raw if isinstance(c, dict))
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and legacy.get("name"):
        return (ToolCall.from_dict({"id": "call_0", "function": legacy}),)
    return ()


def parse_tool_calls_text(text: str) -> tuple[str, tuple[ToolCall, ...]]:
    """``(content, calls)`` of a reply that writes its calls as text (see the module docstring).

    A ``<tool_call>`` block whose body is not a JSON object with a ``name`` is still a
    call (named by what could be read, arguments as written), so a malformed call is an
    invalid call, never silently plain text.  Call ids are ``call_<n>`` in order.
    """
    blocks = list(_TOOL_CALL_BLOCK.finditer(text))
    calls: list[ToolCall] = []
    if blocks:
        for i, block in enumerate(blocks):
            calls.append(_call_from_json(block.group("body"), i))
        content = _TOOL_CALL_BLOCK.sub("", text).strip()
        return content, tuple(calls)
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return text, ()
        objects = value if isinstance(value, list) else [value]
        if objects and all(isinstance(o, dict) and "name" in o for o in objects):
            return "", tuple(_call_from_object(o, i) for i, o in enumerate(objects))
    return text, ()


def _call_from_json(body: str, index: int) -> ToolCall:
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        name = re.search(r'"name"\s*:\s*"([^"]*)"', body)
        return ToolCall(id=f"call_{index}", name=name.group(1) if name else "", arguments=body)
    if not isinstance(value, dict):
        return ToolCall(id=f"call_{index}", name="", arguments=body)
    return _call_from_object(value, index)


def _call_from_object(obj: dict[str, Any], index: int) -> ToolCall:
    arguments = obj.get("arguments", obj.get("parameters", {}))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=f"call_{index}", name=str(obj.get("name") or ""), arguments=text)


def calls_text(calls: Sequence[ToolCall]) -> str:
    """The calls as one line each, ``name(arguments)``: how a step's output shows them."""
    return "\n".join(f"{c.name}({c.arguments})" for c in calls)


def template_supports_tools(template: str | None) -> bool:
    """Whether a Jinja chat template renders a ``tools`` list (it refers to ``tools``)."""
    return bool(template) and re.search(r"\btools\b", str(template)) is not None
