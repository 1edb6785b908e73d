"""The agent's action protocol: tools, JSON schemas and tolerant parsing (BCAS §3.1, §3.4).

Tools are described to the model in plain language (model-agnostic design, BCAS
§3.1).  Three action formats, chosen by ``AgentConfig.action_format``:

* ``"json"``: the model writes ``{"thought": ..., "action": ..., "query": ...}``.
  Where the backend supports structured output the request carries
  :func:`action_schema`, whose ``action`` enum lists only the tools offered this
  turn, so a constrained model cannot even spell a tool that is not available.
* ``"text"``: the model writes ``Thought: ...`` / ``Action: ...`` / ``Query: ...``
  lines.  Parsing is tolerant: case, quotes, markdown, call syntax
  (``search_database("x")``), a JSON object inside the text and extra prose are
  all accepted.
* ``"tools"``: native tool calling.  The turn's tools go to the model as function
  definitions (:func:`tool_definitions`, the same descriptions as the other formats;
  the query's length capped as in :func:`action_schema`) and the model's one function
  call is the action (:func:`parse_tool_call`).  Nothing is tolerated here: no call,
  several calls, an unknown function or arguments that are not the function's
  parameters make an invalid turn, whose reason the model is told.

The final answer is a short string; with ``constrained_answer`` the answer call
carries :func:`answer_schema` (``{"answer": "..."}``, with ``AgentConfig.cite`` also a
bounded ``cite`` list read by :func:`parse_cite`), so exact match is not lost to
verbosity.  With ``AgentConfig.abstain`` the action turns also offer ``abstain``.  Parsing never executes anything: model output is only ever read as text
or JSON data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bcas.config import DEFAULT_THOUGHT_CHARS, THOUGHT_CHARS_LIMIT
from bcas.llm.base import ToolCall
from bcas.llm.tool_calls import function_definition

SEARCH_TOOL = "search_database"
ANSWER_TOOL = "ready_to_answer"
ABSTAIN_TOOL = "abstain"  # offered only with AgentConfig.abstain
TOOLS = (SEARCH_TOOL, ANSWER_TOOL)  # the paper's two tools (BCAS §3.1)
KNOWN_TOOLS = (*TOOLS, ABSTAIN_TOOL)  # with the optional ones
ABSTAINED = "abstain"  # the prediction of an abstained trajectory: a decline (bcas.grading.abstention)

# Field caps of the constrained formats.  They are bounded by constants, never allowed
# to grow with the budget: llama.cpp turns a string's maxLength into nested grammar
# rules (about one per character), so a cap that grew with a 16K-token budget gave
# grammars of thousands of rules that crashed the native library.  The query is a
# keyword query (at most QUERY_MAX_CHARS); the thought is unbounded by default (a plain
# string, one constant rule: AgentConfig.thought_max_chars=None), or capped at a constant
# (THOUGHT_MAX_CHARS under the guarded rules).  A turn allowed fewer tokens than both need gets smaller
# caps that fit its allowance (field_caps), so a constrained reply still completes
# before the allowance runs out.
THOUGHT_MAX_CHARS = DEFAULT_THOUGHT_CHARS  # AgentConfig.thought_max_chars
QUERY_MAX_CHARS = 256
ANSWER_MAX_CHARS = 80
QUERY_SHARE = 0.4
JSON_OVERHEAD_TOKENS = 24
CHARS_PER_TOKEN = 2
MIN_FIELD_CHARS = 8
# Citations (AgentConfig.cite): at most CITE_MAX_ITEMS ids.  The schema lists the ids of
# the passages shown (an enum: a constrained model cites only those) while there are at
# most CITE_ENUM_MAX of them, else any id of at most CITE_ID_MAX_CHARS characters; both
# keep the grammar bounded.
CITE_MAX_ITEMS = 5
CITE_ENUM_MAX = 64
CITE_ID_MAX_CHARS = 64
# Caps applied when reading free text (the text format is not decoded under a grammar).
_QUERY_READ_CHARS = 500
_ANSWER_READ_CHARS = 200

# Normalised spellings (letters only, lower case) accepted for each tool.
_TOOL_ALIASES = {
    SEARCH_TOOL: ("searchdatabase", "search", "searchthedatabase", "databasesearch", "searchdb"),
    ANSWER_TOOL: ("readytoanswer", "ready", "answer", "finalanswer", "finish", "readyanswer"),
    ABSTAIN_TOOL: ("abstain", "decline", "giveup", "noanswer"),
}


class ActionParseError(ValueError):
    """A turn's output is not a valid action; ``reason`` is shown to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Action:
    tool: str
    query: str = ""
    thought: str = ""


