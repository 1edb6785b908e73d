"""What a run loses when a trajectory's steps or its citations are read wrongly (BCAS §3.3, §3.4).

Steps are written to ``records.jsonl`` and read back by resume, merge and the report, so a
step must come back as it was written, and a step written before a field existed must
load with that field's documented default.  Citations (``AgentConfig.cite``) are read from
the final answer's reply; an id lost or invented there changes citation precision and
recall.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from bcas.agent.budget import BudgetLedger, Step
from bcas.agent.protocol import (
    ABSTAIN_TOOL,
    ANSWER_TOOL,
    CITE_MAX_ITEMS,
    SEARCH_TOOL,
    TOOLS,
    ActionParseError,
    action_schema,
    answer_schema,
    find_json_object,
    normalize_query,
    parse_cite,
    parse_json_action,
    parse_text_action,
    parse_tool_call,
    tool_definitions,
)
from bcas.config import Budget

FULL = Step(
    kind="search",
    output='{"action": "search_database"}',
    query="capital of France",
    tokens_in=120,
    tokens_out=17,
    max_tokens=300,
    retrieved=("d1#0", "d2#1"),
    docs=("d1", "d2"),
    cached=True,
    latency_s=0.25,
    finish_reason="stop",
    flag="overrun",
    note="reranked",
    calls=3,
    reasoning="think first",
    tokens_reasoning=9,
)


def test_a_step_with_every_field_set_comes_back_from_its_record_unchanged() -> None:
    """Resume and merge read steps from JSON: no field may be dropped, renamed or reset on the way."""
    data = json.loads(json.dumps(FULL.to_dict()))
    assert set(data) == {f for f in Step.__dataclass_fields__}
    assert Step.from_dict(data) == FULL


def test_a_step_written_before_its_newer_fields_existed_loads_with_the_defaults() -> None:
    """An older record has only the kind: its step must count as one call, uncached, with no tokens or flag."""
    old = Step.from_dict({"kind": "search"})
    assert old == Step("search")
    assert (old.calls, old.cached, old.latency_s, old.tokens_in, old.tokens_out, old.max_tokens) == (
        1,
        False,
        0.0,
        0,
        0,
        0,
    )
    ledger = BudgetLedger(Budget(max_searches=2, max_total_tokens=100))
    ledger.record(old)
    assert (ledger.llm_calls, ledger.tokens_out, ledger.searches_used) == (1, 0, 1)


def test_a_step_with_null_fields_loads_as_empty_text_not_as_none() -> None:
    """JSON nulls (a hand-edited or exported record) must not reach the report as ``None`` text."""
    nulls = {
        "kind": "answer",
        "output": None,
        "query": None,
        "retrieved": None,
        "docs": None,
        "finish_reason": None,
        "flag": None,
        "note": None,
        "reasoning": None,
    }
    assert Step.from_dict(nulls) == Step("answer")


@pytest.mark.parametrize(
    ("reply", "ids"),
    [
        ('{"answer": "x", "cite": ["d1", 3, true, null, "d1"]}', ["d1", "3"]),
        ('{"answer": "x", "cite": "a#0, b#1; c#2 d#3"}', ["a#0", "b#1", "c#2", "d#3"]),
        ('{"answer": "x", "Cites": ["a"]}', ["a"]),
        ('{"answer": "x", "citations": ["b"]}', ["b"]),
        ('{"answer": "x", "sources": ["c"]}', ["c"]),
        ('{"answer": "x"}\nCite: d1', ["d1"]),
        ("Answer: x\nCitation: [a], (b).", ["a", "b"]),
        ("Answer: x\nSources = 'x', \"y\"", ["x", "y"]),
        ("Answer: x\nsource: z", ["z"]),
        ("Answer: x\nReferences: r1 r2", ["r1", "r2"]),
        ("Answer: x\nReference: r3", ["r3"]),
        ("Answer: x\nCites: `c1`, `c2`", ["c1", "c2"]),
        ("Answer: x\nCite: a,, ;b", ["a", "b"]),
        ("Answer: x\nCite: XX-7, doc_X", ["XX-7", "doc_X"]),  # only brackets, quotes and stops are trimmed
        ("Answer: x\nCite: a\nCite: b", ["a"]),
        ("Answer: x\nThe cite: a", []),
        ("Answer: x", []),
    ],
)
def test_the_cited_ids_are_read_in_every_accepted_form(reply: str, ids: list[str]) -> None:
    """A citation lost or invented here changes citation precision and recall."""
    assert parse_cite(reply) == ids


def test_citations_are_capped_after_duplicates_are_dropped_and_long_ids_are_cut() -> None:
    cited = ["a", "a", "b", "c", "d", "e", "f"]
    assert parse_cite(json.dumps({"cite": cited})) == ["a", "b", "c", "d", "e"][:CITE_MAX_ITEMS]
    (long_id,) = parse_cite(json.dumps({"cite": ["x" * 600]}))
    assert long_id == "x" * 500


def test_a_cut_off_reply_keeps_its_complete_thought_even_after_an_unreadable_field() -> None:
    """The thought is shown in the trajectory; a broken escape in another field must not lose it."""
    cut = '{"thought": "enough found", "action": "ready_to_answer", "query": "bad \\q escape", "note": "cut'
    action = parse_json_action(cut, TOOLS)
    assert (action.tool, action.thought) == (ANSWER_TOOL, "enough found")


@pytest.mark.parametrize("max_tokens", [None, 40, 4000])
def test_the_search_function_s_arguments_are_an_object_with_one_bounded_query(max_tokens: int | None) -> None:
    """A server that decodes or validates the call's arguments under its schema must accept a query and nothing else."""
    search, ready = tool_definitions({SEARCH_TOOL: "- search_database: search", ANSWER_TOOL: "answer"}, max_tokens)
    schema = search["function"]["parameters"]
    jsonschema.validate({"query": "Paris"}, schema)
    assert schema["properties"]["query"]["description"] == "a short keyword query"  # what the model is told
    assert search["function"]["description"] == "search"  # the other formats' "- name:" prefix is dropped
    for bad in ("capital of France", {"query": 3}, {}, {"query": "x", "k": 5}, {"query": "x" * 300}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    jsonschema.validate({}, ready["function"]["parameters"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "x"}, ready["function"]["parameters"])


def _worst_answer(schema: dict) -> dict:
    """The longest final answer the schema lets a constrained model write."""
    props = schema["properties"]
    longest = {"answer": "x" * props["answer"]["maxLength"]}
    if "cite" in props:
        item = props["cite"]["items"]
        widest = max(item["enum"], key=len) if "enum" in item else "y" * item["maxLength"]
        longest["cite"] = [widest] * props["cite"]["maxItems"]
    return longest


@pytest.mark.parametrize(
    ("max_tokens", "ids", "answer_chars", "cite_items"),
    [
        # room = max_tokens - 8 (the object's keys and braces), the rest at CHARS_PER_TOKEN = 2
        (60, None, 80, None),  # no passage shown: no cite key; 52 tokens of room hold all 80 characters
        (20, None, 24, None),  # 12 tokens of room: 24 characters
        (10, None, 8, None),  # 2 tokens of room: the 8-character floor (an answer must fit a name)
        # cite: the answer gets half the room (at most 40 tokens), each id ceil(len / 2) + 2 tokens, 6 for the list
        (40, ["d1"], 32, 3),  # room 32: answer 16 tokens, (32 - 16 - 6) // 3 = 3 ids
        (38, ["d1"], 30, 3),  # room 30: answer 15 tokens, (30 - 15 - 6) // 3 = 3 ids
        (40, ["doc-12345", "doc-12345"], 32, 1),  # a repeated id counts once; (32 - 16 - 6) // 7 = 1 id
        (160, ["x" * 70], 80, 2),  # a shown id is counted whole: 37 tokens; (152 - 40 - 6) // 37 = 2
        (400, ["d1", "d22"], 80, 5),  # room for 100 ids: at most 5
        (12, ["d1"], 8, 1),  # too little room for any id still allows one
        (None, ["a"], 80, 5),  # no limit: the caps
    ],
)
def test_the_final_answer_schema_uses_the_room_its_budget_leaves_and_fits_in_it(
    max_tokens: int | None, ids: list[str] | None, answer_chars: int, cite_items: int | None
) -> None:
    """The constrained answer must be able to close within the tokens left (a cut-off answer
    object is lost), and should use that room: the answer field shares it with the ids to cite."""
    schema = answer_schema(max_tokens, ids)
    props = schema["properties"]
    assert props["answer"]["maxLength"] == answer_chars
    assert (props["cite"]["maxItems"] if "cite" in props else None) == cite_items
    assert schema["required"] == list(props) and schema["additionalProperties"] is False
    if ids:
        assert props["cite"]["items"] == {"type": "string", "enum": list(dict.fromkeys(ids))}
    worst = _worst_answer(schema)
    jsonschema.validate(worst, schema)
    if max_tokens is not None and max_tokens >= 40:
        assert len(json.dumps(worst)) / 2 <= max_tokens  # the longest reply closes within the budget


def test_more_ids_than_an_enum_holds_are_any_bounded_id() -> None:
    many = [f"doc-{i}" for i in range(65)]
    item = answer_schema(400, many)["properties"]["cite"]["items"]
    assert item == {"type": "string", "maxLength": 64}
    # any id up to 64 characters may be written: each is counted as 34 tokens, (192 - 40 - 6) // 34 = 4
    schema = answer_schema(200, many)
    assert schema["properties"]["cite"]["maxItems"] == 4
    assert len(json.dumps(_worst_answer(schema))) / 2 <= 200
    assert answer_schema(400, many[:64])["properties"]["cite"]["items"]["enum"] == many[:64]
    assert answer_schema(200, many[:64])["properties"]["cite"]["maxItems"] == 5  # 64 shown ids of 6 characters


def _accepts(schema: dict, value: object) -> bool:
    jsonschema.Draft202012Validator.check_schema(schema)  # a malformed schema is a backend's crash
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def test_the_action_schema_admits_a_well_formed_turn_and_nothing_else() -> None:
    """Under constrained decoding the schema is all that stands between a small model and an
    unreadable turn: a turn must be an object of a string thought, an offered action and a
    string query, with no other key."""
    schema = action_schema([SEARCH_TOOL, ANSWER_TOOL], max_tokens=200)
    good = {"thought": "look it up", "action": SEARCH_TOOL, "query": "capital of France"}
    assert _accepts(schema, good)
    bad = [
        {**good, "extra": 1},
        {**good, "thought": 5},
        {**good, "action": "abstain"},
        {**good, "action": 1},
        {**good, "query": ["a"]},
        {k: v for k, v in good.items() if k != "query"},
        [good],
    ]
    assert [_accepts(schema, b) for b in bad] == [False] * len(bad)
    with pytest.raises(ValueError) as refused:
        action_schema(["search_database", "browse"])
    assert str(refused.value).startswith(
        "tools must be a non-empty subset of "
    ) and "got ['search_database', 'browse']" in str(refused.value)


def test_each_function_takes_exactly_its_arguments() -> None:
    """In the tools format a backend decodes a call's arguments under these parameters: the
    search takes one string query, answering and abstaining take nothing."""
    defs = tool_definitions({SEARCH_TOOL: "- search_database: find", ANSWER_TOOL: "answer", ABSTAIN_TOOL: "x"}, 100)
    params = {d["function"]["name"]: d["function"]["parameters"] for d in defs}
    assert _accepts(params[SEARCH_TOOL], {"query": "paris"})
    assert not any(_accepts(params[SEARCH_TOOL], v) for v in ({}, {"query": 1}, {"query": "p", "k": 3}, ["paris"]))
    for name in (ANSWER_TOOL, ABSTAIN_TOOL):
        assert _accepts(params[name], {}) and not _accepts(params[name], {"answer": "x"})
        assert not _accepts(params[name], [])
    assert [d["function"]["description"] for d in defs] == ["find", "answer", "x"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("**Thought:** I need the capital.\n**Action:** search_database\n**Action Input:** capital of France",
         (SEARCH_TOOL, "capital of France", "I need the capital.")),
        ("__Thought__: look\n__Action__: search_database\n__Query__: eiffel", (SEARCH_TOOL, "eiffel", "look")),
        ("Thought: t\nAction: `search_database`\nAction Input: `paris`", (SEARCH_TOOL, "paris", "t")),
        ("ACTION INPUT: paris\nAction: search_database", (SEARCH_TOOL, "paris", "")),
        ('Action: search_database(query="paris").', (SEARCH_TOOL, "paris", "")),
        ('Action: search_database(Query = "eiffel tower")', (SEARCH_TOOL, "eiffel tower", "")),
        ("Thought: I know it now\nAction: ready_to_answer", (ANSWER_TOOL, "", "I know it now")),
        ("Action: Search Database\nQuery: louvre", (SEARCH_TOOL, "louvre", "")),
        ("Thought: try `eiffel`\nAction: search-database\nQuery: louvre", (SEARCH_TOOL, "louvre", "try eiffel")),
    ],
)  # fmt: skip
def test_a_plain_text_turn_is_read_as_a_small_model_writes_it(reply: str, expected: tuple[str, str, str]) -> None:
    """Markdown emphasis, backticks, an input line above its action, a call with a trailing
    full stop or an upper-case argument name: each is still the action the model meant,
    with its thought kept for the trajectory."""
    action = parse_text_action(reply, [SEARCH_TOOL, ANSWER_TOOL])
    assert (action.tool, action.query, action.thought) == expected


