"""Headless Chromium through Playwright: the launch settings and what a page did.

The browser is Debian's Chromium (``find_chromium`` in tests/support/skips.py), launched by
Playwright with ``executable_path``; nothing is downloaded at test time. The fixtures
``browser`` and ``page`` (tests/conftest.py) launch with :func:`launch_args`, and
docs/screenshots.py launches the same way.

:class:`PageWatch` listens to a page and keeps what a test asserts on: uncaught exceptions,
``console.error``/``console.assert`` calls (Chromium reports a Content-Security-Policy
violation as a console error), JavaScript dialogs (dismissed at once) and every request's URL.
Network requests that would leave the machine (anything but ``file:``, ``data:``, ``blob:``,
``about:`` or a loopback address) are aborted and listed in ``foreign``; ``file:`` loads are
not routed, so a test checks ``requests`` with :func:`is_local` as well.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tests.support.skips import find_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, Request, Route

# No sandbox (the tests run as root in containers), no GPU, and nothing Chromium would
# fetch on its own (QUIC probes, component updates, sync, first-run pages).
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LOCAL_SCHEMES = ("file", "data", "blob", "about")
# Every figure of the page (bcas.report.vega's convention) drawn by Vega (an svg of class
# "marks") or marked failed by the loader (data-error).
FIGURES_SETTLED = """() => Array.from(document.querySelectorAll('figure.bcas-figure'))
  .every((f) => f.hasAttribute('data-error') || f.querySelector('div.vega-chart svg.marks'))"""
FIGURES_TIMEOUT_MS = 60_000


def launch_args() -> dict[str, Any]:
    """Keyword arguments of ``playwright.chromium.launch``: the system Chromium, headless, with CHROMIUM_FLAGS."""
    binary = find_chromium()
    if binary is None:
        raise RuntimeError("no Chromium binary found; install the Debian package 'chromium' or set BCAS_CHROMIUM")
    return {"executable_path": binary, "args": list(CHROMIUM_FLAGS), "headless": True}


def is_local(url: str) -> bool:
    """True for a URL that stays on this machine: a local scheme (a ``file:`` URL without a
    host: ``//evil.example/s.css`` in a file's page is ``file://evil.example/...``, another
    machine's share), or any scheme to a loopback host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme in LOCAL_SCHEMES:
        return parts.scheme != "file" or host in ("", "localhost")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class PageWatch:
    """What one page did while watched: its errors, its console, its requests.

    ``errors``: uncaught exceptions, console errors and assertions, and dialogs, one line each.
    ``console``: every console message as ``(type, text)``. ``requests``: every request URL,
    the page's own load included. ``foreign``: requests that would have left the machine
    (aborted).
    """

    page: Page
    errors: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    @classmethod
    def attach(cls, page: Page) -> PageWatch:
        watch = cls(page)
        page.on("pageerror", watch._on_error)
        page.on("console", watch._on_console)
        page.on("dialog", watch._on_dialog)
        page.on("request", watch._on_request)
        page.route("**/*", watch._on_route)
        return watch

    def open(self, path: str | Path) -> PageWatch:
        """Load ``path`` (a file) and wait for its load event, so every synchronous script has run,
        then for every figure to be drawn or to fail (vega-embed draws after the load event)."""
        self.page.goto(Path(path).resolve().as_uri(), wait_until="load")
        self.page.wait_for_function(FIGURES_SETTLED, timeout=FIGURES_TIMEOUT_MS)
        return self

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-like values come back as Python)."""
        return self.page.evaluate(expression)

    def _on_error(self, error: Exception) -> None:
        self.errors.append(f"uncaught: {error}")

    def _on_console(self, message: ConsoleMessage) -> None:
        self.console.append((message.type, message.text))
        if message.type in ("error", "assert"):
            self.errors.append(f"console.{message.type}: {message.text}")

    def _on_dialog(self, dialog: Dialog) -> None:
        self.errors.append(f"dialog {dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _on_request(self, request: Request) -> None:
        self.requests.append(request.url)

    def _on_route(self, route: Route) -> None:
        if is_local(route.request.url):
            route.continue_()
        else:
            self.foreign.append(route.request.url)
            route.abort()


@contextmanager
def opened(browser: Browser, path: str | Path, *, width: int = 1280, height: int = 900) -> Iterator[PageWatch]:
    """``path`` loaded in a fresh page (its own context) of ``browser`` at ``width`` × ``height``, watched."""
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        yield PageWatch.attach(context.new_page()).open(path)
    finally:
        context.close()
