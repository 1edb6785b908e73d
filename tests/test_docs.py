"""The documentation cannot drift from the code (issue 28).

* The README fits two screens and opens with the two fresh-machine commands and the dry run.
* ``mkdocs build --strict`` passes (a broken link or anchor, a page outside the
  navigation, a generated section that fails: each is a warning, so a failure).
* The built options reference lists every option ``pytest --help`` shows in the bcas
  section, and every ``--bcas-*`` option the pages mention is registered.
* The built registries reference has a line for every registered backend, format, dataset,
  retrieval mode, treatment, run kind, metric, grid (with each configuration) and marker.
* The report screenshots of docs/images/ are PNG files made by docs/screenshots.py, small,
  each shown on a page; the names the Python API page lists exist.

The shell commands of the pages are run or checked by tests/test_readme.py.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
FIRST_COMMANDS = (
    "bash .ci/install && python3 -m pytest benchmarks --bcas-grid smoke",
    "python3 -m pytest tests",
)
DRY_RUN = "python3 -m pytest benchmarks --bcas-grid smoke --bcas-model mock:gold"
MAX_PNG_BYTES = 300_000

sys.path.insert(0, str(DOCS))
import gen_reference  # noqa: E402
import screenshots  # noqa: E402

sys.path.remove(str(DOCS))


def _env() -> dict[str, str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    return env


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return out


def _text(path: Path) -> str:
    """A built page's text: tags dropped, entities decoded (so `--bcas-x` in <code> reads as it is)."""
    raw = path.read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


def _codes(path: Path) -> set[str]:
    """Every <code> span of a built page, decoded."""
    raw = path.read_text(encoding="utf-8")
    return {html.unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(r"<code>(.*?)</code>", raw, re.S)}


def test_readme_fits_two_screens_and_opens_with_the_commands() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"
    first_screen = "\n".join(lines[:25])
    # The two fresh-machine commands, exactly as .ci/run's stages run them, in the first block.
    block = re.search(r"```bash\n(.*?)```", first_screen, re.S)
    assert block is not None and block.group(1).splitlines() == list(FIRST_COMMANDS)
    assert DRY_RUN in first_screen


def test_the_site_builds_strict(site: Path) -> None:
    for page in ("index.html", "reference/options/index.html", "reference/registries/index.html"):
        assert (site / page).is_file(), page
    # Every page of docs/ is built (mkdocs --strict also refuses one left out of the navigation).
    for md in DOCS.rglob("*.md"):
        rel = md.relative_to(DOCS).with_suffix("")
        built = site / ("index.html" if rel.name == "index" else rel / "index.html")
        assert built.is_file(), f"{md.relative_to(REPO)} was not built"


def _help_options(columns: int | None = None) -> list[str]:
    """The options ``pytest --help`` prints in its bcas section, at a terminal width.

    An option's own line starts with exactly two spaces; a wrapped help line that happens
    to begin with another option's name is indented further and must not count.
    """
    env = _env()
    if columns is not None:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    section = proc.stdout.split("bcas evaluation suite", 1)[1]
    section = re.split(r"\n\S", section, maxsplit=1)[0]  # up to the next section header
    return re.findall(r"^  (--bcas-[a-z0-9-]+)", section, re.M)


@pytest.mark.parametrize("columns", [None, 60, 200])
def test_options_reference_lists_every_option_pytest_help_shows(site: Path, columns: int | None) -> None:
    shown = _help_options(columns)
    assert len(shown) == len(gen_reference.option_rows()) >= 30
    codes = _codes(site / "reference" / "options" / "index.html")
    missing = [flag for flag in shown if flag not in codes]
    assert not missing, f"options missing from the built reference: {missing}"
    for row in gen_reference.option_rows():  # with its ini name
        assert row["ini"] in codes, row["flag"]


