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


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 200), size=st.integers(2, 40), data=st.data())
def test_windows_cover_every_token_in_order(n, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    tokens = [f"t{i}" for i in range(n)]
    windows = split_paragraph(" ".join(tokens), size, overlap)
    seen = [tok for w in windows for tok in w.split()]
    assert set(seen) == set(tokens)
    assert all(len(w.split()) <= size for w in windows)
    if n <= size:
        assert len(windows) == 1


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