# -- schemas ---------------------------------------------------------------------------


def field_caps(max_tokens: int | None, thought_max: int | None = THOUGHT_MAX_CHARS) -> tuple[int | None, int]:
    """``(thought, query)`` character caps of a JSON action turn of ``max_tokens`` tokens.

    Never above ``thought_max`` (``AgentConfig.thought_max_chars``, default
    ``THOUGHT_MAX_CHARS``) and ``QUERY_MAX_CHARS``, whatever the budget.  A turn
    allowed fewer tokens than those need gets smaller caps: the JSON punctuation, keys
    and action name take about ``JSON_OVERHEAD_TOKENS``; the rest, the *room*, counted
    at a conservative ``CHARS_PER_TOKEN``, goes ``QUERY_SHARE`` to the query and the
    rest to the thought.  ``max_tokens=None`` (no allowance known): the caps.
    ``thought_max=None``: the thought is unbounded (``None``) while the allowance has
    room for more than ``THOUGHT_CHARS_LIMIT`` characters of it; a smaller allowance
    (the last turns of a budget, a per-turn cap) caps it to fit, so the reply still
    reaches its action instead of being cut off inside the thought.  Either way the
    grammar is bounded by a constant: one rule for a plain string, or a cap of at most
    ``THOUGHT_CHARS_LIMIT`` characters.
    """
    if max_tokens is None:
        return thought_max, QUERY_MAX_CHARS
    room = max(0, max_tokens - JSON_OVERHEAD_TOKENS) * CHARS_PER_TOKEN
    query = min(QUERY_MAX_CHARS, max(MIN_FIELD_CHARS, int(room * QUERY_SHARE)))
    fits = max(MIN_FIELD_CHARS, room - query)
    if thought_max is None:
        return (fits if fits <= THOUGHT_CHARS_LIMIT else None), query
    return min(thought_max, fits), query


def action_schema(
    tools: Sequence[str], max_tokens: int | None = None, thought_max: int | None = THOUGHT_MAX_CHARS
) -> dict[str, Any]:
    """JSON schema of one action turn offering exactly ``tools``.

    ``max_tokens``: the turn's token cap; the string fields are capped to fit it,
    never above the fixed caps (:func:`field_caps`), so the schema, and the grammar
    a backend compiles from it, is bounded whatever the budget.
    """
    unknown = [t for t in tools if t not in KNOWN_TOOLS]
    if unknown or not tools:
        raise ValueError(f"tools must be a non-empty subset of {KNOWN_TOOLS}, got {list(tools)}")
    thought_chars, query_chars = field_caps(max_tokens, thought_max)
    thought: dict[str, Any] = {"type": "string"}
    if thought_chars is not None:
        thought["maxLength"] = thought_chars
    return {
        "type": "object",
        "properties": {
            "thought": thought,
            "action": {"type": "string", "enum": list(tools)},
            "query": {"type": "string", "maxLength": query_chars},
        },
        "required": ["thought", "action", "query"],
        "additionalProperties": False,
    }