def test_every_option_the_pages_mention_exists() -> None:
    registered = {row["flag"] for row in gen_reference.option_rows()}
    mentioned: dict[str, str] = {}
    for page in PAGES:
        for flag in re.findall(r"--bcas-[a-z0-9]+(?:-[a-z0-9]+)*", page.read_text(encoding="utf-8")):
            mentioned.setdefault(flag, str(page.relative_to(REPO)))
    assert len(mentioned) >= 20
    unknown = {flag: page for flag, page in mentioned.items() if flag not in registered}
    assert not unknown, f"options the docs mention that bcas does not register: {unknown}"


def test_registries_reference_has_a_line_for_every_entry(site: Path) -> None:
    from bcas.data import DATASETS
    from bcas.formats import FORMATS
    from bcas.grading.outcomes import METRICS
    from bcas.grids import GRIDS
    from bcas.harness.settings import KIND_MARKER, REQUIREMENT_MARKERS
    from bcas.llm import BACKENDS
    from bcas.registry import RETRIEVAL_MODES, RUN_KINDS, TREATMENTS

    codes = _codes(site / "reference" / "registries" / "index.html")
    expected = {
        "backend": BACKENDS.names(),
        "format": FORMATS.names(),
        "dataset": list(DATASETS),
        "retrieval mode": RETRIEVAL_MODES.names(),
        "treatment": TREATMENTS.names(),
        "run kind": RUN_KINDS.names(),
        "metric": METRICS.names(),
        "grid": GRIDS.names(),
        "marker": [*REQUIREMENT_MARKERS, *(KIND_MARKER.format(k) for k in RUN_KINDS.names())],
    }
    for grid in GRIDS.names():
        expected[f"configuration of {grid}"] = [entry.label for entry in GRIDS.get(grid).entries]
    missing = {kind: sorted(set(names) - codes) for kind, names in expected.items() if set(names) - codes}
    assert not missing, f"registered but not in the built reference: {missing}"
    assert all(expected.values())


def test_report_screenshots_are_small_pngs_shown_in_the_docs() -> None:
    shown = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    names = set(screenshots.SHOTS)
    on_disk = {p.name for p in (DOCS / "images").glob("*.png")}
    assert on_disk == names, f"docs/images/ holds {sorted(on_disk)}, docs/screenshots.py makes {sorted(names)}"
    for name in sorted(names):
        data = (DOCS / "images" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert 300 <= width <= 1600 and 100 <= height <= 1200, (name, width, height)
        assert len(data) <= MAX_PNG_BYTES, (name, len(data))
        assert f"images/{name})" in shown, f"{name} is shown on no page"
    assert "docs/images/report-summary.png" in (REPO / "README.md").read_text(encoding="utf-8")


def test_python_api_page_names_exist() -> None:
    import importlib

    rows = re.findall(r"^\| (`.*?) \| (`bcas.*?) \|", (DOCS / "python-api.md").read_text(encoding="utf-8"), re.M)
    assert len(rows) >= 5
    for calls, modules in rows:
        mods = [importlib.import_module(m) for m in re.findall(r"`(bcas[\w.]*)`", modules)]
        for name in re.findall(r"`([A-Za-z_]\w*)", calls):
            assert any(hasattr(m, name) for m in mods), f"{name} is in none of {[m.__name__ for m in mods]}"


def test_generated_sections_print_from_the_command_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(DOCS / "gen_reference.py"), "--list"], env=_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.split() == list(gen_reference.SECTIONS)


def test_the_reference_pages_in_the_repository_are_current() -> None:
    """The repository host shows docs/reference/*.md as committed: their generated regions must hold
    what the code registers now (``python docs/gen_reference.py --write`` rewrites them)."""
    for page in gen_reference.PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        assert "<!-- /bcas:" in text, f"docs/{page} holds no generated text"
        assert gen_reference.fill(text, page) == text, (
            f"docs/{page} is out of date: run python docs/gen_reference.py --write"
        )


def test_a_pipe_in_a_reference_table_shows_without_its_escape(site: Path) -> None:
    for page in ("options", "registries"):
        text = _text(site / "reference" / page / "index.html")
        assert "\\|" not in text, f"reference/{page}: a table's escaped pipe shows its backslash"
    assert "none | same | BACKEND[:MODEL]" in _text(site / "reference" / "options" / "index.html")
