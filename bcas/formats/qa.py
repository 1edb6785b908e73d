"""Readers of FlashRAG datasets and the official TriviaQA and NQ-open layouts.

- FlashRAG (Jin et al., 2024) datasets, ``<name>/{train,dev,test}.jsonl``: JSON Lines
  of ``{"id", "question", "golden_answers": [...], "metadata": {...}}``.  Questions
  only: the passages come from a corpus (``--bcas-corpus``).  Where ``metadata``
  carries the original context (HotpotQA / 2Wiki ``context``, MuSiQue
  ``paragraphs``) it becomes the item's documents, and ``supporting_facts`` /
  ``is_supporting`` / ``supporting_titles`` name the gold titles matched against the
  corpus (``supporting_ids`` / ``supporting_doc_ids``, where given, the corpus ids).
- TriviaQA (Joshi et al., 2017), reading-comprehension (``qa/wikipedia-dev.json``,
  ``qa/web-dev.json``) and unfiltered (``unfiltered-web-dev.json``) files: a JSON
  object whose ``Data`` array holds ``{"QuestionId", "Question", "Answer": {"Value",
  "Aliases", ...}, "EntityPages": [{"Filename", "Title"}], "SearchResults": [...]}``.
  The evidence texts live in ``evidence/wikipedia/<Filename>`` and
  ``evidence/web/<Filename>`` beside the ``qa`` folder (or next to the file); each
  evidence file becomes a document, those containing an answer alias are
  ``supporting`` (TriviaQA's distant supervision), and the entity-page titles are
  the ``gold`` references.  Without an evidence folder the items are questions only.
- NQ-open (Lee et al., 2019) ``NQ-open.dev.jsonl``: ``{"question", "answer": [...]}``
  per line; ids are ``nq_open-<n>`` by position (the file has none).  Retrieval
  outputs in the same shape with ``ctxs`` (DPR, lost-in-the-middle) keep those
  passages as documents (``isgold`` or, failing that, ``hasanswer`` marks them
  supporting) and ``nq_annotated_gold.title`` as the gold title.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bcas.formats.base import Format, register_format
from bcas.formats.common import Record, collapse, fact_titles, make_item, paragraph_objects, paragraphs, records
from bcas.items import Item


def _gold_list(meta: Record, key: str) -> list[str]:
    """``metadata[key]``: a list of titles or ids (strings or integers), or absent."""
    out = []
    for j, value in enumerate(meta.list(key, required=False)):
        if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
            raise meta.error("must be a non-empty string or an integer", f"{key}[{j}]")
        out.append(str(value))
    return out


def _context_docs(meta: Record) -> tuple[list[tuple[str, str]], list[int], list[str]]:
    """Documents, supporting positions and gold references (titles, ids) from a FlashRAG ``metadata``."""
    docs: list[tuple[str, str]] = []
    supporting: list[int] = []
    gold = fact_titles(meta, meta.get("supporting_facts"), "supporting_facts")
    for key in ("supporting_titles", "supporting_ids", "supporting_doc_ids"):
        gold.extend(g for g in _gold_list(meta, key) if g not in gold)
    if meta.get("context") is not None:
        docs = paragraphs(meta, "context")
        supporting = [n for n, (title, _) in enumerate(docs) if title in gold]
    elif meta.get("paragraphs") is not None:
        docs, supporting = paragraph_objects(meta, "paragraphs", strict=False)
        gold.extend(docs[n][0] for n in supporting)
    return docs, supporting, gold


def read_flashrag(path: Path) -> Iterator[tuple[int, Item]]:
    """A FlashRAG dataset file (JSON Lines)."""
    for line, rec in records(path):
        item_id = rec.ident("id")
        question = rec.str("question")
        answers = rec.answers("golden_answers")
        rec.dict("metadata")  # type check: an object or absent
        meta = rec.sub("metadata") if rec.get("metadata") is not None else Record(path, line, {}, "metadata.")
        docs, supporting, gold = _context_docs(meta)
        extra = {k: v for k, v in meta.obj.items() if k not in ("context", "paragraphs")}
        yield line, make_item(rec, item_id, question, answers, docs, supporting, extra, gold)


def _evidence_dir(path: Path) -> Path | None:
    for candidate in (path.parent / "evidence", path.parent.parent / "evidence"):
        if candidate.is_dir():
            return candidate
    return None


def read_triviaqa(path: Path) -> Iterator[tuple[int, Item]]:
    """A TriviaQA rc or unfiltered JSON file, with its evidence folder when present."""
    evidence = _evidence_dir(path)
    texts: dict[Path, str] = {}  # an evidence page shared by several questions is read once

    def evidence_text(rec: Record, sub: str, filename: str, field: str) -> str:
        assert evidence is not None
        file = evidence / sub / filename
        if file not in texts:
            try:
                texts[file] = file.read_text(encoding="utf-8").strip()
            except FileNotFoundError:
                raise rec.error(f"evidence file {file} does not exist", field) from None
            except UnicodeDecodeError:
                raise rec.error(f"evidence file {file} is not valid UTF-8", field) from None
        return texts[file]

    for line, rec in records(path, member="Data"):
        item_id = rec.ident("QuestionId")
        question = rec.str("Question")
        ans = rec.sub("Answer")
        value = ans.str("Value")
        aliases = ans.answers("Aliases") if ans.get("Aliases") else []
        answers = list(dict.fromkeys([value, *aliases]))
        docs: list[tuple[str, str]] = []
        gold: list[str] = []
        for key, sub in (("EntityPages", "wikipedia"), ("SearchResults", "web")):
            for j, page in enumerate(rec.list(key, required=False)):
                where = f"{key}[{j}]."
                if not isinstance(page, dict):
                    raise rec.error("must be an object", f"{key}[{j}]")
                title = rec.str("Title", where=where, obj=page, empty_ok=True)
                if key == "EntityPages" and title:
                    gold.append(title)
                if evidence is not None:
                    filename = rec.str("Filename", where=where, obj=page)
                    docs.append((title, evidence_text(rec, sub, filename, f"{where}Filename")))
        folded = [a.casefold() for a in answers]
        supporting = [n for n, (_, text) in enumerate(docs) if any(a in text.casefold() for a in folded)]
        meta: dict[str, Any] = {"source_format": "triviaqa", "evidence": "files" if evidence else "none"}
        if isinstance(rec.get("QuestionSource"), str):
            meta["question_source"] = rec.get("QuestionSource")
        yield line, make_item(rec, item_id, question, answers, docs, supporting, meta, gold)


def read_nq_open(path: Path) -> Iterator[tuple[int, Item]]:
    """NQ-open JSON Lines (``question`` + ``answer``), optionally with retrieved ``ctxs``."""
    for n, (line, rec) in enumerate(records(path)):
        item_id = rec.ident("id") if rec.has("id") else f"nq_open-{n}"
        question = rec.str("question")
        answers = rec.answers("answer" if rec.has("answer") or not rec.has("answers") else "answers")
        docs: list[tuple[str, str]] = []
        gold_flags: list[bool] = []
        answer_flags: list[bool] = []
        for j, ctx in enumerate(rec.list("ctxs", required=False)):
            where = f"ctxs[{j}]."
            if not isinstance(ctx, dict):
                raise rec.error("must be an object", f"ctxs[{j}]")
            title = rec.str("title", where=where, obj=ctx, empty_ok=True)
            docs.append((title, collapse(rec.str("text", where=where, obj=ctx, empty_ok=True))))
            gold_flags.append(ctx.get("isgold") is True)
            answer_flags.append(ctx.get("hasanswer") is True)
        flags = gold_flags if any(gold_flags) else answer_flags
        supporting = [j for j, flag in enumerate(flags) if flag]
        gold: list[str] = []
        annotated = rec.get("nq_annotated_gold")
        if isinstance(annotated, dict) and isinstance(annotated.get("title"), str):
            gold.append(annotated["title"])
        meta = {"source_format": "nq_open", "position": n}
        yield line, make_item(rec, item_id, question, answers, docs, supporting, meta, gold)


_OTHER_QA_KEYS = {"documents", "_id", "context", "paragraphs", "memory_answer", "golden_answers", "claim"}

register_format(
    Format(
        "flashrag",
        "FlashRAG dataset JSONL: id, question, golden_answers, metadata",
        read_flashrag,
        lambda k: {"question", "golden_answers"} <= k,
        infer_labels=True,
    )
)
register_format(
    Format(
        "triviaqa",
        "official TriviaQA rc / unfiltered JSON (+ evidence/ folder)",
        read_triviaqa,
        lambda k: "QuestionId" in k or "Question" in k,
    )
)
register_format(
    Format(
        "nq_open",
        "official NQ-open JSONL: question, answer",
        read_nq_open,
        lambda k: "question" in k and bool(k & {"answer", "answers"}) and not k & _OTHER_QA_KEYS,
        aliases=("nq-open", "nq"),
    )
)
