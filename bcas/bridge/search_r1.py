"""A Search-R1-style agent, built in: its prompt and its ``<search>`` / ``<information>`` /
``<answer>`` protocol, on any model served through the bridge.

Search-R1 (Jin et al. 2025, "Search-R1: Training LLMs to Reason and Leverage Search Engines
with Reinforcement Learning", arXiv 2503.09516; github.com/PeterGriffinJin/Search-R1,
``infer.py`` and ``search_r1/llm_agent/generation.py``) trains a model to interleave
reasoning and search: it writes ``<think>...</think>``, then either a query between
``<search>`` and ``</search>``, answered with the top passages between ``<information>`` and
``</information>``, or its answer between ``<answer>`` and ``</answer>``.  As in the
repository:

* the prompt is the paper's template (Table 1; ``infer.py``), in
  ``bcas/bridge/prompts/search_r1.txt``, with the question ending in ``?``;
* generation stops at ``</search>``; the query is the last ``<search>`` of the reply;
* the passages come from the retriever API (``POST /retrieve``, ``topk`` 3, scores on:
  the bridge's retriever dialect) written as ``Doc i(Title: t) text`` lines
  (``_passages2string``);
* a reply with neither a search nor an answer gets the repository's "My previous action is
  invalid..." observation (``bcas/bridge/prompts/search_r1_invalid.txt``);
* at most ``MAX_TURNS`` (4) turns of at most ``MAX_RESPONSE_TOKENS`` (500) tokens each
  (``max_turns=4``, ``data.max_response_length=500`` in the repository's training scripts).

One difference, for a chat API: the repository appends each observation to one growing
completion; here each model reply is an assistant message and each observation
(``<information>`` block or the invalid-action note) the user message after it.  The
budgets are the bridge's: a search past ``max_searches`` is answered with the refusal inside
``<information>``; a call past ``max_total_tokens`` is refused and the agent stops (no answer:
an error record).  And, so that a model not trained on the protocol still answers: with no
``<answer>`` after the turns, one more turn asks for it
(``bcas/bridge/prompts/search_r1_final.txt``); a reply still without the tag answers with its
text, the tags taken out (:func:`untagged`); an empty one is no answer.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from bcas.bridge.session import Endpoints
from bcas.prompts import prompt_template

MAX_TURNS = 4
MAX_RESPONSE_TOKENS = 500
TOPK = 3
STOP = ("</search>",)
_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def search_r1_prompt(question: str) -> str:
    """The Search-R1 template with ``question`` (a ``?`` added where it lacks one, as ``infer.py`` does)."""
    question = question.strip()
    if question and not question.endswith("?"):
        question += "?"
    return prompt_template("bcas.bridge", "search_r1").substitute(question=question)


def passages_text(result: list[dict[str, Any]]) -> str:
    """Retrieved documents as Search-R1 writes them: ``Doc i(Title: <first line>) <rest>`` per line."""
    lines = []
    for i, item in enumerate(result, 1):
        contents = str((item.get("document") or item).get("contents") or "")
        title, _, text = contents.partition("\n")
        lines.append(f"Doc {i}(Title: {title}) {text}")
    return "\n".join(lines) + "\n"


def read_action(reply: str) -> tuple[str, str]:
    """``("answer", text)``, ``("search", query)`` or ``("invalid", "")`` of one reply (the answer first)."""
    answer = _ANSWER.findall(reply)
    if answer:
        return "answer", answer[-1].strip()
    if "<search>" in reply and "</search>" not in reply:  # the stop sequence was cut off
        reply += "</search>"
    queries = _SEARCH.findall(reply)
    if queries:
        return "search", queries[-1].strip()
    return "invalid", ""


def untagged(reply: str) -> str:
    """A reply's text without the protocol's tags and what ``<think>`` and ``<search>`` enclose."""
    text = re.sub(r"<(think|search|information)>.*?(</\1>|$)", " ", reply, flags=re.DOTALL)
    text = re.sub(r"</?(think|search|information|answer)>", " ", text)
    return " ".join(text.split())


REFUSALS = ("max_total_tokens", "context_window")  # the bridge's refusals of a call (bcas.bridge.server)


def _chat(client: httpx.Client, endpoints: Endpoints, messages: list[dict[str, str]]) -> str | None:
    """One turn's reply, or ``None`` when the bridge refuses the call (the token budget is spent, or
    the conversation no longer fits the model's window)."""
    body = {"model": endpoints.model, "messages": messages, "max_tokens": MAX_RESPONSE_TOKENS,
            "stop": list(STOP), "temperature": 0.0}  # fmt: skip
    response = client.post(f"{endpoints.openai_base_url}/chat/completions", json=body)
    if response.status_code == 400 and response.json().get("error", {}).get("code") in REFUSALS:
        return None
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"].get("content") or "")


def search_r1(question: str, endpoints: Endpoints) -> str | None:
    """Answer ``question`` by the Search-R1 protocol through the bridge (see the module docstring)."""
    messages: list[dict[str, str]] = [{"role": "user", "content": search_r1_prompt(question)}]
    invalid = prompt_template("bcas.bridge", "search_r1_invalid").substitute()
    with httpx.Client(timeout=600, headers={"Authorization": f"Bearer {endpoints.api_key}"}) as client:
        for _ in range(MAX_TURNS):
            reply = _chat(client, endpoints, messages)
            if reply is None:
                return None  # the token budget is spent before an answer
            kind, text = read_action(reply)
            if kind == "answer":
                return text
            closed = kind == "search" and "</search>" not in reply  # the stop sequence is not in the reply
            messages.append({"role": "assistant", "content": reply + ("</search>" if closed else "")})
            if kind == "search":
                found = client.post(
                    endpoints.retrieve_url, json={"queries": [text], "topk": TOPK, "return_scores": True}
                )
                found.raise_for_status()
                observation = f"<information>{passages_text(found.json()['result'][0]).strip()}</information>"
            else:
                observation = invalid
            messages.append({"role": "user", "content": observation})
        final = prompt_template("bcas.bridge", "search_r1_final").substitute()
        reply = _chat(client, endpoints, [*messages, {"role": "user", "content": final}])
    if reply is None:
        return None
    kind, text = read_action(reply)
    return text if kind == "answer" else untagged(reply) or None


__all__ = [
    "MAX_RESPONSE_TOKENS",
    "MAX_TURNS",
    "TOPK",
    "passages_text",
    "read_action",
    "search_r1",
    "search_r1_prompt",
    "untagged",
]