def test_an_unreadable_text_turn_says_why() -> None:
    with pytest.raises(ActionParseError, match="^the reply was empty$"):
        parse_text_action("  \n", [SEARCH_TOOL])
    with pytest.raises(ActionParseError) as refused:
        parse_text_action("Action: browse", [SEARCH_TOOL, ANSWER_TOOL])
    assert str(refused.value) == "unknown action 'browse'; choose search_database or ready_to_answer"


def test_two_queries_differing_in_case_and_spacing_share_one_key() -> None:
    assert normalize_query("  Capital   of\tFRANCE ") == normalize_query("capital of france") == "capital of france"


def test_a_function_call_turn_is_refused_with_what_to_call_instead() -> None:
    """The refusal is shown to the model as its next turn's feedback: it must name what may be called."""
    from bcas.llm.base import ToolCall

    tools = [SEARCH_TOOL, ANSWER_TOOL]
    with pytest.raises(ActionParseError) as none:
        parse_tool_call([], tools)
    assert str(none.value) == "the reply called no function; call exactly one of search_database or ready_to_answer"
    with pytest.raises(ActionParseError) as unknown:
        parse_tool_call([ToolCall("c1", "f" * 70, "{}")], tools)
    assert str(unknown.value) == f"there is no function {'f' * 60!r}; call search_database or ready_to_answer"
    # answering takes no query: a stray non-text one is ignored, not a crash
    action = parse_tool_call([ToolCall("c1", ANSWER_TOOL, '{"query": 5}')], tools, content="done")
    assert (action.tool, action.query, action.thought) == (ANSWER_TOOL, "", "done")


