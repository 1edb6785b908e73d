"""What a reader of "Items across configurations" loses when the table breaks.

The table is where a reader goes to see *which* questions a change won or lost: a cell
that marks a wrong answer right, shows another epoch's answer, counts the documents of
another step, or a column that merges two models (or splits one configuration that two
grids share into two columns that look like a difference) sends them to the wrong items.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bcas.report import html_items
from bcas.report.html_items import _cell, _table, columns, documents_seen, items_section


def _rec(item: str, *, grid: str = "g", model: str = "m", config: str = "c1", label: str = "bm25/s1", **fields):
    rec = {
        "item_id": item,
        "question": f"question {item}?",
        "dataset": "hotpotqa",
        "model": model,
        "config_id": config,
        "label": label,
        "prediction": "paris",
        "answers": ["Paris"],
        "correct_em": True,
        "epoch": 0,
        "searches_used": 2,
        "tokens_in": 1200,
        "tokens_out": 34,
        "steps": [{"docs": ["d1", "d2"]}, {"docs": ["d2", "d3"]}],
        "extra": {"grid": grid},
    }
    rec.update(fields)
    return rec


def test_the_documents_an_answer_saw_are_its_searches_documents_once_each_in_order():
    assert documents_seen(_rec("q1")) == ["d1", "d2", "d3"]
    assert documents_seen(_rec("q1", steps=[{"docs": None}, {}])) == []
    assert documents_seen(_rec("q1", steps=None)) == []
    # MADARA: the documents in the answer's context, not whatever its steps list
    madara = _rec("q1", extra={"grid": "g", "context_doc_ids": [7, "d9", 7]})
    assert documents_seen(madara) == ["7", "d9"]
    # an empty context list is no context: the steps' documents are what it saw
    assert documents_seen(_rec("q1", extra={"grid": "g", "context_doc_ids": []})) == ["d1", "d2", "d3"]
    assert documents_seen(_rec("q1", extra=None)) == ["d1", "d2", "d3"]


def test_a_cell_shows_the_mark_answer_searches_tokens_and_documents_of_its_record():
    col = {"metric": "correct_em"}
    assert _cell(col, _rec("q1")) == {
        "state": "1",
        "cls": "ok",
        "mark": "✔",
        "prediction": "paris",
        "searches": 2,
        "tokens": "1,234",
        "docs": "d1, d2, d3",
        "n_docs": 3,
    }
    wrong = _cell(col, _rec("q1", correct_em=False, prediction="rome", searches_used=None, tokens_in=None))
    assert wrong is not None
    assert (wrong["state"], wrong["cls"], wrong["mark"], wrong["prediction"]) == ("0", "bad", "✘", "rome")
    assert (wrong["searches"], wrong["tokens"]) == (0, "34")
    no_out = _cell(col, _rec("q1", tokens_in=5, tokens_out=None))
    assert no_out is not None and no_out["tokens"] == "5"  # tokens not recorded count 0, not 1
    # not graded in this metric: neither right nor wrong
    ungraded = _cell(col, _rec("q1", correct_em=None))
    assert ungraded is not None and (ungraded["state"], ungraded["cls"], ungraded["mark"]) == ("", "none", "?")
    # an item that is not in this column: no cell, not an empty answer
    assert _cell(col, None) is None


def test_an_item_that_ended_in_error_shows_the_error_and_counts_as_wrong():
    cell = _cell({"metric": "correct_em"}, _rec("q1", prediction="", error="engine died", correct_em=True))
    assert cell is not None
    assert (cell["mark"], cell["prediction"]) == ("✘", "(error) engine died")
    # an empty answer without an error shows nothing, and is wrong
    empty = _cell({"metric": "correct_em"}, _rec("q1", prediction=None, correct_em=True))
    assert empty is not None and (empty["mark"], empty["prediction"]) == ("✘", "")


def test_the_mark_follows_the_grids_primary_metric_not_squad_em():
    # strict EM (MADARA §5.4): "the paris" is SQuAD-correct but not strictly
    rec = _rec("q1", prediction="the paris", correct_em=True)
    grids = {"g": SimpleNamespace(entries=[], primary_metric="strict_em")}
    (col,) = columns([rec], grids)["hotpotqa"]
    assert col["metric"] == "strict_em"
    cell = _cell(col, rec)
    assert cell is not None and cell["mark"] == "✘"
    (plain,) = columns([rec], {})["hotpotqa"]
    assert plain["metric"] == "correct_em"
    cell = _cell(plain, rec)
    assert cell is not None and cell["mark"] == "✔"


def test_one_configuration_that_two_grids_ran_is_one_column_and_each_model_its_own():
    recs = [
        _rec("q1", grid="a"),
        _rec("q1", grid="b"),  # the same configuration and model under another grid: the same answers
        _rec("q1", grid="a", model="other"),
        _rec("q1", grid="a", config="c2", label="bm25/s0"),
        _rec("q1", grid="a", config="c3", label="bm25/s3", dataset="musique"),
    ]
    by_dataset = columns(recs, {})
    assert list(by_dataset) == ["hotpotqa", "musique"]
    cols = by_dataset["hotpotqa"]
    # sorted by label, then model
    assert [(c["label"], c["model"], c["grids"]) for c in cols] == [
        ("bm25/s0", "m", ["a"]),
        ("bm25/s1", "m", ["a", "b"]),
        ("bm25/s1", "other", ["a"]),
    ]
    assert [(c["label"], c["grids"]) for c in by_dataset["musique"]] == [("bm25/s3", ["a"])]
    assert columns([], {}) == {}


def test_with_several_epochs_a_cell_shows_epoch_zero():
    recs = [
        _rec("q1", epoch=1, prediction="rome", correct_em=False),
        _rec("q1", epoch=0, prediction="paris"),
        _rec("q2", epoch=2, prediction="berlin"),
        _rec("q3", epoch=None, prediction="oslo"),  # a record without an epoch is epoch 0
    ]
    (col,) = columns(recs, {})["hotpotqa"]
    assert {k: r["prediction"] for k, r in col["by_item"].items()} == {"q1": "paris", "q3": "oslo"}


def test_the_table_lists_every_item_of_any_column_once_with_the_question_from_its_first_column():
    recs = [
        _rec("q2", question="second?"),
        _rec("q1", question="first?"),
        _rec("q3", model="other", question="x" * 200),
        _rec("q1", model="other", question="first, as the other column asked it?"),
    ]
    table = _table(4, "hotpotqa", columns(recs, {})["hotpotqa"])
    assert table["id"] == "items-4" and table["dataset"] == "hotpotqa" and table["more"] == ""
    assert table["columns"] == [
        {"heading": "m · bm25/s1", "model": "m", "config": "bm25/s1", "grids": "g"},
        {"heading": "other · bm25/s1", "model": "other", "config": "bm25/s1", "grids": "g"},
    ]
    rows = table["rows"]
    assert [r["item"] for r in rows] == ["q1", "q2", "q3"]
    assert rows[0]["question"] == "first?"
    assert rows[2]["question"] == "x" * 160  # long questions are cut, not dropped
    assert rows[0]["data"] == {"dataset": "hotpotqa"}
    # q2 only in the first column, q3 only in the second
    assert rows[1]["cells"][1] is None and rows[1]["cells"][0] is not None
    assert rows[2]["cells"][0] is None and rows[2]["cells"][1] is not None


def test_a_run_with_more_items_than_the_limit_lists_the_first_and_says_how_many_there_are(monkeypatch):
    monkeypatch.setattr(html_items, "ITEM_LIMIT", 2)
    table = _table(0, "hotpotqa", columns([_rec(f"q{i}") for i in range(5)], {})["hotpotqa"])
    assert [r["item"] for r in table["rows"]] == ["q0", "q1"]
    assert table["more"] == " (first 2 of 5 items)"
    at_limit = _table(0, "hotpotqa", columns([_rec(f"q{i}") for i in range(2)], {})["hotpotqa"])
    assert at_limit["more"] == ""


def test_the_section_renders_each_datasets_table_and_is_empty_without_items():
    assert str(items_section([], {})) == ""
    html = str(
        items_section(
            [
                _rec("q1"),
                _rec("q1", model="other", correct_em=False, prediction="<b>rome</b>"),
                _rec("q9", dataset="nq"),
            ],
            {},
        )
    )
    assert html.count('<table class="sortable items"') == 2
    assert 'id="items-0"' in html and 'id="items-1"' in html
    assert "✔ paris" in html and "✘ &lt;b&gt;rome&lt;/b&gt;" in html  # escaped, never markup
    assert "2 srch · 1,234 tok" in html and '<span title="d1, d2, d3">3 docs</span>' in html
    assert 'data-ok="1"' in html and 'data-ok="0"' in html


@pytest.mark.parametrize("extra", [{"grid": "g", "context_doc_ids": "d1"}, {"grid": "g", "context_doc_ids": None}])
def test_a_context_that_is_not_a_list_is_not_read_as_documents(extra):
    assert documents_seen(_rec("q1", extra=extra)) == ["d1", "d2", "d3"]


def test_an_item_without_a_question_shows_none_and_a_configuration_two_grids_ran_names_both():
    recs = [_rec("q1"), _rec("q1", grid="h")]
    del recs[0]["question"]
    del recs[1]["question"]
    table = _table(0, "hotpotqa", columns(recs, {})["hotpotqa"])
    assert table["rows"][0]["question"] == ""
    assert table["columns"] == [{"heading": "m · bm25/s1", "model": "m", "config": "bm25/s1", "grids": "g, h"}]
