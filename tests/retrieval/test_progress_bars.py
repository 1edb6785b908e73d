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