@pytest.mark.parametrize(
    ("reply", "found"),
    [
        ('{"a": 1}', {"a": 1}),  # the whole reply: the constrained case
        ('Sure! {"a": 1} done', {"a": 1}),
        ('{"a": "x}"} and more', {"a": "x}"}),  # a brace inside a string does not close the object
        ('{"a": "say \\"hi\\" {"} tail', {"a": 'say "hi" {'}),  # nor an escaped quote end the string
        ('{"a": "\\\\"} {"b": 1}', {"a": "\\"}),  # an escaped backslash does not escape the quote after it
        ('noise {not json} then {"b": 2}', {"b": 2}),  # a braced non-object is passed over
        ('{"outer": {"inner": 1}} x', {"outer": {"inner": 1}}),
        ('x {"a": 1} {"b": 2}', {"a": 1}),  # the first object
        ('{"a": 1', None),  # never closed
        ('{"a": [1, {"b": 2}]} ', {"a": [1, {"b": 2}]}),
        ("no object at all", None),
        ('{"a": "\\"}"} x', {"a": '"}'}),  # an escaped quote then a brace, both inside the string
        ('Sure! {"a": 1}done', {"a": 1}),  # the object ends at its brace, text right after it
        ('{{"a": 1}', {"a": 1}),  # an unclosed brace right before the object
        ('{bad} {"a": {"b": 1}}', {"a": {"b": 1}}),  # after a failed candidate, the next brace, not an inner one
        ('x {"": "}"}', {"": "}"}),  # an empty first string ends at its second quote
    ],
)
def test_the_first_json_object_in_a_reply_is_found_whole(reply: str, found: dict | None) -> None:
    """A small model wraps its JSON in prose; the object must come out whole, braces and quotes
    inside its strings included, or the turn is lost or misread."""
    assert find_json_object(reply) == found


