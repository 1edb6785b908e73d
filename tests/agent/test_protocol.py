"""Action parsing (tolerant text, JSON) and the per-turn JSON schemas."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcas.agent.protocol import (
    ANSWER_TOOL,
    SEARCH_TOOL,
    TOOLS,
    Action,
    ActionParseError,
    action_schema,
    answer_schema,
    canonical_tool,
    parse_action,
    parse_answer,
    parse_json_action,
    parse_text_action,
)


@pytest.mark.parametrize(
    ("text", "tool", "query"),
    [
        ("Thought: need the author\nAction: search_database\nQuery: Hamlet author", SEARCH_TOOL, "Hamlet author"),
        (
            'thought: x\naction: SEARCH_DATABASE\nquery: "Kiss and Tell 1945 film"',
            SEARCH_TOOL,
            "Kiss and Tell 1945 film",
        ),
        ('Action: search_database("Shirley Temple")', SEARCH_TOOL, "Shirley Temple"),
        ("Action: search_database(query='Shirley Temple')", SEARCH_TOOL, "Shirley Temple"),
        ("Action: Search Database: Corliss Archer", SEARCH_TOOL, "Corliss Archer"),
        ("**Thought:** fine\n**Action:** `ready_to_answer`", ANSWER_TOOL, ""),
        ("Action: Ready to answer.", ANSWER_TOOL, ""),
        ("I have enough. Action: ready_to_answer", ANSWER_TOOL, ""),
        ("Sure! Let me look. search_database(Meet Corliss Archer) would help.", SEARCH_TOOL, "Meet Corliss Archer"),
        ('Here you go: {"thought": "t", "action": "search_database", "query": "x y"} done', SEARCH_TOOL, "x y"),
        ("Thought: I know it.\nFinal answer: Chief of Protocol", ANSWER_TOOL, ""),
    ],
)
def test_text_parser_is_tolerant(text: str, tool: str, query: str) -> None:
    action = parse_text_action(text, TOOLS)
    assert action.tool == tool
    assert action.query == query


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("I am not sure what to do here.", "no 'Action:' line"),
        ("Action: dance", "unknown action"),
        ("Action: search_database\nQuery:", "non-empty query"),
        ("search_database(a) or ready_to_answer", "more than one action"),
    ],
)
def test_text_parser_rejects_what_it_cannot_use(text: str, reason: str) -> None:
    with pytest.raises(ActionParseError, match=reason):
        parse_text_action(text, TOOLS)


def test_tool_not_offered_this_turn_is_invalid() -> None:
    with pytest.raises(ActionParseError, match="not available this turn"):
        parse_text_action("Action: search_database\nQuery: x", [ANSWER_TOOL])
    with pytest.raises(ActionParseError, match="not available this turn"):
        parse_json_action('{"thought": "", "action": "search_database", "query": "x"}', [ANSWER_TOOL])


def test_json_parser() -> None:
    action = parse_json_action('{"thought": "look up", "action": "search_database", "query": " Hamlet "}', TOOLS)
    assert (action.tool, action.query, action.thought) == (SEARCH_TOOL, "Hamlet", "look up")
    ready = parse_json_action('{"thought": "ok", "action": "ready_to_answer", "query": "ignored"}', TOOLS)
    assert ready.tool == ANSWER_TOOL and ready.query == ""
    for bad, reason in [
        ('{"thought": "cut off', "not a complete JSON object"),
        ('{"thought": "x"}', 'no "action"'),
        ("", "empty"),
        ('["search_database"]', "not a complete JSON object"),
    ]:
        with pytest.raises(ActionParseError, match=reason):
            parse_json_action(bad, TOOLS)


def test_parse_action_dispatches_on_format() -> None:
    assert parse_action("Action: ready_to_answer", TOOLS, "text").tool == ANSWER_TOOL
    with pytest.raises(ActionParseError):
        parse_action("Action: ready_to_answer", TOOLS, "json")
    with pytest.raises(ValueError, match="unknown action format"):
        parse_action("x", TOOLS, "xml")


def test_action_schema_lists_only_offered_tools() -> None:
    both = action_schema(TOOLS)
    assert both["properties"]["action"]["enum"] == [SEARCH_TOOL, ANSWER_TOOL]
    only_answer = action_schema([ANSWER_TOOL])
    assert only_answer["properties"]["action"]["enum"] == [ANSWER_TOOL]
    assert SEARCH_TOOL not in json.dumps(only_answer)
    assert set(both["required"]) == {"thought", "action", "query"}
    with pytest.raises(ValueError):
        action_schema([])
    with pytest.raises(ValueError):
        action_schema(["rm_rf"])
    assert answer_schema()["required"] == ["answer"]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ('{"answer": "Chief of Protocol"}', "Chief of Protocol"),
        ('{"answer": 1945}', "1945"),
        ('{"answer": "Chief of Pro', "Chief of Pro"),
        ("Answer: Shirley Temple\nBecause she...", "Shirley Temple"),
        ("The final answer is: yes", "yes"),
        ('"Paris"', "Paris"),
        ("  \n  Paris is the capital", "Paris is the capital"),
        ("", ""),
    ],
)
def test_parse_answer(text: str, answer: str) -> None:
    assert parse_answer(text) == answer


def test_canonical_tool_names() -> None:
    assert canonical_tool("Search_Database") == SEARCH_TOOL
    assert canonical_tool("READY TO ANSWER") == ANSWER_TOOL
    assert canonical_tool("delete_everything") is None


# Queries and thoughts drawn from words without quotes, braces, colons, underscores or
# newlines, so that no generated field can read as another field or a second action.
_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-,.?", min_size=1, max_size=12)
_words = st.lists(_word, min_size=1, max_size=8).map(" ".join)
_tool = st.sampled_from(TOOLS)


@st.composite
def rendered_actions(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(text, format, tool, query): an action written in one of the ways models write one."""
    tool, query, thought = draw(_tool), draw(_words), draw(_words)
    fmt = draw(st.sampled_from(["json", "text"]))
    if fmt == "json":
        obj = {"thought": thought, "action": tool, "query": query}
        keys = draw(st.permutations(list(obj)))
        text = json.dumps({k: obj[k] for k in keys}, indent=draw(st.sampled_from([None, 2])))
    else:
        name = draw(st.sampled_from([tool, tool.upper(), tool.replace("_", " ").title()]))
        text = f"Thought: {thought}\nAction: {name}\n" + (f"Query: {query}" if tool == SEARCH_TOOL else "")
    return text, fmt, tool, query if tool == SEARCH_TOOL else ""


