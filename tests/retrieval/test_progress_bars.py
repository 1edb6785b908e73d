"""Progress bars are drawn on a terminal only: a log file or a CI pipe gets none."""

from __future__ import annotations

import io
import sys

import pytest

from bcas.retrieval.bm25 import BM25Index

TEXTS = [f"project {i} has the codename alpha{i}" for i in range(50)]


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [False, True])
def test_a_bar_is_drawn_on_a_terminal_only(tty: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _Stream(tty)
    monkeypatch.setattr(sys, "stderr", stream)
    BM25Index.build(TEXTS, progress=True)
    drawn = "bm25: tokenise" in stream.getvalue()
    assert drawn is tty, repr(stream.getvalue()[:200])


def test_no_bar_when_not_asked_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _Stream(True)
    monkeypatch.setattr(sys, "stderr", stream)
    BM25Index.build(TEXTS, progress=False)
    assert stream.getvalue() == ""


class _Hashed:
    """A stand-in embedder (the real ones are exercised in test_dense.py): one vector per text."""

    name, model_id, dim = "hashed", "hashed", 4

    def encode(self, texts: list[str], batch_size: int = 64, **_: object) -> object:
        import numpy as np

        return np.ones((len(texts), 4), dtype=np.float32) / 2


@pytest.mark.parametrize("streamed", [False, True])
def test_an_embedding_says_what_it_embeds_about_how_long_then_its_progress_on_any_output(
    streamed: bool, tmp_path: object
) -> None:
    """Before the bulk of an index build: how many chunks and, from the first small batch, about how
    long; then a line at each tenth with an ETA (a log gets them too: no bar is needed)."""
    from pathlib import Path

    from bcas.retrieval.dense import embed_chunks
    from bcas.retrieval.embed_shards import embed_resumable
    from bcas.retrieval.progress import build_notes

    texts = [f"text {i}" for i in range(2000)]
    lines: list[str] = []
    with build_notes(lines.append):
        if streamed:
            embed_resumable(_Hashed(), lambda start: iter(texts[start:]), len(texts), Path(str(tmp_path)) / "w",
                            shard_size=700, progress=False)  # fmt: skip
        else:
            embed_chunks(_Hashed(), texts, progress=False)  # type: ignore[arg-type]
    assert lines[0] == "dense index: embedding with hashed: 2,000 chunks to embed", lines
    assert lines[1].startswith("dense index: embedding with hashed: about ") and "chunks/s" in lines[1], lines
    progress = [line for line in lines[2:] if "ETA" in line]
    done = [int(line.split(": ")[-1].split("/")[0].replace(",", "")) for line in progress]
    assert len(progress) >= 2 and done == sorted(done) and done[-1] < 2000, lines  # at most one line a tenth
