"""Streaming readers of JSON Lines and JSON-array files that know each record's line.

A 600 MB TriviaQA file or a 14 GB passage corpus is read one record at a time:
``iter_jsonl`` walks lines; ``iter_json_array`` walks the elements of a top-level
JSON array (or of one array member of a top-level object, e.g. TriviaQA's
``Data``) without parsing the whole document.  It reads the file in chunks, finds
where each element ends with a regular-expression scan over strings and brackets
(strings are skipped whole, so brackets inside them do not count), and parses
only that element with ``json.loads``.  Every record comes with the line it starts
on, so a malformed record is reported as ``file:line``.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

from bcas.items import DatasetError

CHUNK_CHARS = 1 << 20

# One complete JSON string, or a bracket, or a lone quote (a string cut by the
# end of the buffer: read more and scan again from that quote).
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}"]')
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_SCALAR = re.compile(r"[^\s,\]\}:]*")
_SPACE = re.compile(r"[ \t\r\n]*")


JSONL_HINT = "expected JSONL: one JSON object per line"


def jsonl_hint(raw: bytes | str) -> str:
    """``(expected JSONL ...)`` for a line that is not JSON, with what the file seems to hold instead."""
    line = (raw.encode("utf-8", "replace") if isinstance(raw, str) else raw).strip()
    if line.startswith(b"["):
        return (
            f"({JSONL_HINT}; this file holds a JSON array: write one object per line, or name its layout "
            "as FORMAT:PATH)"
        )
    if b"," in line and not line.startswith(b"{"):
        return f"({JSONL_HINT}; this looks like CSV, which is not read: convert each row to a JSON object)"
    return f"({JSONL_HINT})"


UTF8_BOM = b"\xef\xbb\xbf"  # written first by some editors and by Python's "utf-8-sig"


def parse_lines(path: Path, lines: Iterable[bytes]) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed value)`` of every non-blank line of JSON Lines ``lines`` read from ``path``.

    A UTF-8 byte-order mark before the first line is dropped (it is no JSON, and no data).
    """
    for line_no, raw in enumerate(lines, start=1):
        if line_no == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(path, line_no, f"is not valid UTF-8 (byte offset {exc.start})") from None
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                path, line_no, f"invalid JSON: {exc.msg} at column {exc.colno} {jsonl_hint(raw)}"
            ) from None
        yield line_no, value


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed value)`` of every non-blank line of a JSON Lines file."""
    path = Path(path)
    with path.open("rb") as fh:
        yield from parse_lines(path, fh)


class _Reader:
    """A growing text buffer over a file, with the line number of the read position."""

    def __init__(self, path: Path, fh: Any):
        self.path = path
        self.fh = fh
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()  # a leading BOM is dropped
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False

    def fill(self) -> bool:
        """Append the next chunk; False at the end of the file."""
        if self.eof:
            return False
        raw = self.fh.read(CHUNK_CHARS)
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            line = self.line + self.buf.count("\n", self.pos)
            raise DatasetError(self.path, line, f"is not valid UTF-8 (near byte {exc.start} of a chunk)") from None
        if not raw:
            self.eof = True
        self.buf += text
        return bool(raw)

    def compact(self) -> None:
        if self.pos > CHUNK_CHARS:
            self.buf = self.buf[self.pos :]
            self.pos = 0

    def advance(self, end: int) -> None:
        self.line += self.buf.count("\n", self.pos, end)
        self.pos = end

    def peek(self) -> str | None:
        """The next non-blank character (not consumed), or None at the end of the file."""
        while True:
            space = _SPACE.match(self.buf, self.pos)
            assert space is not None  # the pattern matches the empty string too
            self.advance(space.end())
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return None

    def error(self, message: str, line: int | None = None) -> DatasetError:
        return DatasetError(self.path, line if line is not None else self.line, message)

    def expect(self, chars: str) -> str:
        c = self.peek()
        if c is None or c not in chars:
            got = "end of file" if c is None else repr(c)
            raise self.error(f"invalid JSON: expected {' or '.join(repr(x) for x in chars)}, got {got}")
        self.advance(self.pos + 1)
        return c

    def value_end(self) -> int:
        """Where the JSON value starting at ``pos`` ends (reads more of the file as needed)."""
        start = self.pos
        first = self.buf[start]
        if first in "[{":
            depth = 0
            scan = start
            while True:
                m = _TOKEN.search(self.buf, scan)
                if m is None or m.group() == '"':
                    if not self.fill():
                        raise self.error("invalid JSON: the value starting here is not closed")
                    if m is not None:
                        scan = m.start()
                    continue
                tok = m.group()
                scan = m.end()
                if tok[0] == '"':
                    continue
                if tok in "[{":
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        return scan
        pattern = _STRING if first == '"' else _SCALAR
        while True:
            m = pattern.match(self.buf, start)
            if m is not None and (m.end() < len(self.buf) or self.eof):
                if m.end() == start:
                    raise self.error(f"invalid JSON: unexpected {first!r}")
                return m.end()
            if not self.fill():
                if m is None:
                    raise self.error("invalid JSON: unterminated string")

    def read_value(self) -> tuple[int, Any]:
        """Parse the value at the read position; ``(its first line, value)``."""
        if self.peek() is None:
            raise self.error("invalid JSON: unexpected end of file")
        self.compact()
        line = self.line
        end = self.value_end()
        try:
            value = json.loads(self.buf[self.pos : end])
        except json.JSONDecodeError as exc:
            raise self.error(f"invalid JSON: {exc.msg}", line + exc.lineno - 1) from None
        self.advance(end)
        return line, value


def _iter_array(reader: _Reader) -> Iterator[tuple[int, Any]]:
    reader.expect("[")
    if reader.peek() == "]":
        reader.advance(reader.pos + 1)
        return
    while True:
        yield reader.read_value()
        if reader.expect(",]") == "]":
            return


def iter_json_array(path: str | Path, member: str | None = None) -> Iterator[tuple[int, Any]]:
    """``(line, element)`` of a top-level JSON array, streamed.

    With ``member``, the top level is an object and the elements of its array
    member ``member`` are streamed (other members are parsed and dropped).
    """
    path = Path(path)
    with path.open("rb") as fh:
        reader = _Reader(path, fh)
        first = reader.peek()
        if member is None:
            if first != "[":
                raise reader.error("expected a JSON array ('[') at the top level")
            yield from _iter_array(reader)
        else:
            found = False
            reader.expect("{")
            if reader.peek() == "}":
                reader.advance(reader.pos + 1)
            else:
                while True:
                    if reader.peek() != '"':
                        raise reader.error("invalid JSON: expected an object key")
                    _, key = reader.read_value()
                    reader.expect(":")
                    if key == member and reader.peek() == "[":
                        found = True
                        yield from _iter_array(reader)
                    else:
                        reader.read_value()
                    if reader.expect(",}") == "}":
                        break
            if not found:
                raise DatasetError(path, None, "is missing (expected a top-level array member)", member)
        if reader.peek() is not None:
            raise reader.error("invalid JSON: extra data after the top-level value")


def first_char(path: str | Path) -> str | None:
    """The first non-blank character of a file (None when it is empty or blank)."""
    with Path(path).open("rb") as fh:
        while True:
            chunk = fh.read(4096)
            if not chunk:
                return None
            stripped = chunk.lstrip(b" \t\r\n\xef\xbb\xbf")
            if stripped:
                return chr(stripped[0])


def iter_records(path: str | Path, member: str | None = None) -> Generator[tuple[int, Any], None, None]:
    """``(line, record)`` of a JSON Lines file, a JSON array, or (``member``) an object's array.

    A ``.jsonl`` file is JSON Lines.  Otherwise the file tells: ``[`` opens an
    array; an object whose first line is not a complete JSON value is a
    pretty-printed JSON document (its ``member`` array is streamed); anything else
    is JSON Lines.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    c = None if path.suffix.lower() == ".jsonl" else first_char(path)
    if c == "[":
        yield from iter_json_array(path)
        return
    if c == "{" and member is not None and not _first_line_is_json(path):
        yield from iter_json_array(path, member)
        return
    for line, obj in iter_jsonl(path):
        if member is not None and line == 1 and isinstance(obj, dict) and isinstance(obj.get(member), list):
            # a whole JSON document on one line: its array is already in memory
            for element in obj[member]:
                yield 1, element
            return
        yield line, obj


def _first_line_is_json(path: Path) -> bool:
    with path.open("rb") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    return False
                return True
    return False


def first_record(path: str | Path, member: str | None = None) -> tuple[int, Any] | None:
    """The first record ``iter_records`` would yield, or None for an empty file."""
    records = iter_records(path, member)
    try:
        return next(records, None)
    finally:
        records.close()
