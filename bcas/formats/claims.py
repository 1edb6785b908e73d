"""Readers of the official FEVER and ConflictQA layouts.

- FEVER 1.0 (Thorne et al., 2018) ``paper_dev.jsonl`` / ``shared_task_dev.jsonl``:
  ``{"id", "claim", "label", "verifiable", "evidence": [[[annotation_id,
  evidence_id, page, sentence], ...], ...]}`` per line.  Claims only: the evidence
  pages are the ``gold`` references, matched by id against the FEVER
  ``wiki-pages`` corpus (``--bcas-corpus wiki-pages/``), whose page ids are the
  same strings.  The answer is the label; scoring is by label.
- ConflictQA (Xie et al., ICLR 2024) ``conflictQA-{popQA,strategyQA}-{model}.json``:
  one JSON object per line (JSON Lines despite the name; a JSON array also reads)
  with ``question``, ``ground_truth``, ``memory_answer``, ``parametric_memory``,
  ``counter_answer``, ``counter_memory`` and the two ``*_aligned_evidence`` texts.
  The four texts are the item's documents, untitled: ConflictQA gives them no titles,
  and a field name as title (``counter_memory``) would tell the model which side it
  reads; the side stays in ``meta["sides"]``, which no prompt reads.  StrategyQA ground truths (``True`` /
  ``False``) become ``yes`` / ``no``; PopQA ground truths are answer aliases.  The
  documents of the side that agrees with the ground truth are ``supporting``: for
  PopQA the side whose answer contains an alias, for StrategyQA the side whose
  statement has the ground truth's polarity (negated or not); when both or neither
  side qualifies, none is marked.  Ids are ``conflictqa-<n>`` by position.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bcas.formats.base import Format, register_format
from bcas.formats.common import make_item, records
from bcas.items import Item

FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


def read_fever(path: Path) -> Iterator[tuple[int, Item]]:
    """FEVER claims JSON Lines (train / dev; the unlabelled test file has no ``label``)."""
    for line, rec in records(path):
        item_id = rec.ident("id")
        claim = rec.str("claim")
        label = rec.str("label")
        if label not in FEVER_LABELS:
            raise rec.error(f"must be one of {', '.join(FEVER_LABELS)}, got {label!r}", "label")
        pages: list[str] = []
        sentences: list[list[Any]] = []
        for i, evidence_set in enumerate(rec.list("evidence")):
            if not isinstance(evidence_set, list):
                raise rec.error("must be a list of evidence sentences", f"evidence[{i}]")
            for j, ev in enumerate(evidence_set):
                if not isinstance(ev, list) or len(ev) != 4:
                    raise rec.error("must be [annotation id, evidence id, page, sentence]", f"evidence[{i}][{j}]")
                page, sentence = ev[2], ev[3]
                if page is None:
                    continue
                if not isinstance(page, str) or not page:
                    raise rec.error("must be a page id string or null", f"evidence[{i}][{j}][2]")
                if page not in pages:
                    pages.append(page)
                if [page, sentence] not in sentences:
                    sentences.append([page, sentence])
        meta = {"source_format": "fever", "label": label, "evidence_sentences": sentences}
        yield line, make_item(rec, item_id, claim, [label], (), (), meta, pages)


_NEGATION = re.compile(r"\b(?:not|no|never|cannot)\b|n't\b", re.IGNORECASE)
_TRUTH = {"true": "yes", "false": "no", "yes": "yes", "no": "no"}
_SIDES = (
    ("memory", ("parametric_memory", "parametric_memory_aligned_evidence")),
    ("counter", ("counter_memory", "counter_memory_aligned_evidence")),
)


def _gold_side(truth: list[str], yes_no: bool, memory_answer: str, counter_answer: str) -> str | None:
    answers = {"memory": memory_answer, "counter": counter_answer}
    if yes_no:
        polarity = truth[0] == "yes"
        agree = [side for side, text in answers.items() if (not _NEGATION.search(text)) == polarity]
    else:
        folded = [t.casefold() for t in truth]
        agree = [side for side, text in answers.items() if any(t in text.casefold() for t in folded)]
    return agree[0] if len(agree) == 1 else None


def read_conflictqa(path: Path) -> Iterator[tuple[int, Item]]:
    """ConflictQA PopQA or StrategyQA file."""
    for n, (line, rec) in enumerate(records(path)):
        item_id = rec.ident("id") if rec.has("id") else f"conflictqa-{n}"
        question = rec.str("question")
        truth = rec.answers("ground_truth")
        yes_no = all(t.strip().lower() in _TRUTH for t in truth)
        answers = list(dict.fromkeys(_TRUTH[t.strip().lower()] for t in truth)) if yes_no else truth
        if yes_no and len(answers) != 1:
            raise rec.error("holds both a true and a false value", "ground_truth")
        memory_answer = rec.str("memory_answer")
        counter_answer = rec.str("counter_answer")
        docs: list[tuple[str, str]] = []
        sides: list[str] = []
        for side, fields in _SIDES:
            for key in fields:
                docs.append(("", " ".join(rec.str(key).split())))
                sides.append(side)
        gold_side = _gold_side(answers, yes_no, memory_answer, counter_answer)
        supporting = [j for j, side in enumerate(sides) if side == gold_side]
        meta: dict[str, Any] = {
            "source_format": "conflictqa",
            "ground_truth_raw": rec.get("ground_truth"),
            "memory_answer": memory_answer,
            "counter_answer": counter_answer,
            "gold_side": gold_side,
            "sides": sides,
        }
        if isinstance(rec.get("popularity"), (int, float)):
            meta["popularity"] = rec.get("popularity")
        yield line, make_item(rec, item_id, question, answers, docs, supporting, meta)


register_format(
    Format(
        "fever",
        "official FEVER claims JSONL (wiki-pages as --bcas-corpus)",
        read_fever,
        lambda k: "claim" in k,
        task="fact-verification",
        scoring="label",
    )
)
register_format(
    Format(
        "conflictqa",
        "official ConflictQA JSON(L): question, ground_truth, memory/counter evidence",
        read_conflictqa,
        lambda k: "memory_answer" in k or "counter_memory" in k,
        infer_labels=True,
    )
)
