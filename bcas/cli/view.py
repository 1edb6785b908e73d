"""``bcas view RUN_DIR... | FOLDER``: one static site over many run folders (:mod:`bcas.report.view`).

The site is written into ``--out`` (``index.html``, ``view.json``, ``pairs/``) and opened as a
file; with ``--serve`` it is also served on the loopback interface (``127.0.0.1``) until Ctrl-C
(or ``--serve-seconds``), one request at a time.  The server serves the site's folder and the
run folders it links to (their reports) and nothing else: any other path is a 404, and so is a
folder listing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from functools import partial
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import click

from bcas.cli.framework import fail


class _Handler(SimpleHTTPRequestHandler):
    """Files under the allowed folders only; no folder listings; no request log on the terminal."""

    allowed: tuple[Path, ...] = ()

    def translate_path(self, path: str) -> str:
        found = Path(super().translate_path(path)).resolve()
        if any(found == root or found.is_relative_to(root) for root in self.allowed):
            return str(found)
        return str(Path(self.directory) / ".bcas-view-not-served")  # a path that does not exist: 404

    def list_directory(self, path: str | os.PathLike[str]) -> Any:
        self.send_error(404, "No folder listings")
        return None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass


def serve_site(out: Path, run_dirs: Sequence[Path], port: int, seconds: float | None) -> None:
    """Serve ``out`` and ``run_dirs`` on 127.0.0.1:``port`` (0: a free port) until Ctrl-C or ``seconds``."""
    roots = tuple(p.resolve() for p in (out, *run_dirs))
    base = Path(os.path.commonpath(roots))
    handler = partial(type("ViewHandler", (_Handler,), {"allowed": roots}), directory=str(base))
    server = HTTPServer(("127.0.0.1", port), handler)
    server.timeout = 0.5
    start = Path(os.path.relpath(roots[0], base)).as_posix()
    url = f"http://127.0.0.1:{server.server_address[1]}/{'' if start == '.' else start + '/'}index.html"
    click.echo(f"serving {url} (Ctrl-C stops)", nl=True)
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        while deadline is None or time.monotonic() < deadline:
            server.handle_request()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.server_close()


@click.command(
    "view",
    short_help="One leaderboard over many run folders, as a static site.",  # pragma: no mutate
    help="One static site over many run folders (given, or found below FOLDER): a leaderboard per dataset x grid "  # pragma: no mutate
    "x configuration with Wilson intervals and paired differences (Newcombe, exact McNemar) where items overlap, "  # pragma: no mutate
    "filters, the flipped items of two runs with both trajectories, links to each run's report. From the "  # pragma: no mutate
    "records, as summary.json.",  # pragma: no mutate
)
@click.argument("paths", nargs=-1, required=True, metavar="RUN_DIR... | FOLDER")
@click.option(
    "--out", default="bcas-view", show_default=True, metavar="DIR", help="where the site is written"
)  # pragma: no mutate
@click.option("--serve", is_flag=True, help="also serve the site on 127.0.0.1 until Ctrl-C")  # pragma: no mutate
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="--serve's port (0: a free one)"
)  # pragma: no mutate
@click.option(
    "--serve-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="S",
    help="--serve stops after S seconds (default: at Ctrl-C)",  # pragma: no mutate
)
@click.option(
    "--max-pairs",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="pair pages (flipped items of two runs) written at most (default 200); the page says how many more "  # pragma: no mutate
    "there were",  # pragma: no mutate
)
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="show rows that differ in more than the model (dataset, prompt, configuration, metric) and list "  # pragma: no mutate
    "the differences on the page",  # pragma: no mutate
)
def view(
    paths: Sequence[str],
    out: str,
    serve: bool,
    port: int,
    serve_seconds: float | None,
    max_pairs: int | None,
    allow_mismatch: bool,
) -> int:
    from bcas.report.view import MAX_PAIRS, ViewError, build_view
    from bcas.report.view_pages import write_view

    target = Path(out)
    if target.exists() and not target.is_dir():
        fail(f"--out {out}: not a folder")
    if (serve_seconds is not None or port) and not serve:
        fail("--port and --serve-seconds go with --serve")
    try:
        site = build_view(paths, allow_mismatch=allow_mismatch, max_pairs=MAX_PAIRS if max_pairs is None else max_pairs)
    except ViewError as exc:
        fail(exc)
    index = write_view(site, target)
    for line in site.mismatches:
        click.echo(f"MISMATCH ALLOWED (--allow-mismatch): {line}")
    for note in site.notes:
        click.echo(f"note: {note}")
    click.echo(
        f"{len(site.runs)} runs, {len(site.tables)} tables, {len(site.pairs)} pair pages"
        + (f" ({site.pairs_left_out} more pairs left out: --max-pairs)" if site.pairs_left_out else "")
    )
    click.echo(f"view: {index}")
    if serve:
        serve_site(target, [r.path for r in site.runs], port, serve_seconds)
    return 0


__all__ = ["serve_site", "view"]