@pytest.mark.parametrize(
    ("line", "query"),
    [
        ("Query: \"'`paris`'\"", "paris"),  # up to three layers of quotes come off
        ("Query: \u201cparis\u201d", "paris"),  # typographic quotes
        ("Query: \u2018louvre\u2019", "louvre"),
        ("Query: \u201cparis", "\u201cparis"),  # an opening quote alone is kept
        ("Query: \"paris'", "\"paris'"),  # mismatched quotes are kept
        ("Query: x\u201d", "x\u201d"),
    ],
)
def test_a_query_loses_its_quotes_and_only_its_quotes(line: str, query: str) -> None:
    action = parse_text_action(f"Action: search_database\n{line}", [SEARCH_TOOL])
    assert action.query == query


def test_at_most_three_layers_of_quotes_come_off() -> None:
    from bcas.agent.protocol import _strip_quotes

    # only quote characters come off: a query that starts and ends with a letter keeps it
    assert _strip_quotes("Xerox MAX") == "Xerox MAX"
    assert _strip_quotes("X\u201d") == "X\u201d" and _strip_quotes("\u201cX") == "\u201cX"
    assert _strip_quotes("\u201c\u201d") == ""  # a pair of typographic quotes around nothing

    assert _strip_quotes('"\'`"x"`\'"') == '"x"'
    assert _strip_quotes("'a'") == "a" and _strip_quotes("'") == "'" and _strip_quotes("''") == ""


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"tool": "search_database", "input": "paris"}', (SEARCH_TOOL, "paris", "")),
        ('{"name": "search_database", "argument": "paris", "reasoning": "r"}', (SEARCH_TOOL, "paris", "r")),
        ('{"function": "search_database", "search_query": "paris", "reason": "r"}', (SEARCH_TOOL, "paris", "r")),
        ('{"Action": "search_database", "Action_Input": "paris", "Thought": "t"}', (SEARCH_TOOL, "paris", "t")),
        ('{"action": "search_database", "query": {"query": "paris"}}', (SEARCH_TOOL, "paris", "")),
        ('{"action": "search_database", "query": {"input": "paris"}}', (SEARCH_TOOL, "paris", "")),
        ('{"action": "search_database", "tool": "ready_to_answer", "query": "x"}', (SEARCH_TOOL, "x", "")),
        ('{"action": "ready_to_answer", "query": 5, "thought": 7}', (ANSWER_TOOL, "", "")),
    ],
)  # fmt: skip
def test_a_json_turn_is_read_under_the_field_names_small_models_use(reply: str, expected: tuple[str, str, str]) -> None:
    """Models trained on other tool formats write ``tool``/``name``/``function`` for the action and
    ``input``/``argument``/``search_query``/``action_input`` for its query, in any case, sometimes
    nested; each is still the action meant (a misread turn costs the trajectory a turn).  ``action``
    wins over the others; a non-text query or thought is dropped, not a crash."""
    action = parse_json_action(reply, [SEARCH_TOOL, ANSWER_TOOL])
    assert (action.tool, action.query, action.thought) == expected


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("   ", "the reply was empty"),
        ('{"query": "paris"}', 'the JSON object has no "action" string'),
        ('{"action": "browse", "query": "x"}', "unknown action 'browse'; choose search_database or ready_to_answer"),
        ('{"action": "search_database", "query": {"q": "paris"}}', "search_database needs a non-empty query"),
        ('{"action": "search_database", "query": 5}', "search_database needs a non-empty query"),
        # prose that quotes fields is not a cut-off object: only a reply that opens one is salvaged
        ('I would say "action": "ready_to_answer" here', "the reply is not a complete JSON object"),
        ('{"thought": "the query is', "the reply is not a complete JSON object"),
    ],
)
def test_an_unreadable_json_turn_is_refused_with_the_reason_the_model_sees(reply: str, message: str) -> None:
    """The refusal is the next turn's feedback to the model, so it must say what was wrong."""
    with pytest.raises(ActionParseError) as refused:
        parse_json_action(reply, [SEARCH_TOOL, ANSWER_TOOL])
    assert str(refused.value) == message


