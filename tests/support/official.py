"""Write the shipped samples back in each benchmark's official layout (and FlashRAG's).

The layouts follow the published descriptions: HotpotQA and 2WikiMultihopQA JSON
arrays (``_id``, ``context`` as ``[title, sentences]`` pairs, ``supporting_facts``),
MuSiQue JSON Lines (``paragraphs`` with ``is_supporting``), TriviaQA's ``Data``
object with an ``evidence/`` folder, FEVER claims plus ``wiki-pages`` JSONL,
NQ-open ``question``/``answer`` lines, ConflictQA lines, FlashRAG datasets and
corpora, and BEIR ``corpus.jsonl``.  Arrays are pretty-printed, so records span
many lines and the line numbers in error messages mean something.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bcas.data import load_dataset


def sentences(text: str) -> list[str]:
    """A paragraph cut after sentence ends, the later sentences with HotpotQA's leading space."""
    parts = re.split(r"(?<=[.!?]) (?=\S)", text)
    return [p if i == 0 else " " + p for i, p in enumerate(parts)]


def _write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _items(name: str, n: int) -> list[Any]:
    return list(load_dataset(name).items[:n])


def hotpotqa(path: Path, n: int = 12, name: str = "hotpotqa") -> Path:
    rows = []
    for it in _items(name, n):
        by_id = {d.id: d for d in it.documents}
        gold = [by_id[s].title for s in it.supporting]
        row = {
            "_id": it.id,
            "answer": it.answers[0],
            "question": it.question,
            "supporting_facts": [[t, 0] for t in gold],
            "context": [[d.title, sentences(d.text)] for d in it.documents],
            "type": it.meta.get("type", "bridge"),
        }
        if name == "hotpotqa":
            row["level"] = "hard"
        else:
            row["evidences"] = it.meta.get("evidences", [])
        rows.append(row)
    return _write_json(path, rows)


def twowiki(path: Path, n: int = 12) -> Path:
    return hotpotqa(path, n, name="2wikimultihopqa")


def musique(path: Path, n: int = 12) -> Path:
    rows = []
    for it in _items("musique", n):
        rows.append(
            {
                "id": it.id,
                "paragraphs": [
                    {"idx": j, "title": d.title, "paragraph_text": d.text, "is_supporting": d.id in it.supporting}
                    for j, d in enumerate(it.documents)
                ],
                "question": it.question,
                "question_decomposition": it.meta.get("question_decomposition", []),
                "answer": it.answers[0],
                "answer_aliases": list(it.answers[1:]),
                "answerable": True,
            }
        )
    return _write_jsonl(path, rows)


def triviaqa(root: Path, n: int = 8) -> Path:
    """``root/qa/wikipedia-dev.json`` and ``root/evidence/wikipedia/*.txt``; returns the JSON path."""
    data = []
    for it in _items("triviaqa", n):
        pages = []
        for j, d in enumerate(it.documents[:3]):
            filename = f"{it.id}_{j}.txt"
            (root / "evidence" / "wikipedia").mkdir(parents=True, exist_ok=True)
            (root / "evidence" / "wikipedia" / filename).write_text(d.text + "\n", encoding="utf-8")
            pages.append({"DocSource": "TagMe", "Filename": filename, "Title": d.title})
        data.append(
            {
                "Answer": {
                    "Aliases": list(it.answers),
                    "NormalizedAliases": [a.lower() for a in it.answers],
                    "Value": it.answers[0],
                    "Type": "WikipediaEntity",
                },
                "EntityPages": pages,
                "Question": it.question,
                "QuestionId": it.id,
                "QuestionSource": "http://www.triviacountry.com/",
                "SearchResults": [],
            }
        )
    # "Data" deliberately not first: the members around it are read and dropped.
    doc = {"Domain": "Wikipedia", "Version": 1.0, "Data": data, "Split": "dev", "VerifiedEval": False}
    return _write_json(root / "qa" / "wikipedia-dev.json", doc)


def fever_page_id(title: str) -> str:
    return title.replace(" ", "_").replace("(", "-LRB-").replace(")", "-RRB-").replace(":", "-COLON-")


