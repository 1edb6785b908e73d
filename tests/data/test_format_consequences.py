"""NQ-open retrieval outputs: which passages are gold evidence (``bcas.formats.qa``).

DPR-style ``ctxs`` mark a passage ``hasanswer`` when it merely contains an answer string
and ``isgold`` when it is the annotated gold passage.  Evidence recall and citation
scores read the supporting passages, so ``isgold`` must decide wherever a file has it.
"""

from __future__ import annotations

import json
from pathlib import Path

from bcas.data import load_dataset


def _nq_row(ctxs: list[dict[str, object]]) -> dict[str, object]:
    return {"question": "who wrote the play", "answers": ["Ann"], "ctxs": ctxs}


def test_isgold_decides_over_answer_string_matches(tmp_path: Path) -> None:
    ctxs = [
        {"id": "1", "title": "Ann (singer)", "text": "Ann sang in 1990.", "hasanswer": True, "isgold": False},
        {"id": "2", "title": "The play", "text": "The play was written by Ann.", "hasanswer": True, "isgold": True},
        {"id": "3", "title": "Other", "text": "Unrelated.", "hasanswer": False, "isgold": False},
    ]
    path = tmp_path / "nq-retrieved.jsonl"
    path.write_text(json.dumps(_nq_row(ctxs)) + "\n", encoding="utf-8")
    item = load_dataset(f"nq_open:{path}").items[0]
    gold_titles = [d.title for d in item.documents if d.id in item.supporting]
    assert gold_titles == ["The play"]  # the singer's passage only matches the answer string


def test_without_isgold_answer_matches_are_the_evidence(tmp_path: Path) -> None:
    ctxs = [
        {"id": "1", "title": "Ann (writer)", "text": "Ann wrote the play.", "hasanswer": True},
        {"id": "3", "title": "Other", "text": "Unrelated.", "hasanswer": False},
    ]
    path = tmp_path / "nq-retrieved.jsonl"
    path.write_text(json.dumps(_nq_row(ctxs)) + "\n", encoding="utf-8")
    item = load_dataset(f"nq_open:{path}").items[0]
    assert [d.title for d in item.documents if d.id in item.supporting] == ["Ann (writer)"]