def tool_definitions(descriptions: dict[str, str], max_tokens: int | None = None) -> tuple[dict[str, Any], ...]:
    """Function definitions of one ``tools``-format turn: ``descriptions`` maps each offered tool to its text.

    ``search_database`` takes one ``query`` string, capped like the JSON format's query
    (:func:`field_caps` for a turn of ``max_tokens``), so a backend that decodes the
    arguments under their schema (llama.cpp) writes a bounded call; ``ready_to_answer``
    takes no arguments.
    """
    unknown = [t for t in descriptions if t not in KNOWN_TOOLS]
    if unknown or not descriptions:
        raise ValueError(f"tools must be a non-empty subset of {KNOWN_TOOLS}, got {list(descriptions)}")
    _, query_chars = field_caps(max_tokens, None)
    parameters = {
        SEARCH_TOOL: {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "a short keyword query", "maxLength": query_chars}
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        ANSWER_TOOL: {"type": "object", "properties": {}, "additionalProperties": False},
        ABSTAIN_TOOL: {"type": "object", "properties": {}, "additionalProperties": False},
    }
    # The descriptions may be the other formats' tool lines ("- search_database: ..."): the name goes.
    texts = {t: re.sub(rf"^\s*-?\s*{t}\s*:\s*", "", text.strip()) for t, text in descriptions.items()}
    return tuple(function_definition(t, text, parameters[t]) for t, text in texts.items())