def test_a_cut_off_json_turn_keeps_its_completed_action() -> None:
    cut = '{"thought": "need more", "action": "search_database", "query": "eiffel tower", "extra": "abc'
    action = parse_json_action(cut, [SEARCH_TOOL, ANSWER_TOOL])
    assert (action.tool, action.query, action.thought) == (SEARCH_TOOL, "eiffel tower", "need more")
    answer = parse_json_action('{"action": "ready_to_answer", "thought": "do', [SEARCH_TOOL, ANSWER_TOOL])
    assert (answer.tool, answer.query) == (ANSWER_TOOL, "")


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ('{"final_answer": "Paris"}', "Paris"),
        ('{"short_answer": "Paris"}', "Paris"),
        ('{"answer": 1889}', "1889"),
        ('{"answer": 2.5}', "2.5"),
        ('{"answer": true}\nParis', "Paris"),  # a flag is not an answer; the next readable line is
        ('{"answer": ["Paris"]}\nLyon', "Lyon"),
        ('{"answer": "say \\"Paris', 'say "Paris'),  # cut off inside the string: its text so far, unescaped
        ('{"answer": "bad \\u12', "bad \\u12"),  # an escape cut in half: the raw text
        ("**Answer:** `Paris`", "Paris"),
        ("Answer: the `Eiffel` Tower", "the Eiffel Tower"),  # markdown inside the answer too
        ("{\nParis", "Paris"),  # a line opening an object is not the answer
    ],
)
def test_the_final_answer_is_read_from_every_form_a_model_writes(reply: str, answer: str) -> None:
    """The answer field under its other names, a number, a reply cut off by the token cap,
    markdown around an ``Answer:`` line: a misread answer is graded wrong."""
    from bcas.agent.protocol import parse_answer

    assert parse_answer(reply) == answer


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("Action: browse_XX", "unknown action 'browse_XX'; choose search_database or ready_to_answer"),
        ("Action: browse(paris)", "unknown action 'browse(paris)'; choose search_database or ready_to_answer"),
        ("I will call search_database now.", "search_database needs a non-empty query"),
        ("search_database(paris) or ready_to_answer()", "the reply names more than one action; give exactly one Action line"),
        ("I think the capital is Paris.", "no 'Action:' line was found"),
    ],
)  # fmt: skip
def test_an_unreadable_text_turn_names_what_it_read(reply: str, message: str) -> None:
    with pytest.raises(ActionParseError) as refused:
        parse_text_action(reply, [SEARCH_TOOL, ANSWER_TOOL])
    assert str(refused.value) == message


