"""``mock`` backend: an instant, deterministic stand-in model for dry runs (cf. Inspect's ``mockllm``).

It is not a language model and measures nothing about one: it exists to exercise the
harness end to end (budgets, ledgers, records, reports) without model time.  Every
result is labelled: ``model_id`` is ``"mock:<variant>"`` and ``ChatResult.extra``
holds ``{"mock": True, "variant": ..., "kind": ...}``.  Results are not cached
(``cacheable = False``): producing one is cheaper than looking it up.

Variants (the model name given to ``load_model("mock", VARIANT)``; default ``gold``):

``gold``
    A harness upper bound.  In the BCAS loop it searches once (the question as query),
    then chooses ``ready_to_answer`` and answers the gold answer.  It knows the gold
    answers of the items passed to :meth:`MockModel.register_items` and finds the
    question inside the prompt; an answer request for a question it was not given
    raises ``ModelError`` (it never guesses).  Assessment scores: 5 for a document
    that contains a gold answer, otherwise word overlap with the question (0-3).
``verbose``
    Spends every token and search it is allowed.  While the search tool is offered it
    searches (a new query every turn); free-text replies run to the token allowance
    and end with ``finish_reason="length"``; JSON replies fill every free string field
    except ``query`` (thought, reason, reasoning steps, answer) up to its ``maxLength``
    or the allowance, whichever comes first.  In the BCAS loop the allowance of a
    plan, reflection or action turn is paced by the status line the prompt shows
    (BCAS §3.3 search hints): with ``s`` searches left it spends
    ``tokens_left // (s + 1)``; with unlimited searches ``max_total_tokens // 16``
    (at least 64 tokens and at most the request's ``max_tokens``), so it both spends
    the token budget and keeps searching.  Without a status line it spends the
    request's ``max_tokens``.
``random``
    Answers a seeded random span of a document it has seen in the prompt
    (observations, generator or assessment documents; the question when it has seen
    none), searches with random spans of the question, scores at random.  The random
    generator is seeded from the request seed and the request's last message, so a
    request always gets the same reply.

Request kinds (``extra["kind"]``), recognised from the JSON schema first and then
from markers of the suite's own prompt templates: BCAS ``action`` (JSON or text
format), ``plan``, ``reflect``, ``answer``; MADARA ``assess`` (base and CoT),
``rescore``, ``generate`` (factoid and label tasks, PDE extraction included);
``judge`` (BCAS §3.6 verdict; asked three ways, SimpleQA's grade: a declining answer
is ``not_attempted``); ``rerank`` (``top_logprobs``: one position with
``Yes``/``No`` log-probabilities); anything else is ``generic`` (a valid instance
of the schema, or a short text).

Native tool calls.  An action request with ``tools`` is answered with one function
call (the action above; ``verbose`` pads the text beside it, never the call), its
completion tokens being those of the text, the name and the arguments.

Context window.  ``context_window`` (an option, default none) makes the mock behave
like a server with that window: a request whose prompt tokens plus ``max_tokens``
exceed it raises :class:`~bcas.llm.base.ContextWindowError`, as a llama.cpp server's
"exceeds the available context size" reply does.

Replies under a JSON schema are always valid under it.  Token counts: whitespace
tokens (``len(text.split())``) of the reply and of all prompt messages.  A reply never
exceeds ``max_tokens``: free text is cut at ``max_tokens`` tokens (``finish_reason``
``"length"``), JSON is shrunk (string fields shortened) until it fits; only a schema
whose smallest instance is longer than ``max_tokens`` is cut like free text, as a
real provider would.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterable
from typing import Any

from bcas.grading import exact_match, normalize_answer
from bcas.grading.abstention import declines
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError, ModelError, ToolCall
from bcas.llm.tool_calls import tool_names
from bcas.testing.schema_json import count_tokens, cut_tokens, filler, fit_json, instance

VARIANTS = ("gold", "verbose", "random")
DEFAULT_VARIANT = "gold"
# Filler words of verbose output: no digits, no tool, label or verdict words, so no parser
# can read an action, a score or a verdict into them.
VERBOSE_PACE = 16  # unlimited searches: spend max_total_tokens / VERBOSE_PACE per turn
VERBOSE_MIN_TURN = 64  # ... but at least this many tokens per turn
LABEL_WORDS = frozenset({"supports", "refutes", "not enough info", "yes", "no"})

_STATUS = re.compile(
    r"Budget: (?:unlimited searches|(?P<left>\d+) of (?P<cap>\d+) searches left)\. "
    r"(?P<tleft>\d+) of (?P<ttotal>\d+) output tokens left"
)
_QUESTION = re.compile(r"^(?:Question|QUESTION|CLAIM):[ \t]*(?P<q>.+?)[ \t]*$", re.MULTILINE)
_PASSAGE = re.compile(r"^\[\d+\][ \t]+(?:\(id [^)]*\)[ \t]+)?(?P<text>.+)$", re.MULTILINE)
_DOCUMENT = re.compile(r"^DOCUMENT \((?P<title>.*)\):\n(?P<text>.+)$", re.MULTILINE)
_REFERENCES = re.compile(r"^Reference answer\(s\):[ \t]*(?P<refs>.*)$", re.MULTILINE)
_MODEL_ANSWER = re.compile(r"^Model answer:[ \t]*(?P<answer>.*)$", re.MULTILINE)
_WORD = re.compile(r"\w+")
_AGENT_SYSTEM = ("Relevance Assessor", "Consistency Verifier", "Conflict Detector")


class Final(str):
    """Free text already sized by its handler: cut at ``max_tokens`` but never padded."""


def _key(question: str) -> str:
    return " ".join(question.casefold().split())


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


class MockModel(ChatModel):
    """The ``mock`` backend (see the module docstring for the variants)."""

    supports_json_schema = True
    supports_logprobs = True
    supports_tools = True
    cacheable = False

    def __init__(self, variant: str = DEFAULT_VARIANT, context_window: int | None = None) -> None:
        if variant not in VARIANTS:
            raise ModelError(f"unknown mock variant {variant!r}; choose one of {list(VARIANTS)} (e.g. mock:gold)")
        if context_window is not None and context_window <= 0:
            raise ModelError(f"mock context_window must be > 0, got {context_window}")
        self.context_window = context_window
        self.variant = variant
        self.model_id = f"mock:{variant}"
        self._gold: dict[str, tuple[str, ...]] = {}

    def __repr__(self) -> str:
        return f"MockModel({self.variant!r}, {len(self._gold)} registered questions)"

    def register_items(self, items: Iterable[Any]) -> int:
        """Learn the gold answers of ``items`` (``bcas.data.Item``s, or a ``Dataset``); returns how many."""
        items = getattr(items, "items", items)
        n = 0
        for item in items:
            self._gold.setdefault(_key(item.question), tuple(item.answers))
            n += 1
        return n

    # -- the contract ----------------------------------------------------------------

    async def chat(self, request: ChatRequest) -> ChatResult:
        return self.respond(request)

    def respond(self, request: ChatRequest) -> ChatResult:
        """The reply to ``request`` (synchronous; ``chat`` awaits nothing else)."""
        if self.context_window is not None:
            prompt = sum(count_tokens(str(m.get("content", ""))) for m in request.messages)
            if prompt + request.max_tokens > self.context_window:
                raise ContextWindowError(
                    f"{self.model_id}: request ({prompt} prompt + {request.max_tokens} completion tokens) "
                    f"exceeds the available context size ({self.context_window} tokens)"
                )
        view = _View(request)
        kind = view.kind()
        rng = random.Random(_seed(self.variant, request, kind))
        if kind == "action" and request.tools:
            return self._call(view, rng)
        logprobs = None
        handler = getattr(self, f"_{kind}")
        value, share = handler(view, rng)
        if kind == "rerank":
            logprobs = [value[1]]
            value = value[0]
        text, finish = self._render(request, value, share)
        prompt_tokens = sum(count_tokens(str(m.get("content", ""))) for m in request.messages)
        return ChatResult(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=count_tokens(text),
            finish_reason=finish,
            latency_s=0.0,
            logprobs=logprobs,
            extra={"mock": True, "variant": self.variant, "kind": kind},
        )

    def _call(self, view: _View, rng: random.Random) -> ChatResult:
        """An action turn answered with one native function call."""
        action, share = self._action(view, rng)
        arguments = json.dumps({"query": action["query"]} if action["action"] == "search_database" else {})
        call = ToolCall(id="mock_call", name=action["action"], arguments=arguments)
        call_tokens = count_tokens(f"{call.name} {arguments}")
        limit = view.request.max_tokens
        text, _ = cut_tokens(action["thought"], max(0, limit - call_tokens))
        if share is not None and count_tokens(text) + call_tokens < min(share, limit):
            text = f"{text} {filler(min(share, limit) - call_tokens - count_tokens(text))}".strip()
        calls = (call,) if call_tokens <= limit else ()
        prompt_tokens = sum(count_tokens(str(m.get("content") or "")) for m in view.request.messages)
        return ChatResult(
            text=text, prompt_tokens=prompt_tokens, completion_tokens=count_tokens(text) + call_tokens * len(calls),
            finish_reason="stop" if calls else "length", latency_s=0.0, tool_calls=calls,
            extra={"mock": True, "variant": self.variant, "kind": "action"},
        )  # fmt: skip

    # -- rendering -------------------------------------------------------------------

    def _render(self, request: ChatRequest, value: Any, share: int | None) -> tuple[str, str]:
        """The reply text: JSON fitted to the schema, or free text cut at the allowance."""
        limit = request.max_tokens
        target = min(limit, share) if share is not None else limit
        verbose = self.variant == "verbose"
        if request.json_schema is not None:
            obj = instance(request.json_schema, value)
            text = fit_json(obj, request.json_schema, limit, target if verbose else None)
            if count_tokens(text) <= limit:
                return text, "stop"
            cut, _ = cut_tokens(text, limit)
            return cut, "length"
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if verbose and not isinstance(value, Final):
            missing = target - count_tokens(text)
            if missing > 0:
                text = f"{text} {filler(missing)}".strip()
            cut, _ = cut_tokens(text, target)
            return cut, "length"
        cut, was_cut = cut_tokens(text, limit)
        return cut, "length" if was_cut else "stop"

    # -- knowledge ---------------------------------------------------------------------

    def gold_answers(self, view: _View) -> tuple[str, ...] | None:
        for question in view.questions():
            found = self._gold.get(_key(question))
            if found is not None:
                return found
        return None

    def _require_gold(self, view: _View) -> tuple[str, ...]:
        found = self.gold_answers(view)
        if found is None:
            asked = (view.questions() or ["(no question line in the prompt)"])[0]
            raise ModelError(
                f"mock:gold does not know the gold answer of {asked[:80]!r}: pass the dataset's items to "
                f"MockModel.register_items before running"
            )
        return found

    def relevance(self, view: _View, text: str, rng: random.Random) -> int:
        """A 0-5 score of ``text`` for the prompt's question."""
        if self.variant == "random":
            return rng.randint(0, 5)
        golds = self.gold_answers(view) if self.variant == "gold" else None
        if golds:
            norm = f" {normalize_answer(text)} "
            if any(g.lower() not in LABEL_WORDS and f" {normalize_answer(g)} " in norm for g in golds):
                return 5
        question = _words(" ".join(view.questions()))
        if not question:
            return 2
        return min(3, round(3 * len(question & _words(text)) / len(question)))

    def seen_span(self, view: _View, rng: random.Random, longest: int) -> str:
        docs = view.documents() or view.questions() or [view.last_user]
        words = rng.choice(docs).split()
        if not words:
            return ""
        size = rng.randint(1, max(1, min(longest, len(words))))
        start = rng.randint(0, len(words) - size)
        return " ".join(words[start : start + size]).strip(" .,;:")

    def verbose_share(self, view: _View) -> int | None:
        """Tokens a verbose agent turn spends, paced by the prompt's status line (module doc)."""
        status = view.status()
        if status is None:
            return None
        left, total, searches_left = status
        share = total // VERBOSE_PACE if searches_left is None else left // (searches_left + 1)
        return max(VERBOSE_MIN_TURN, share)

    # -- request kinds: each returns (value, token share or None) ----------------------

    def _action(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        tools = view.offered_tools()
        question = (view.questions() or [""])[0]
        searched = view.searches_seen()
        search = "search_database" in tools
        if self.variant == "gold":
            search = search and searched == 0
        elif self.variant == "random":
            search = search and (searched == 0 or rng.random() < 0.5)
        if search:
            if self.variant == "verbose":
                query = question if searched == 0 else f"{question} {searched + 1}"
                thought = f"Search number {searched + 1} for more evidence."
            elif self.variant == "random":
                words = question.split() or ["search"]
                size = rng.randint(1, min(5, len(words)))
                start = rng.randint(0, len(words) - size)
                query = " ".join(words[start : start + size])
                thought = "Pick some words."
            else:
                query, thought = question, "Search for the question."
            action = {"thought": thought, "action": "search_database", "query": query}
        else:
            action = {"thought": "I have what I need.", "action": "ready_to_answer", "query": ""}
        share = self.verbose_share(view) if self.variant == "verbose" else None
        if view.request.json_schema is None and view.text_format():
            line = f"Thought: {action['thought']}"
            rest = f"\nAction: {action['action']}\nQuery: {action['query']}"
            if share is not None:
                room = min(share, view.request.max_tokens) - count_tokens(line + rest)
                line = f"{line} {filler(room)}".rstrip()
            return Final(line + rest), None  # the thought is padded, never the query line
        return action, share

    def _plan(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        question = (view.questions() or [""])[0]
        text = f"1. Search for: {question}\n2. Read the passages.\n3. Combine the facts into the answer."
        if self.variant == "random":
            text = self.seen_span(view, rng, 12)
        return text, self.verbose_share(view) if self.variant == "verbose" else None

    def _reflect(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        text = f"I ran {view.searches_seen()} searches so far and keep going."
        return text, self.verbose_share(view) if self.variant == "verbose" else None

    def _answer(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        if self.variant == "gold":
            answer = self._require_gold(view)[0]
        else:
            answer = self.seen_span(view, rng, 4 if self.variant == "random" else 12)
        if view.request.json_schema is not None or view.json_answer():
            return {"answer": answer}, None
        return f"Answer: {answer}", None

    def _generate(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        labels = view.labels()
        if self.variant == "gold":
            answer = self._require_gold(view)[0]
        elif labels and self.variant == "random":
            answer = rng.choice(labels)
        else:
            answer = self.seen_span(view, rng, 4 if self.variant == "random" else 12)
        if labels:
            match = [lab for lab in labels if lab.lower() == answer.strip().lower()]
            answer = match[0] if match else labels[0]
        if view.request.json_schema is not None:
            return {"answer": answer}, None
        return answer, None

    def _assess(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        document = view.assessed_document()
        score = self.relevance(view, document, rng)
        if "reasoning_steps" in view.system:
            steps = [
                "The question names its key entities.",
                "The document mentions some of them.",
                "It gives evidence in proportion to the overlap.",
                "Nothing in it looks outdated.",
                f"So the score is {score}.",
            ]
            return {"reasoning_steps": steps, "score": score, "confidence": 3}, None
        return {"score": score, "reason": "Scored by overlap with the question."}, None

    def _rescore(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        return {"score": self.relevance(view, view.assessed_document(), rng)}, None

    def _judge(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        refs_match = _REFERENCES.search(view.all_users)
        answer_match = _MODEL_ANSWER.search(view.all_users)
        refs = re.findall(r'"([^"]*)"', refs_match.group("refs")) if refs_match else []
        answer = answer_match.group("answer") if answer_match else ""
        if self.variant == "random":
            correct = rng.random() < 0.5
        else:
            correct = bool(refs) and exact_match(answer, refs)
        verdict = "correct" if correct else "incorrect"
        props = (view.request.json_schema or {}).get("properties") or {}
        if "grade" in props or "correct, incorrect or not attempted" in view.all_users:
            if declines(answer, refs):
                verdict = "not_attempted"
            if view.request.json_schema is not None:
                return {"grade": verdict}, None
            return verdict.replace("_", " "), None
        if view.request.json_schema is not None:
            return {"verdict": verdict}, None
        return verdict, None

    def _rerank(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        passage = view.last_user.split("Passage:", 1)[-1]
        p = 0.05 + 0.9 * self.relevance(view, passage, rng) / 5
        n = max(2, view.request.top_logprobs or 2)
        row = {"Yes": math.log(0.95 * p), "No": math.log(0.95 * (1 - p))}
        for j in range(n - 2):  # the rest of the mass over tokens that are neither answer
            row[f"alt{j}"] = math.log(0.05 / 2 ** (j + 1))
        return ("Yes" if p >= 0.5 else "No", row), None

    def _generic(self, view: _View, rng: random.Random) -> tuple[Any, int | None]:
        if view.request.json_schema is not None:
            return None, None
        return "mock reply", None


def _seed(variant: str, request: ChatRequest, kind: str) -> int:
    last = str(request.messages[-1].get("content", "")) if request.messages else ""
    blob = f"{variant}|{request.seed}|{kind}|{len(request.messages)}|{last}".encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


class _View:
    """What the mock reads from one request: its kind, question, documents, budget status."""

    def __init__(self, request: ChatRequest) -> None:
        self.request = request
        msgs = request.messages
        self.system = next((str(m.get("content", "")) for m in msgs if m.get("role") == "system"), "")
        # Tool results are read like the user turns that carry the other formats' observations.
        users = [str(m.get("content") or "") for m in msgs if m.get("role") in ("user", "tool")]
        self.users = users
        self.last_user = users[-1] if users else ""
        self.all_users = "\n".join(users)

    def kind(self) -> str:
        request, schema = self.request, self.request.json_schema or {}
        props = schema.get("properties") or {}
        if request.top_logprobs:
            return "rerank"
        if "verdict" in props or "grade" in props or "You are grading an answer" in self.all_users:
            return "judge"
        if any(title in self.system for title in _AGENT_SYSTEM):
            return "rescore" if "\nREASONING:\n" in self.last_user else "assess"
        if "DOCUMENTS:\n" in self.last_user and ("\nANSWER:" in self.last_user or "\nLABEL:" in self.last_user):
            return "generate"
        if "action" in props or request.tools or "Actions you can take now:" in self.last_user:
            return "action"
        if "answer" in props or "answer the question now" in self.last_user.lower():
            return "answer"
        if "research plan" in self.last_user:
            return "plan"
        if "Pause and review your progress" in self.last_user:
            return "reflect"
        return "generic"

    def questions(self) -> list[str]:
        found: list[str] = []
        for text in [self.last_user, *self.users]:
            found.extend(m.group("q") for m in _QUESTION.finditer(text))
        return found

    def documents(self) -> list[str]:
        docs = [m.group("text") for text in self.users for m in _PASSAGE.finditer(text)]
        docs += [m.group("text") for text in self.users for m in _DOCUMENT.finditer(text)]
        return [d for d in docs if d.strip()]

    def assessed_document(self) -> str:
        match = _DOCUMENT.search(self.last_user)
        return f"{match.group('title')} {match.group('text')}" if match else self.last_user

    def status(self) -> tuple[int, int, int | None] | None:
        """``(tokens left, token budget, searches left or None)`` from the last status line."""
        matches = list(_STATUS.finditer(self.last_user))
        if not matches:
            return None
        m = matches[-1]
        searches = int(m.group("left")) if m.group("left") is not None else None
        return int(m.group("tleft")), int(m.group("ttotal")), searches

    def offered_tools(self) -> list[str]:
        if self.request.tools:
            return tool_names(self.request.tools)
        schema = self.request.json_schema or {}
        enum = ((schema.get("properties") or {}).get("action") or {}).get("enum")
        if enum:
            return list(enum)
        offered = self.last_user.split("Actions you can take now:", 1)[-1]
        return [t for t in ("search_database", "ready_to_answer") if f"- {t}:" in offered] or ["ready_to_answer"]

    def searches_seen(self) -> int:
        return sum(text.count('Search results for "') for text in self.users)

    def text_format(self) -> bool:
        return "Reply with exactly three lines" in self.last_user

    def json_answer(self) -> bool:
        return 'one key, "answer"' in self.last_user

    def labels(self) -> list[str]:
        enum = (((self.request.json_schema or {}).get("properties") or {}).get("answer") or {}).get("enum")
        if enum:
            return list(enum)
        if "SUPPORTS or REFUTES" in self.system:
            return ["SUPPORTS", "REFUTES"]
        if "yes or no" in self.system:
            return ["yes", "no"]
        return []


def create(model: str | None = None, **options: Any) -> MockModel:
    """Factory registered as backend ``mock``: ``model`` names the variant (default ``gold``).

    Option: ``context_window`` (tokens; default none).
    """
    unknown = sorted(set(options) - {"context_window"})
    if unknown:
        raise ModelError(f"the mock backend takes only the option context_window; got {unknown}")
    return MockModel(model or DEFAULT_VARIANT, context_window=options.get("context_window"))
