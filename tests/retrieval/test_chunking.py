"""Chunking: paragraphs, windows with overlap, ids that map back to documents."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.data import Document, load_dataset
from bcas.retrieval.chunking import chunk_document, chunk_documents, collection_hash, split_paragraph


def test_short_paragraph_is_one_chunk_with_searchable_title():
    doc = Document("d1", "Paris", "Paris is the capital of France.")
    (chunk,) = chunk_document(doc)
    assert chunk.id == "d1#0" and chunk.doc_id == "d1" and chunk.title == "Paris"
    assert chunk.text == doc.text
    assert chunk.indexed_text == "Paris\nParis is the capital of France."


def test_long_paragraph_is_windowed_with_overlap():
    text = " ".join(f"w{i}" for i in range(25))
    windows = split_paragraph(text, chunk_tokens=10, chunk_overlap=3)
    assert [w.split()[0] for w in windows] == ["w0", "w7", "w14", "w21"]
    assert windows[-1].split()[-1] == "w24"
    assert all(len(w.split()) <= 10 for w in windows)
    assert windows[0].split()[-3:] == windows[1].split()[:3]


def test_blank_lines_separate_paragraphs():
    doc = Document("d", "T", "First paragraph here.\n\nSecond one.")
    assert [c.text for c in chunk_document(doc)] == ["First paragraph here.", "Second one."]
    assert [c.id for c in chunk_document(doc)] == ["d#0", "d#1"]


def check_windows(tokens: list[str], windows: list[str], size: int, overlap: int) -> None:
    """The windowing contract, stated on the tokens alone (independent of ``split_paragraph``).

    Window ``i`` is the run ``tokens[i*step : i*step + size]`` (``step = size - overlap``),
    cut short only at the paragraph's end, and the last window is the first to reach it.
    Hence: read in order, with each later window's first ``overlap`` tokens dropped, the
    windows spell the paragraph exactly once.
    """
    split = [w.split() for w in windows]
    if len(tokens) <= size:
        assert split == [tokens]
        return
    step = size - overlap
    for i, window in enumerate(split):
        assert window == tokens[i * step : i * step + size], f"window {i} is not the run starting at {i * step}"
    assert split[-1][-1] == tokens[-1] and (len(split) == 1 or split[-2][-1] != tokens[-1])
    rebuilt = split[0] + [tok for w in split[1:] for tok in w[overlap:]]
    assert rebuilt == tokens


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 200), size=st.integers(2, 40), data=st.data())
def test_windows_cover_every_token_in_order(n, size, data):
    """Every token once in reading order, runs of ``size`` at ``size - overlap`` steps.

    Catches reversed windows, a window emitted twice, a skipped or shifted window,
    an off-by-one step and a trailing window that only repeats the overlap
    (the set-of-tokens check this replaces passed all of them).
    """
    overlap = data.draw(st.integers(0, size - 1))
    tokens = [f"t{i}" for i in range(n)]
    windows = split_paragraph(" ".join(tokens), size, overlap)
    check_windows(tokens, windows, size, overlap)
    assert all(len(w.split()) <= size for w in windows)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda ws: ws[::-1],  # reversed
        lambda ws: ws + ws[-1:],  # last window twice
        lambda ws: ws[:1] + ws,  # first window twice
        lambda ws: ws[:-1],  # last window dropped
        lambda ws: [ws[0], *ws[2:]],  # a middle window dropped
    ],
    ids=["reversed", "last-twice", "first-twice", "tail-dropped", "middle-dropped"],
)
def test_window_property_rejects_broken_windowing(mutate):
    """Mutation check: the property above fails for each broken variant of ``split_paragraph``."""
    tokens = [f"t{i}" for i in range(25)]
    windows = split_paragraph(" ".join(tokens), 10, 3)
    check_windows(tokens, windows, 10, 3)  # the real output passes
    with pytest.raises(AssertionError):
        check_windows(tokens, mutate(windows), 10, 3)


def test_duplicate_document_ids_are_rejected():
    with pytest.raises(ValueError, match="occurs twice"):
        chunk_documents([Document("x", "", "a"), Document("x", "", "b")])


def test_hotpotqa_collection_chunks_and_hash_are_stable():
    docs = load_dataset("hotpotqa").documents
    chunks = chunk_documents(docs)
    assert len(chunks) >= len(docs)
    assert len({c.id for c in chunks}) == len(chunks)
    assert {c.doc_id for c in chunks} == {d.id for d in docs}
    assert collection_hash(chunks) == collection_hash(chunk_documents(docs))
    assert collection_hash(chunks) != collection_hash(chunk_documents(docs, chunk_tokens=64, chunk_overlap=8))
