"""Gold evidence from every layout that has it, mapped by id else by normalised title;
gold references that map to nothing are counted (``bcas.corpus.gold_evidence``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bcas.corpus import GoldEvidence, gold_evidence, open_corpus
from bcas.data import load_dataset
from bcas.formats import FORMATS, read_format

TESTS_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS_DIR))
from support import official  # noqa: E402


def read(spec: str, path: Path) -> tuple:
    return read_format(path, FORMATS.get(spec))[0]


def test_official_multihop_layouts_give_one_group_per_supporting_paragraph(tmp_path: Path) -> None:
    for name, write in (("hotpotqa", official.hotpotqa), ("2wikimultihopqa", official.twowiki)):
        items = read(name, write(tmp_path / f"{name}.json", n=4))
        sample = {it.id: it for it in load_dataset(name).items}
        for item_id, gold in gold_evidence(items).items():
            assert len(gold.groups) == len(sample[item_id].supporting) and gold.unmapped == ()
    items = read("musique", official.musique(tmp_path / "musique.jsonl", n=4))
    for item in items:
        gold = gold_evidence(items)[item.id]
        assert {i for g in gold.groups for i in g} >= set(item.supporting) and len(item.supporting) >= 1


def test_fever_evidence_pages_map_to_the_wiki_pages_by_id(tmp_path: Path) -> None:
    claims, wiki = official.fever(tmp_path / "claims.jsonl", tmp_path / "wiki", n=6)
    items = read("fever", claims)
    corpus = open_corpus(wiki)
    pages = {d.id for d in corpus}
    found = gold_evidence(items, corpus)
    for it in items:
        assert {i for g in found[it.id].groups for i in g} == set(it.gold) & pages
        assert set(found[it.id].unmapped) == set(it.gold) - pages  # a page the dump lacks is counted
    assert sum(len(f.unmapped) for f in found.values()) >= 1  # the sample cites a page it does not ship


def test_flashrag_supporting_titles_and_ids_with_a_corpus(tmp_path: Path) -> None:
    dataset, corpus, items = official.flashrag_pair(tmp_path, n=3)
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    titles = {d.id: d for d in open_corpus(corpus)}
    by_title = {d.title: i for i, d in titles.items()}
    first = rows[0]["metadata"]
    gold_titles = first.pop("supporting_facts")["title"]
    first["supporting_titles"] = [f"  {gold_titles[0]} "]  # normalised: surrounding white space
    first["supporting_ids"] = [int(by_title[gold_titles[1]])]  # an id, as FlashRAG's corpus ids are numbers
    rows[1]["metadata"]["supporting_titles"] = ["No Such Page"]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parsed = read("flashrag", dataset)
    found = gold_evidence(parsed, open_corpus(corpus))
    assert {titles[i].title for g in found[rows[0]["id"]].groups for i in g} == set(gold_titles)
    assert found[rows[1]["id"]].unmapped == ("No Such Page",)
    assert len(found[rows[1]["id"]].groups) == len(items[1].supporting)


def test_our_schema_supporting_and_gold_by_id_or_title(tmp_path: Path) -> None:
    path = tmp_path / "ours.jsonl"
    docs = [{"id": "d1", "title": "Alpha", "text": "a"}, {"id": "d2", "title": "Beta", "text": "b"}]
    rows = [
        {"id": "1", "question": "q", "answers": ["a"], "documents": docs, "supporting": ["d1"]},
        {"id": "2", "question": "q", "answers": ["a"], "documents": docs[:1], "gold": ["alpha", "d1", "Gamma"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = read("bcas", path)
    found = gold_evidence(items)
    assert found["1"] == GoldEvidence((frozenset({"d1"}),), ())
    # "alpha" is no title (titles compare case-sensitively after NFC and white space), "d1" an id
    assert found["2"] == GoldEvidence((frozenset({"d1"}),), ("alpha", "Gamma"))