def test_a_text_turn_with_one_bare_call_or_an_answer_line_is_read() -> None:
    """Without an ``Action:`` line, one unambiguous call anywhere counts; an ``Answer:`` line is
    the answer action, its thought kept."""
    one = parse_text_action("Thought: look it up\nI will use search_database(eiffel)", [SEARCH_TOOL, ANSWER_TOOL])
    assert (one.tool, one.query) == (SEARCH_TOOL, "eiffel") and one.thought.startswith("look it up")
    answer = parse_text_action("Thought: I know it\nFinal Answer: Paris", [SEARCH_TOOL, ANSWER_TOOL])
    assert answer.tool == ANSWER_TOOL and answer.thought.startswith("I know it")


def test_a_function_call_without_a_text_query_is_a_search_without_a_query() -> None:
    from bcas.llm.base import ToolCall

    tools = [SEARCH_TOOL, ANSWER_TOOL]
    for arguments in ("{}", '{"query": 5}', '{"q": "paris"}'):
        with pytest.raises(ActionParseError, match='^search_database needs a non-empty "query" string argument$'):
            parse_tool_call([ToolCall("c1", SEARCH_TOOL, arguments)], tools)
    with pytest.raises(ActionParseError) as unknown:
        parse_tool_call([ToolCall("c1", "browse", "{}")], tools)
    assert str(unknown.value) == "there is no function 'browse'; call search_database or ready_to_answer"


