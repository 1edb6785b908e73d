"""Readers of the official multi-hop layouts: HotpotQA, 2WikiMultihopQA, MuSiQue.

- HotpotQA (Yang et al., 2018), ``hotpot_dev_distractor_v1.json`` and
  ``hotpot_dev_fullwiki_v1.json``: a JSON array of ``{"_id", "question", "answer",
  "supporting_facts": [[title, sent_id]], "context": [[title, [sentence, ...]]],
  "type", "level"}``.  The 10 context paragraphs become the item's documents (in the
  fullwiki file they are the official retriever's, so a gold paragraph may be
  missing); paragraphs whose title is a supporting fact are ``supporting`` and the
  supporting titles are the item's ``gold`` references for a separate corpus.
- 2WikiMultihopQA (Ho et al., 2020) ``dev.json``: the same layout plus
  ``evidences`` (triples) and the 2Wiki question types.
- MuSiQue (Trivedi et al., 2022) ``musique_ans_v1.0_dev.jsonl`` / ``musique_full``:
  JSON Lines of ``{"id", "question", "answer", "answer_aliases", "answerable",
  "paragraphs": [{"idx", "title", "paragraph_text", "is_supporting"}],
  "question_decomposition"}``.

Each reader yields ``(line, Item)``; the JSON arrays are streamed element by element.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bcas.formats.base import Format, register_format
from bcas.formats.common import fact_titles, make_item, paragraph_objects, paragraphs, records
from bcas.items import Item


def _wiki_style(path: Path, dataset: str) -> Iterator[tuple[int, Item]]:
    for line, rec in records(path):
        item_id = rec.ident("_id")
        question = rec.str("question")
        answers = rec.answers("answer")
        docs = paragraphs(rec, "context")
        gold_titles = fact_titles(rec, rec.get("supporting_facts"), "supporting_facts")
        meta: dict[str, Any] = {"source_format": dataset}
        for key in ("type", "level"):
            if isinstance(rec.get(key), str):
                meta[key] = rec.get(key)
        if rec.has("supporting_facts"):
            meta["supporting_facts"] = rec.get("supporting_facts")
        if rec.has("evidences"):
            meta["evidences"] = rec.list("evidences")
        supporting = [n for n, (title, _) in enumerate(docs) if title in gold_titles]
        yield line, make_item(rec, item_id, question, answers, docs, supporting, meta, gold_titles)


def read_hotpotqa(path: Path) -> Iterator[tuple[int, Item]]:
    """Official HotpotQA JSON (distractor or fullwiki setting)."""
    return _wiki_style(path, "hotpotqa")


def read_2wiki(path: Path) -> Iterator[tuple[int, Item]]:
    """Official 2WikiMultihopQA JSON (``dev.json``, ``train.json``)."""
    return _wiki_style(path, "2wikimultihopqa")


def read_musique(path: Path) -> Iterator[tuple[int, Item]]:
    """Official MuSiQue JSON Lines (answerable or full)."""
    for line, rec in records(path):
        item_id = rec.ident("id")
        question = rec.str("question")
        answer = rec.str("answer")
        aliases = rec.answers("answer_aliases") if rec.get("answer_aliases") else []
        answers = list(dict.fromkeys([answer, *aliases]))
        docs, supporting = paragraph_objects(rec, "paragraphs")
        meta: dict[str, Any] = {"source_format": "musique"}
        if isinstance(rec.get("answerable"), bool):
            meta["answerable"] = rec.get("answerable")
        if rec.has("question_decomposition"):
            meta["question_decomposition"] = rec.list("question_decomposition")
        gold = [docs[n][0] for n in supporting]
        yield line, make_item(rec, item_id, question, answers, docs, supporting, meta, gold)


register_format(
    Format(
        "hotpotqa",
        "official HotpotQA JSON (distractor or fullwiki)",
        read_hotpotqa,
        lambda k: {"_id", "context"} <= k and ("level" in k or "evidences" not in k),
        task="multi-hop",
    )
)
register_format(
    Format(
        "2wikimultihopqa",
        "official 2WikiMultihopQA JSON (dev.json)",
        read_2wiki,
        lambda k: {"_id", "context"} <= k and ("evidences" in k or "level" not in k),
        task="multi-hop",
        aliases=("2wiki",),
    )
)
register_format(
    Format(
        "musique",
        "official MuSiQue JSONL (ans or full)",
        read_musique,
        lambda k: {"question", "paragraphs"} <= k,
        task="multi-hop",
    )
)
