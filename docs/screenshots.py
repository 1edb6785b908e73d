"""Screenshots of the HTML report for the docs, from a real run rendered by headless Chromium.

Runs the ``smoke`` grid on the ``mock:gold`` backend (a real BM25 / hybrid index over the
shipped samples, a record per item, the report the harness writes; no model time), loads
its ``index.html`` in headless Chromium through Playwright, launched as the browser tests
launch it (``tests/support/chromium.py``: Debian's Chromium by ``executable_path``, nothing
downloaded), and writes one PNG per report section into ``docs/images/``:

* ``report-summary.png``: the title, filters, notes and the summary table;
* ``report-figures.png``: the papers' figures drawn from the run;
* ``report-cost.png``: HotpotQA's cost (here: completion tokens) against accuracy, with the frontier;
* ``report-drilldown.png``: the first item's trajectory, opened.

``python docs/screenshots.py`` (Chromium on PATH, or ``BCAS_CHROMIUM``); ``--run DIR``
renders an existing run folder instead of running the grid.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "docs" / "images"
COMMAND = ["-m", "pytest", "benchmarks", "--bcas-grid", "smoke", "--bcas-model", "mock:gold", "-q"]

# A page region from the top of the first heading (<h2>, <h3>) whose text starts with
# ``start`` (or the page's top) down to the top of the next heading (or of the heading
# starting with ``end``), ``max_height`` by ``max_width`` CSS pixels at most.
_REGION = """
(() => {
  const heads = Array.from(document.querySelectorAll('h2, h3'));
  const find = (text) => heads.findIndex((h) => h.textContent.startsWith(text));
  const top = (el) => el.getBoundingClientRect().top + window.scrollY;
  const start = %(start)s === null ? -1 : find(%(start)s);
  if (%(start)s !== null && start < 0) return 'no heading starts with ' + %(start)s;
  const endIndex = %(end)s === null ? start + 1 : find(%(end)s);
  const y0 = start < 0 ? 0 : top(heads[start]) - 8;
  const y1 = endIndex >= 0 && endIndex < heads.length ? top(heads[endIndex]) - 8 : document.body.scrollHeight;
  const width = Math.min(document.documentElement.clientWidth, %(max_width)d);
  return {x: 0, y: y0, width: width, height: Math.max(1, Math.min(y1 - y0, %(max_height)d))};
})()
"""

SHOTS = {
    "report-summary.png": {"start": None, "end": "Beyond accuracy", "max_height": 900},
    "report-figures.png": {"start": "Figures", "end": None, "max_height": 930, "max_width": 620},
    "report-cost.png": {"start": "hotpotqa — ", "end": None, "max_height": 900},
    "report-drilldown.png": {"start": "Items (", "end": None, "max_height": 420},
}
# Before the shots: the first item's trajectory opened, the rest closed.
_OPEN_FIRST_ITEM = """
(() => {
  const items = Array.from(document.querySelectorAll('h2 ~ details'));
  items.forEach((d, i) => { d.open = i === 0; });
  return items.length;
})()
"""


def region(start: str | None, end: str | None, max_height: int, max_width: int = 100_000) -> str:
    values = {"start": json.dumps(start), "end": json.dumps(end), "max_height": max_height, "max_width": max_width}
    return _REGION % values


def run_smoke(out: Path) -> Path:
    """The smoke grid on mock:gold into ``out`` (a real run of the harness); its report."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    args = [sys.executable, *COMMAND, "--bcas-report", str(out), "-p", "no:cacheprovider"]
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the smoke run failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return out / "index.html"


def render(report: Path, images: Path, width: int) -> list[Path]:
    sys.path.insert(0, str(REPO))
    from playwright.sync_api import sync_playwright

    from tests.support.chromium import launch_args, opened

    images.mkdir(parents=True, exist_ok=True)
    shots = [(images / name, region(**spec)) for name, spec in SHOTS.items()]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**launch_args())
        try:
            with opened(browser, report, width=width) as page:
                if not page.evaluate(_OPEN_FIRST_ITEM):
                    raise SystemExit("the report lists no item to open")
                for path, clip in shots:
                    rect = page.evaluate(clip)
                    if not isinstance(rect, dict):
                        raise SystemExit(f"the region of {path.name} could not be found: {rect}")
                    page.page.screenshot(path=path, clip=rect, full_page=True)
                if page.errors:
                    raise SystemExit(f"the report logged errors in Chromium: {page.errors}")
        finally:
            browser.close()
    return [path for path, _ in shots]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="an existing run folder to render (default: run the smoke grid)")
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder of the PNG files (default: docs/images)")
    parser.add_argument("--width", type=int, default=1200, help="page width in CSS pixels (default: 1200)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bcas-screenshots-") as tmp:
        report = args.run / "index.html" if args.run else run_smoke(Path(tmp) / "smoke")
        for path in render(report, args.out, args.width):
            print(f"{path}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
