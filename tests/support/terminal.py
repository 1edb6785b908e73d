"""Run a command on a pseudo-terminal and replay what it wrote on a minimal screen.

The screen understands what pytest and bcas write to a terminal: printable text (with
wrapping at the width), carriage return, line feed, backspace, and the ECMA-48 control
sequences for cursor up/down/forward/back, erase in line and erase below; colours (SGR)
and operating-system commands (pytest's OSC 9;4 progress) are read and ignored.
:class:`Screen` keeps every line ever written (no scrolling away), and records each
distinct line that was visible while the stream played (``seen``), so a test can ask
both "what did the reader see at some moment" and "what stays at the end".
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class Screen:
    def __init__(self, width: int = 120) -> None:
        self.width = width
        self.lines: list[list[str]] = [[]]
        self.row = 0
        self.col = 0
        self.seen: set[str] = set()

    def _line(self) -> list[str]:
        while len(self.lines) <= self.row:
            self.lines.append([])
        return self.lines[self.row]

    def _put(self, ch: str) -> None:
        if self.col >= self.width:
            self.row += 1
            self.col = 0
        line = self._line()
        while len(line) < self.col:
            line.append(" ")
        if self.col < len(line):
            line[self.col] = ch
        else:
            line.append(ch)
        self.col += 1

    def _csi(self, params: str, final: str) -> None:
        n = int(params.split(";")[0]) if params and params.split(";")[0].isdigit() else 0
        if final == "A":
            self.row = max(0, self.row - max(n, 1))
        elif final == "B":
            self.row += max(n, 1)
        elif final == "C":
            self.col = min(self.width - 1, self.col + max(n, 1))
        elif final == "D":
            self.col = max(0, self.col - max(n, 1))
        elif final == "K":
            line = self._line()
            if n == 0:
                del line[self.col :]
            elif n == 2:
                line.clear()
        elif final == "J" and n == 0:
            del self._line()[self.col :]
            del self.lines[self.row + 1 :]
        # "m" (colours) and anything else: no effect on the text

    def feed(self, text: str) -> None:
        text = _OSC.sub("", text)
        pos = 0
        while pos < len(text):
            m = _CSI.match(text, pos)
            if m:
                self._csi(m.group(1), m.group(2))
                pos = m.end()
                self._remember()
                continue
            ch = text[pos]
            pos += 1
            if ch == "\r":
                self.col = 0
            elif ch == "\n":
                self.row += 1
                self.col = 0
                self._line()
            elif ch == "\b":
                self.col = max(0, self.col - 1)
            elif ch == "\x1b" or ord(ch) < 32:
                continue
            else:
                self._put(ch)
            if ch == "\n":
                self._remember()

    def _remember(self) -> None:
        for line in self.lines:
            text = "".join(line).rstrip()
            if text:
                self.seen.add(text)

    def text(self) -> list[str]:
        """The screen now, one string per line, trailing blanks removed."""
        out = ["".join(line).rstrip() for line in self.lines]
        while out and not out[-1]:
            out.pop()
        return out


def run_on_terminal(
    argv: list[str], cwd: Path, env: dict[str, str], width: int = 120, timeout: float = 300.0
) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on a new pseudo-terminal ``width`` columns wide; (exit status, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**env, "COLUMNS": str(width), "TERM": "xterm"},
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError(f"{argv} ran past {timeout} s")
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the other side closed: every byte was read
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    return proc.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


def replay(output: str, width: int = 120) -> Screen:
    """The screen after ``output``; ``seen`` holds every line visible after any control sequence or line feed."""
    screen = Screen(width)
    screen.feed(output)
    return screen