def fever(claims: Path, wiki: Path, n: int = 20) -> tuple[Path, Path]:
    """FEVER claims (ids, labels, evidence pages of the sample) and a wiki-pages folder of its sentences."""
    rows, pages = [], {}
    for it in _items("fever", n):
        evidence = [[[7, 7, fever_page_id(t), s]] for t, s in it.meta["gold_evidence_pages"]]
        rows.append(
            {
                "id": it.meta["fever_id"],
                "verifiable": "VERIFIABLE",
                "label": it.answers[0],
                "claim": it.question,
                "evidence": evidence,
            }
        )
        for d in it.documents:
            pages.setdefault(fever_page_id(d.title), []).append(d.text)
    wiki_rows = [{"id": "", "text": "", "lines": ""}]  # the real dump starts with an empty page
    for page, texts in sorted(pages.items()):
        text = " ".join(texts).replace("(", "-LRB-").replace(")", "-RRB-")
        lines = "\n".join(f"{j}\t{t}" for j, t in enumerate(texts))
        wiki_rows.append({"id": page, "text": text, "lines": lines})
    _write_jsonl(wiki / "wiki-001.jsonl", wiki_rows[: len(wiki_rows) // 2])
    _write_jsonl(wiki / "wiki-002.jsonl", wiki_rows[len(wiki_rows) // 2 :])
    return _write_jsonl(claims, rows), wiki


def nq_open(path: Path, n: int = 12) -> Path:
    return _write_jsonl(path, [{"question": it.question, "answer": list(it.answers)} for it in _items("nq_open", n)])


def conflictqa(path: Path, n: int = 12) -> Path:
    rows = []
    for it in _items("conflictqa", n):
        # The shipped file keeps ConflictQA's order: memory, its evidence, counter, its evidence.
        keys = (
            "parametric_memory",
            "parametric_memory_aligned_evidence",
            "counter_memory",
            "counter_memory_aligned_evidence",
        )
        texts = {keys[int(d.id.rsplit("::", 1)[1])]: d.text for d in it.documents}
        rows.append(
            {
                "question": it.question,
                "popularity": it.meta.get("popularity", 0),
                "ground_truth": it.meta["ground_truth_raw"],
                "memory_answer": it.meta["memory_answer"],
                "parametric_memory": texts["parametric_memory"],
                "counter_answer": it.meta["counter_answer"],
                "counter_memory": texts["counter_memory"],
                "parametric_memory_aligned_evidence": texts["parametric_memory_aligned_evidence"],
                "counter_memory_aligned_evidence": texts["counter_memory_aligned_evidence"],
            }
        )
    return _write_jsonl(path, rows)


def flashrag_pair(
    folder: Path, n: int = 12, name: str = "hotpotqa", *, whole_collection: bool = True
) -> tuple[Path, Path, list[Any]]:
    """A FlashRAG dataset (questions only) and a FlashRAG corpus of the sample's whole collection.

    ``whole_collection=False``: the corpus holds the documents of the ``n`` items only (a
    dense index of it embeds a few hundred chunks, not the whole sample's thousands).
    """
    ds = load_dataset(name)
    items = list(ds.items[:n])
    rows = []
    for it in items:
        by_id = {d.id: d for d in it.documents}
        gold = [by_id[s].title for s in it.supporting]
        rows.append(
            {
                "id": it.id,
                "question": it.question,
                "golden_answers": list(it.answers),
                "metadata": {
                    "supporting_facts": {"title": gold, "sent_id": [0] * len(gold)},
                    "type": it.meta.get("type", ""),
                },
            }
        )
    dataset = _write_jsonl(folder / name / "dev.jsonl", rows)
    documents = ds.documents if whole_collection else [d for it in items for d in it.documents]
    corpus_rows = [{"id": str(j), "contents": f'"{d.title}"\n{d.text}'} for j, d in enumerate(documents)]
    corpus = _write_jsonl(folder / "corpus" / "wiki.jsonl", corpus_rows)
    return dataset, corpus, items


def beir_corpus(path: Path, name: str = "hotpotqa") -> Path:
    docs = load_dataset(name).documents
    return _write_jsonl(
        path, [{"_id": str(j), "title": d.title, "text": d.text, "metadata": {}} for j, d in enumerate(docs)]
    )