def answer_schema(max_tokens: int | None = None, cite_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """JSON schema of the final answer: one short ``answer`` string (fitting ``max_tokens``).

    ``cite_ids`` (``AgentConfig.cite``: the ids of the passages shown) adds a ``cite``
    list of them (:data:`CITE_ENUM_MAX` says when any bounded id is allowed instead);
    with no passage shown there is nothing to cite and no ``cite`` key.  The answer
    then gets at most half of the ``max_tokens`` room, and the list as many ids (at
    least 1, at most ``CITE_MAX_ITEMS``) as fit the rest at ``CHARS_PER_TOKEN``, each
    counted as the longest id the list allows (the longest shown, or any id of
    ``CITE_ID_MAX_CHARS`` when they are too many for an enum), so the object can close
    within the allowance.
    """
    room = None if max_tokens is None else max_tokens - 8
    ids = list(dict.fromkeys(cite_ids or ()))
    items = CITE_MAX_ITEMS
    if ids and room is not None:
        # the longest id the list allows: the longest shown (an enum), else any id of the cap
        widest = max(len(i) for i in ids) if len(ids) <= CITE_ENUM_MAX else CITE_ID_MAX_CHARS
        per_id = -(-widest // CHARS_PER_TOKEN) + 2  # quotes, comma
        answer_room = min(ANSWER_MAX_CHARS // CHARS_PER_TOKEN, room // 2)
        items = max(1, min(CITE_MAX_ITEMS, (room - answer_room - 6) // per_id))
        room = answer_room
    chars = ANSWER_MAX_CHARS
    if room is not None:
        chars = min(ANSWER_MAX_CHARS, max(MIN_FIELD_CHARS, room * CHARS_PER_TOKEN))
    properties: dict[str, Any] = {"answer": {"type": "string", "maxLength": chars}}
    if ids:
        item: dict[str, Any] = {"type": "string", "maxLength": CITE_ID_MAX_CHARS}
        if len(ids) <= CITE_ENUM_MAX:
            item = {"type": "string", "enum": ids}
        properties["cite"] = {"type": "array", "items": item, "maxItems": items}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# -- helpers ---------------------------------------------------------------------------


def canonical_tool(name: str) -> str | None:
    """The tool a spelling refers to (``"Search Database"`` -> ``search_database``), or ``None``."""
    key = re.sub(r"[^a-z]", "", name.lower())
    for tool, aliases in _TOOL_ALIASES.items():
        if key in aliases:
            return tool
    return None


def normalize_query(query: str) -> str:
    """Key under which two queries count as identical: case-folded, single-spaced."""
    return " ".join(query.casefold().split())


def _strip_quotes(text: str) -> str:
    text = text.strip()
    for _ in range(3):
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
            text = text[1:-1].strip()
        elif len(text) >= 2 and text[0] in "\u201c\u2018" and text[-1] in "\u201d\u2019":
            text = text[1:-1].strip()
        else:
            break
    return text


def find_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object embedded in ``text`` (balanced braces), or ``None``."""
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:  # fast path: the whole reply is one object (the constrained case)
            value = json.loads(stripped)
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, dict):
                return value
    start = text.find("{")
    while start != -1:
        depth = 0
        in_string = False
        escaped = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    try:
                        value = json.loads(text[start : i + 1])
                    except json.JSONDecodeError:
                        break
                    if isinstance(value, dict):
                        return value
                    break
        start = text.find("{", start + 1)
    return None


def _field(obj: dict[str, Any], *names: str) -> Any:
    lowered = {str(k).lower(): v for k, v in obj.items()}
    for name in names:
        if name in lowered:
            return lowered[name]
    return None


def _finish(tool: str | None, query: str, thought: str, tools: Sequence[str], raw_tool: str) -> Action:
    if tool is None:
        offered = " or ".join(tools)
        raise ActionParseError(f"unknown action {raw_tool!r}; choose {offered}")
    if tool not in tools:
        raise ActionParseError(f"{tool} is not available this turn; choose {' or '.join(tools)}")
    query = _strip_quotes(query)[:_QUERY_READ_CHARS].strip()
    if tool == SEARCH_TOOL and not query:
        raise ActionParseError(f"{SEARCH_TOOL} needs a non-empty query")
    return Action(tool=tool, query=query if tool == SEARCH_TOOL else "", thought=thought.strip())


# -- action parsing --------------------------------------------------------------------


_COMPLETE_STRING = r'"{key}"\s*:\s*"(?P<value>(?:[^"\\]|\\.)*)"'


def salvage_fields(text: str) -> dict[str, str]:
    """The string fields of a JSON object cut off by the token cap that were already complete.

    Only values whose closing quote was written are kept, so a query cut mid-string
    is never used.
    """
    fields: dict[str, str] = {}
    for key in ("action", "query", "thought"):
        match = re.search(_COMPLETE_STRING.format(key=key), text)
        if match:
            try:
                fields[key] = json.loads('"' + match.group("value") + '"')
            except json.JSONDecodeError:
                continue
    return fields


def parse_json_action(text: str, tools: Sequence[str]) -> Action:
    """Read a JSON action (``thought``, ``action``, ``query``) from ``text``.

    A reply cut off by the token cap still yields its action when the ``action``
    field (and, for a search, the ``query`` field) had been written completely: the
    thought is commentary, the tool and its argument are the action.
    """
    obj = find_json_object(text)
    if obj is None:
        stripped = text.strip()
        if not stripped:
            raise ActionParseError("the reply was empty")
        salvaged = salvage_fields(stripped) if stripped.startswith("{") else {}
        tool = canonical_tool(salvaged.get("action", ""))
        if tool == ANSWER_TOOL or (tool == SEARCH_TOOL and salvaged.get("query", "").strip()):
            return _finish(tool, salvaged.get("query", ""), salvaged.get("thought", ""), tools, salvaged["action"])
        raise ActionParseError("the reply is not a complete JSON object")
    raw_tool = _field(obj, "action", "tool", "name", "function")
    if not isinstance(raw_tool, str):
        raise ActionParseError('the JSON object has no "action" string')
    query = _field(obj, "query", "input", "argument", "search_query", "action_input")
    if isinstance(query, dict):
        query = _field(query, "query", "input") or ""
    thought = _field(obj, "thought", "reasoning", "reason")
    return _finish(
        canonical_tool(raw_tool),
        query if isinstance(query, str) else "",
        thought if isinstance(thought, str) else "",
        tools,
        raw_tool,
    )


_ACTION_LINE = re.compile(r"^\s*(?:\d+[.):]\s*)?action\s*(?:input)?\s*[:=]\s*(?P<value>.*)$", re.IGNORECASE)
_QUERY_LINE = re.compile(r"^\s*(?:action\s+input|query|search\s+query|input)\s*[:=]\s*(?P<value>.*)$", re.IGNORECASE)
_THOUGHT = re.compile(r"thought\s*[:=]\s*(?P<value>.*?)(?=^\s*action\b|\Z)", re.IGNORECASE | re.DOTALL | re.MULTILINE)
_CALL = re.compile(r"^(?P<name>[A-Za-z_ ]+?)\s*(?:\((?P<arg>.*)\)|:\s*(?P<arg2>.+)|\[(?P<arg3>.*)\])?\s*$", re.DOTALL)
_BARE_CALL = re.compile(r"\b(?P<name>search_database|ready_to_answer)\b\s*(?:\((?P<arg>[^)]*)\))?", re.IGNORECASE)


def parse_text_action(text: str, tools: Sequence[str]) -> Action:
    """Read a plain-text action, tolerating case, quotes, markdown and extra text."""
    if not text.strip():
        raise ActionParseError("the reply was empty")
    clean = text.replace("**", "").replace("__", "").replace("`", "")
    if "{" in clean:
        try:
            return parse_json_action(clean, tools)
        except ActionParseError:
            pass
    lines = clean.splitlines()
    thought_match = _THOUGHT.search(clean)
    thought = thought_match.group("value") if thought_match else ""
    action_value: str | None = None
    query = ""
    for line in lines:
        if action_value is None:
            m = _ACTION_LINE.match(line)
            if m and not re.match(r"^\s*action\s+input", line, re.IGNORECASE):
                action_value = m.group("value").strip()
                continue
        m = _QUERY_LINE.match(line)
        if m and not query:
            query = m.group("value").strip()
    if action_value is not None:
        value = _strip_quotes(action_value.strip().rstrip("."))
        call = _CALL.match(value)
        if call:
            name = call.group("name")
            arg = call.group("arg") or call.group("arg2") or call.group("arg3") or ""
            tool = canonical_tool(name)
            if tool is not None:
                if arg.strip():
                    arg_clean = re.sub(r"^\s*query\s*=\s*", "", arg.strip(), flags=re.IGNORECASE)
                    query = arg_clean
                return _finish(tool, query, thought, tools, name)
        tool = canonical_tool(value)
        return _finish(tool, query, thought, tools, value)
    # No "Action:" line: accept a single unambiguous tool call anywhere in the text.
    calls = list(_BARE_CALL.finditer(clean))
    named = {canonical_tool(c.group("name")) for c in calls}
    if len(named) == 1:
        call = calls[0]
        tool = canonical_tool(call.group("name"))
        arg = call.group("arg") or query
        return _finish(tool, arg or "", thought, tools, call.group("name"))
    if re.search(r"^\s*(?:final\s+)?answer\s*:", clean, re.IGNORECASE | re.MULTILINE) and ANSWER_TOOL in tools:
        return Action(tool=ANSWER_TOOL, thought=thought.strip())
    if len(named) > 1:
        raise ActionParseError("the reply names more than one action; give exactly one Action line")
    raise ActionParseError("no 'Action:' line was found")


def parse_tool_call(calls: Sequence[ToolCall], tools: Sequence[str], content: str = "") -> Action:
    """The action of a ``tools``-format turn: exactly one call of an offered function with valid arguments.

    ``content``: text the model wrote beside the call, kept as the thought.
    """
    offered = " or ".join(tools)
    if not calls:
        raise ActionParseError(f"the reply called no function; call exactly one of {offered}")
    if len(calls) > 1:
        raise ActionParseError(f"the reply made {len(calls)} function calls; call exactly one function per turn")
    call = calls[0]
    if call.name not in KNOWN_TOOLS:
        raise ActionParseError(f"there is no function {call.name[:60]!r}; call {offered}")
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        raise ActionParseError(f"the arguments of {call.name} are not valid JSON") from None
    if not isinstance(arguments, dict):
        raise ActionParseError(f"the arguments of {call.name} must be a JSON object")
    query = arguments.get("query", "")
    if call.name == SEARCH_TOOL and not (isinstance(query, str) and query.strip()):
        raise ActionParseError(f'{SEARCH_TOOL} needs a non-empty "query" string argument')
    return _finish(call.name, query if isinstance(query, str) else "", content, tools, call.name)


def parse_action(text: str, tools: Sequence[str], action_format: str, calls: Sequence[ToolCall] = ()) -> Action:
    """Parse one action turn in the configured format (``"json"``, ``"text"`` or ``"tools"``: ``calls``)."""
    if action_format == "json":
        return parse_json_action(text, tools)
    if action_format == "text":
        return parse_text_action(text, tools)
    if action_format == "tools":
        return parse_tool_call(calls, tools, text)
    raise ValueError(f"unknown action format {action_format!r}")


# -- answers ---------------------------------------------------------------------------

_ANSWER_LINE = re.compile(
    r"^\s*(?:the\s+)?(?:final\s+|short\s+)?answer\s*(?:is)?\s*[:=]\s*(?P<value>.+)$", re.IGNORECASE
)


def parse_answer(text: str) -> str:
    """The short answer in a final-answer reply (JSON ``answer`` field or free text).

    JSON first (also when truncated: the text of an unterminated ``"answer": "..."``
    string is kept); then an ``Answer:`` line; then the first non-empty line.
    Returns ``""`` when nothing usable is there.
    """
    obj = find_json_object(text)
    if obj is not None:
        value = _field(obj, "answer", "final_answer", "short_answer")
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return _clean_answer(str(value))
    partial = re.search(r'"answer"\s*:\s*"(?P<value>(?:[^"\\]|\\.)*)', text)
    if partial:
        try:
            return _clean_answer(json.loads('"' + partial.group("value") + '"'))
        except json.JSONDecodeError:
            return _clean_answer(partial.group("value"))
    clean = text.replace("**", "").replace("`", "")
    for line in clean.splitlines():
        m = _ANSWER_LINE.match(line)
        if m:
            return _clean_answer(m.group("value"))
    for line in clean.splitlines():
        if line.strip() and not line.strip().startswith("{"):
            return _clean_answer(line)
    return ""


_CITE_LINE = re.compile(r"^\s*(?:cite|cites|citations?|sources?|references?)\s*[:=]\s*(?P<value>.*)$", re.IGNORECASE)


def parse_cite(text: str) -> list[str]:
    """The passage ids a final-answer reply cites (``AgentConfig.cite``), at most ``CITE_MAX_ITEMS``.

    The JSON ``cite`` field (a list, or one string) first, else a ``Cite:`` line whose
    ids are separated by commas, semicolons or spaces (brackets and quotes dropped).
    Duplicates are kept once, in order.  Ids are read as text, never resolved here.
    """
    obj = find_json_object(text)
    values: list[str] = []
    raw = _field(obj, "cite", "cites", "citations", "sources") if obj is not None else None
    if isinstance(raw, list):
        values = [str(v) for v in raw if isinstance(v, str | int) and not isinstance(v, bool)]
    elif isinstance(raw, str):
        values = re.split(r"[,;\s]+", raw)
    else:
        for line in text.replace("`", "").splitlines():
            m = _CITE_LINE.match(line)
            if m:
                values = re.split(r"[,;\s]+", m.group("value"))
                break
    ids = [v.strip().strip("[]()\"'.").strip() for v in values]
    return list(dict.fromkeys(i[:_QUERY_READ_CHARS] for i in ids if i))[:CITE_MAX_ITEMS]


def _clean_answer(value: str) -> str:
    value = _strip_quotes(" ".join(value.split()))
    return value[:_ANSWER_READ_CHARS].strip()
