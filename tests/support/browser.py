"""Load a local HTML file in headless Chromium and report what happened.

The browser is driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: commands as NUL-terminated JSON on file descriptor 3,
replies and events on descriptor 4), so no websocket client and no open port are
needed.  :func:`load_page` opens a fresh tab, navigates to the file, waits for the
load event, evaluates an expression in the page, and returns the page's script
errors (uncaught exceptions, ``console.error``/``console.assert`` calls, and
browser log entries at level ``error``, which include Content-Security-Policy
violations) together with the value of the expression.

Structured events were chosen over ``--dump-dom --enable-logging=stderr``: the
stderr log prints every console message at one level with a version-dependent
wording (a CSP violation reads "Refused to execute ..." in some releases and
"Executing inline script violates ..." in others), while the protocol reports each
exception and each log entry with its level and source.

``screenshots`` (docs/screenshots.py) also writes PNG files of page regions, each clipped
to the rectangle a JavaScript expression returns, at a fixed viewport width.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--mute-audio",
)

# What a test usually wants to know about a page after its scripts ran.
DOM_FACTS = r"""
(() => {
  const onAttrs = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      if (a.name.toLowerCase().startsWith('on')) onAttrs.push(el.tagName.toLowerCase() + '[' + a.name + ']');
    }
  }
  const table = (id) => {
    const t = document.getElementById(id);
    if (!t) return null;
    return {
      headers: Array.from(t.querySelectorAll('thead th')).map((c) => c.textContent),
      rows: Array.from(t.tBodies[0] ? t.tBodies[0].rows : []).map((r) => Array.from(r.cells).map((c) => c.textContent)),
    };
  };
  return {
    title: document.title,
    body_data: Object.assign({}, document.body ? document.body.dataset : {}),
    window_pwned: typeof window.__pwned !== 'undefined',
    scripts: document.scripts.length,
    counts: Object.fromEntries(['img', 'svg', 'iframe', 'textarea', 'details', 'table', 'object', 'embed', 'link']
      .map((t) => [t, document.getElementsByTagName(t).length])),
    event_handler_attributes: onAttrs,
    summary: table('summary'),
    comparisons: table('comparisons'),
    text: document.body ? document.body.textContent : '',
    html: document.documentElement.outerHTML,
  };
})()
"""


# Chromium expects the pipe ends on descriptors 3 (commands) and 4 (replies).  A tiny
# Python trampoline puts them there and execs the browser: copies above 9 first, so
# neither end is overwritten when the other lands; ``sh`` redirections cannot do this
# portably (dash accepts only single-digit descriptors).
_MOVE_FDS_AND_EXEC = (
    "import fcntl, os, sys\n"
    "r, w = (fcntl.fcntl(int(fd), fcntl.F_DUPFD_CLOEXEC, 10) for fd in sys.argv[1:3])\n"
    "os.dup2(r, 3)\n"
    "os.dup2(w, 4)\n"
    "for fd in {int(a) for a in sys.argv[1:3]} - {3, 4}:\n"
    "    os.close(fd)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


class BrowserError(RuntimeError):
    """Chromium could not be started, or it did not answer in time; the message says which."""


def find_chromium() -> str | None:
    """Path of a Chromium binary: ``$BCAS_CHROMIUM``, else the first of the usual names on PATH."""
    env = os.environ.get("BCAS_CHROMIUM")
    if env:
        return env if Path(env).is_file() else shutil.which(env)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


skip_if_no_chromium = pytest.mark.skipif(
    find_chromium() is None,
    reason="headless Chromium not found (apt-get install chromium, or BCAS_INSTALL_BROWSER=1 bash .ci/install, "
    "or set BCAS_CHROMIUM to its path)",
)


@dataclass
class PageLoad:
    """What loading one page produced.

    ``errors``: uncaught exceptions, console errors, error-level log entries and
    JavaScript dialogs (``alert``, ``confirm``, ``prompt``; dismissed at once), one
    line each.  ``console``: every console call and log entry as ``(level, text)``.
    ``value``: the evaluated expression's value (``DOM_FACTS`` by default).
    ``requests``: the URL of every request the page made, its own load included.
    """

    url: str
    errors: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    value: Any = None
    requests: list[str] = field(default_factory=list)


class _DevToolsPipe:
    """The DevTools protocol over Chromium's ``--remote-debugging-pipe`` descriptors."""

    def __init__(self, write_fd: int, read_fd: int, proc: subprocess.Popen[bytes]) -> None:
        self.write_fd = write_fd
        self.read_fd = read_fd
        self.proc = proc
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None) -> int:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session_id:
            message["sessionId"] = session_id
        payload = json.dumps(message).encode() + b"\0"
        view = memoryview(payload)
        try:
            while view:
                view = view[os.write(self.write_fd, view) :]
        except BrokenPipeError:
            raise BrowserError(f"Chromium stopped reading the DevTools pipe (exit status {self.proc.poll()})") from None
        return self.next_id

    def receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer on the DevTools pipe in time")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                try:
                    status: int | None = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    status = None
                raise BrowserError(f"Chromium closed the DevTools pipe (exit status {status})")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(raw)
        if message.get("method") == "Page.javascriptDialogOpening":
            # alert()/confirm() would stall the page until answered: dismiss at once (recorded as an error).
            self.send("Page.handleJavaScriptDialog", {"accept": False}, message.get("sessionId"))
        return message

    def call(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None, *, deadline: float
    ) -> dict[str, Any]:
        """Send a command and return its result; events that arrive meanwhile are queued."""
        wanted = self.send(method, params, session_id)
        while True:
            message = self.receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"DevTools {method} failed: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str, session_id: str, *, deadline: float) -> dict[str, Any]:
        """The first queued or arriving event ``method`` of ``session_id``."""
        for i, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session_id:
                return self.events.pop(i)
        while True:
            message = self.receive(deadline)
            if message.get("method") == method and message.get("sessionId") == session_id:
                return message
            if "method" in message:
                self.events.append(message)


