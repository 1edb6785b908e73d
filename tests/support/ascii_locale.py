"""A plain-ASCII locale for tests of files written or read in UTF-8.

``io.text_encoding`` gives a text read or written without an encoding the locale's default;
patching it stands for ``LC_ALL=C`` without Python's UTF-8 coercion, in this process only.
"""

from __future__ import annotations

import io

import pytest


def ascii_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ASCII the default codec of every text file opened without an encoding."""
    monkeypatch.setattr(io, "text_encoding", lambda encoding, stacklevel=2: encoding or "ascii")