def test_the_answer_schema_admits_text_answers_and_id_lists_only() -> None:
    schema = answer_schema(200, ["d1", "d2"])
    assert _accepts(schema, {"answer": "Paris", "cite": ["d1"]})
    assert not _accepts(schema, {"answer": 5, "cite": ["d1"]})
    assert not _accepts(schema, {"answer": "Paris", "cite": "d1"})
    assert not _accepts(schema, [{"answer": "Paris", "cite": ["d1"]}])
    action = action_schema([SEARCH_TOOL, ANSWER_TOOL], 200)
    assert not _accepts(action, {"thought": "t", "action": 5, "query": "q"})


def test_the_thought_is_capped_exactly_while_what_fits_is_within_the_limit() -> None:
    """``thought_max=None`` leaves the thought unbounded only where more than
    ``THOUGHT_CHARS_LIMIT`` characters fit; at exactly that many it is still capped, so the
    grammar's cap never exceeds the limit."""
    from bcas.agent.protocol import field_caps
    from bcas.config import THOUGHT_CHARS_LIMIT

    at_limit = [m for m in range(30, 2000) if field_caps(m, 10**9)[0] == THOUGHT_CHARS_LIMIT]
    assert at_limit, "no turn size fits exactly the limit; pick another boundary check"
    for m in at_limit:
        assert field_caps(m, None)[0] == THOUGHT_CHARS_LIMIT
        assert field_caps(m + 1, None)[0] is None


def test_a_tool_the_turn_does_not_offer_is_refused_naming_those_it_does() -> None:
    with pytest.raises(ActionParseError) as refused:
        parse_json_action('{"action": "search_database", "query": "x"}', [ANSWER_TOOL, ABSTAIN_TOOL])
    assert str(refused.value) == (f"search_database is not available this turn; choose {ANSWER_TOOL} or {ABSTAIN_TOOL}")


def test_a_function_call_without_text_beside_it_has_no_thought() -> None:
    from bcas.llm.base import ToolCall

    action = parse_tool_call([ToolCall("c1", SEARCH_TOOL, '{"query": "paris"}')], [SEARCH_TOOL, ANSWER_TOOL])
    assert (action.tool, action.query, action.thought) == (SEARCH_TOOL, "paris", "")