def _describe_exception(details: dict[str, Any]) -> str:
    exc = details.get("exception") or {}
    text = exc.get("description") or details.get("text") or "exception"
    return f"uncaught: {text} ({details.get('url', '')}:{details.get('lineNumber', '?')})"


def _console_text(args: list[dict[str, Any]]) -> str:
    return " ".join(str(a.get("value", a.get("description", a.get("type", "")))) for a in args)


def load_page(
    path: str | os.PathLike[str],
    expression: str = DOM_FACTS,
    timeout_s: float = 60.0,
    *,
    screenshots: Sequence[tuple[Path, str]] = (),
    width: int = 1200,
) -> PageLoad:
    """Load ``path`` in a fresh headless Chromium; return its errors and ``expression``'s value.

    The expression is evaluated after the load event, so every synchronous script of
    the page has run.  It runs with DevTools privileges (the page's own
    Content-Security-Policy does not apply to it) and must return a JSON-serialisable
    value.  Raises :class:`BrowserError` when Chromium is missing, fails to start or
    does not answer within ``timeout_s``.

    ``screenshots``: ``(png_path, clip)`` pairs; after the expression ran, each ``clip``
    expression returns ``{x, y, width, height}`` in page coordinates and that region of
    the page, rendered ``width`` CSS pixels wide, is written to ``png_path``.
    """
    binary = find_chromium()
    if binary is None:
        raise BrowserError("no Chromium binary found; install the Debian package 'chromium' or set BCAS_CHROMIUM")
    url = Path(path).resolve().as_uri()
    deadline = time.monotonic() + timeout_s
    commands_r, commands_w = os.pipe()
    replies_r, replies_w = os.pipe()
    with tempfile.TemporaryDirectory(prefix="bcas-chromium-") as profile, tempfile.TemporaryFile() as log:
        argv = [
            sys.executable,
            "-c",
            _MOVE_FDS_AND_EXEC,
            str(commands_r),
            str(replies_w),
            binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(commands_r, replies_w),
                start_new_session=True,  # its own process group, so its helpers go with it
            )
        except OSError as exc:
            os.close(commands_w)
            os.close(replies_r)
            raise BrowserError(f"could not start {binary}: {exc}") from None
        finally:
            os.close(commands_r)
            os.close(replies_w)
        pipe = _DevToolsPipe(commands_w, replies_r, proc)
        closing = False
        try:
            page = PageLoad(url=url)
            target = pipe.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
            session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True}, deadline=deadline)[
                "sessionId"
            ]
            for domain in ("Page", "Runtime", "Log", "Network"):
                pipe.call(f"{domain}.enable", session_id=session, deadline=deadline)
            if screenshots:
                metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
                pipe.call("Emulation.setDeviceMetricsOverride", metrics, session, deadline=deadline)
            pipe.events.clear()  # about:blank's own messages are not the page's
            navigation = pipe.call("Page.navigate", {"url": url}, session, deadline=deadline)
            if navigation.get("errorText"):
                raise BrowserError(f"navigating to {url} failed: {navigation['errorText']}")
            pipe.wait_for("Page.loadEventFired", session, deadline=deadline)
            result = pipe.call(
                "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session, deadline=deadline
            )
            if "exceptionDetails" in result:
                raise BrowserError(f"the test expression threw: {_describe_exception(result['exceptionDetails'])}")
            page.value = result.get("result", {}).get("value")
            for png, clip in screenshots:
                box = pipe.call(
                    "Runtime.evaluate", {"expression": clip, "returnByValue": True}, session, deadline=deadline
                )
                rect = box.get("result", {}).get("value")
                if not isinstance(rect, dict) or not all(k in rect for k in ("x", "y", "width", "height")):
                    raise BrowserError(f"the clip of {png} returned {rect!r}, not {{x, y, width, height}}")
                shot = pipe.call(
                    "Page.captureScreenshot",
                    {"format": "png", "clip": {**rect, "scale": 1}, "captureBeyondViewport": True},
                    session,
                    deadline=deadline,
                )
                Path(png).write_bytes(base64.b64decode(shot["data"]))
            # One more round trip, so events the expression caused (a request, an error) have arrived.
            pipe.call("Runtime.evaluate", {"expression": "0"}, session, deadline=deadline)
            for event in pipe.events:
                if event.get("sessionId") != session:
                    continue
                method, params = event.get("method"), event.get("params", {})
                if method == "Runtime.exceptionThrown":
                    text = _describe_exception(params.get("exceptionDetails", {}))
                    page.errors.append(text)
                    page.console.append(("exception", text))
                elif method == "Runtime.consoleAPICalled":
                    kind, text = params.get("type", ""), _console_text(params.get("args", []))
                    page.console.append((kind, text))
                    if kind in ("error", "assert"):
                        page.errors.append(f"console.{kind}: {text}")
                elif method == "Network.requestWillBeSent":
                    page.requests.append(str(params.get("request", {}).get("url", "")))
                elif method == "Page.javascriptDialogOpening":
                    text = f"dialog {params.get('type', '')}: {params.get('message', '')}"
                    page.errors.append(text)
                    page.console.append(("dialog", text))
                elif method == "Log.entryAdded":
                    entry = params.get("entry", {})
                    level, text = entry.get("level", ""), entry.get("text", "")
                    page.console.append((level, text))
                    if level == "error":
                        page.errors.append(f"{entry.get('source', 'log')}: {text}")
            closing = True
            try:
                pipe.call("Browser.close", deadline=min(deadline, time.monotonic() + 10))
            except BrowserError:
                pass  # it may close the pipe before it answers
            return page
        except BrowserError as exc:
            log.seek(0)
            tail = log.read()[-2000:].decode("utf-8", "replace")
            raise BrowserError(f"{exc}; Chromium's output ends with:\n{tail}") from None
        finally:
            try:
                proc.wait(timeout=10 if closing else 0.1)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leftover renderer or zygote processes of this browser only
            except ProcessLookupError:
                pass
            proc.wait()
            os.close(commands_w)
            os.close(replies_r)