def check_round_trip(parse, text: str, fmt: str, tool: str, query: str) -> None:  # noqa: ANN001
    action = parse(text, TOOLS, fmt)
    assert action.tool == tool, (text, action)
    assert action.query == query.strip(), (text, action)


@given(rendered_actions())
def test_rendered_actions_parse_back_to_tool_and_query(case: tuple[str, str, str, str]) -> None:
    """Every generated action parses (100 of 100 examples) to the tool and query written.

    Catches a parser that loses or rewrites the query (case, truncation, a field read
    from the thought), mistakes the tool, or depends on the order of the JSON keys.
    """
    check_round_trip(parse_action, *case)


def test_round_trip_check_catches_a_broken_parser() -> None:
    """Mutation check: a parser that lower-cases queries, or reads the thought as the
    query, fails the round trip."""
    text = '{"thought": "find it", "action": "search_database", "query": "Corliss Archer"}'
    check_round_trip(parse_action, text, "json", SEARCH_TOOL, "Corliss Archer")

    def lowercasing(t: str, tools: object, f: str) -> Action:
        a = parse_action(t, TOOLS, f)
        return Action(a.tool, a.query.lower(), a.thought)

    def thought_as_query(t: str, tools: object, f: str) -> Action:
        a = parse_action(t, TOOLS, f)
        return Action(a.tool, a.thought, a.thought)

    for broken in (lowercasing, thought_as_query):
        with pytest.raises(AssertionError):
            check_round_trip(broken, text, "json", SEARCH_TOOL, "Corliss Archer")


@given(
    st.one_of(
        st.text(max_size=300),
        rendered_actions().map(lambda case: case[0]),
        st.tuples(st.text(max_size=40), rendered_actions(), st.text(max_size=40), st.integers(0, 400)).map(
            lambda parts: (parts[0] + parts[1][0] + parts[2])[: parts[3]]  # noise around it, possibly cut off
        ),
    )
)
def test_parsers_never_crash_on_arbitrary_text(text: str) -> None:
    """Arbitrary text, actions, and actions in noise or cut short: a usable Action or an
    ActionParseError with a reason, never another exception; a search always has a query."""
    for fmt in ("json", "text"):
        try:
            action = parse_action(text, TOOLS, fmt)
        except ActionParseError as exc:
            assert exc.reason
        else:
            assert action.tool in TOOLS
            assert action.tool != SEARCH_TOOL or action.query
            assert action.query == action.query.strip()
    assert isinstance(parse_answer(text), str)


def test_cut_off_json_keeps_an_action_whose_fields_were_complete() -> None:
    cut = '{ "action": "search_database", "query": "Candy Coburn" ,"thought": "You have to find a na'
    assert parse_json_action(cut, TOOLS) == Action(SEARCH_TOOL, "Candy Coburn", "")
    assert parse_json_action('{"action": "ready_to_answer", "query": "x', TOOLS).tool == ANSWER_TOOL
    for unusable in (
        '{"action": "search_database", "query": "Candy Co',
        '{"thought": "first I',
        '{"action": "search_da',
    ):
        with pytest.raises(ActionParseError, match="not a complete JSON object"):
            parse_json_action(unusable, TOOLS)
    with pytest.raises(ActionParseError, match="not available this turn"):
        parse_json_action(cut, [ANSWER_TOOL])
