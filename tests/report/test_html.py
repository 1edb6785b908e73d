"""The HTML report's source: escaping of record text and plot labels, the page's
Content-Security-Policy, and self-containment (no network).  No browser needed;
tests/report/test_browser.py loads the same pages in headless Chromium."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape

from bcas.records import Record, ResultStore, load_records
from bcas.report.html import SCRIPT, SCRIPT_HASH
from bcas.report.vega import LOADER, bundle, page_figures, script_hash
from tests.support.reports import (
    ARABIC,
    EXTERNAL_SCRIPT,
    HOSTILE,
    IMG_ONERROR,
    LONG_TEXT,
    MODEL,
    NON_LATIN,
    SCRIPT_TAG,
    SVG_ONLOAD,
    grid_records,
    hostile_records,
    render,
)

URL_ATTRIBUTES = {"src", "href", "xlink:href", "action", "formaction", "data", "poster", "srcset", "background"}


class Elements(HTMLParser):
    """Every start tag with its attributes, every script body and every text run, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)

    def names(self) -> list[str]:
        return [t for t, _ in self.tags]


def parse(source: str) -> Elements:
    parser = Elements()
    parser.feed(source)
    parser.close()
    return parser


def _script_tags(elements: Elements) -> list[tuple[str, dict[str, str | None]]]:
    return [(t, a) for t, a in elements.tags if t == "script"]


def csp_of(elements: Elements) -> dict[str, list[str]]:
    metas = [
        a for t, a in elements.tags if t == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy"
    ]
    assert len(metas) == 1, f"expected one CSP meta tag, found {len(metas)}"
    policy: dict[str, list[str]] = {}
    for directive in (metas[0].get("content") or "").split(";"):
        if directive.strip():
            name, *values = directive.split()
            policy[name] = values
    return policy


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    records = grid_records("search_scaling") + grid_records("ablation", seed=1)
    path, rows, _ = render(tmp_path_factory.mktemp("real"), records)
    return path.read_text(encoding="utf-8"), len(rows)


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    path, _, _ = render(tmp_path_factory.mktemp("hostile"), hostile_records(), title=f"bcas {SCRIPT_TAG}")
    return path.read_text(encoding="utf-8")


# -- Content-Security-Policy ------------------------------------------------------------


def test_csp_admits_exactly_the_pages_own_script_by_hash(real_report: tuple[str, int]) -> None:
    source, _ = real_report
    elements = parse(source)
    policy = csp_of(elements)
    assert policy["default-src"] == ["'none'"]
    # the page's script, the Vega bundle and the figure loader, each by its hash, and nothing else
    hashes = [f"'{SCRIPT_HASH}'", f"'{script_hash(bundle())}'", f"'{script_hash(LOADER)}'"]
    assert policy["script-src"] == hashes, "script-src must hold the hashes and nothing else"
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]
    code = [body for (tag, attrs), body in zip(_script_tags(elements), elements.scripts, strict=True) if not attrs]
    assert code == [SCRIPT, bundle(), LOADER]
    for body, digest in zip(code, hashes, strict=True):
        assert f"'sha256-{base64.b64encode(hashlib.sha256(body.encode('utf-8')).digest()).decode()}'" == digest
    # every other script element is a figure's spec, which is data (never run)
    specs = [attrs for attrs in (a for _, a in _script_tags(elements)) if attrs]
    assert specs and all(a == {"type": "application/json"} for a in specs)
    assert len(specs) == len(page_figures(source)) == source.count('<figure class="bcas-figure')
    # The policy must come before anything it governs.
    assert elements.names().index("meta") < elements.names().index("title") < elements.names().index("script")


def test_csp_meta_is_the_first_thing_after_the_charset(real_report: tuple[str, int]) -> None:
    source, _ = real_report
    head = source[: source.index("<title>")]
    assert re.fullmatch(
        r'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" [^>]*>',
        head,
    )


# -- self-contained ---------------------------------------------------------------------


def _external_references(elements: Elements, source: str) -> list[str]:
    found = []
    for tag, attrs in elements.tags:
        for name, value in attrs.items():
            v = (value or "").strip().lower()
            if name in URL_ATTRIBUTES and (v.startswith(("http:", "https:", "//", "ftp:")) or "://" in v):
                found.append(f"<{tag} {name}={value}>")
        if tag == "link":
            found.append(f"<link {attrs}>")
    styles = re.findall(r"<style>(.*?)</style>", source, flags=re.S)
    for css in styles:
        found += re.findall(r"url\([^)]*\)|@import[^;]*", css)
    return found


def test_report_is_self_contained(real_report: tuple[str, int]) -> None:
    source, _ = real_report
    assert _external_references(parse(source), source) == []


def test_hostile_urls_do_not_become_references(hostile_report: str) -> None:
    elements = parse(hostile_report)
    assert _external_references(elements, hostile_report) == []
    assert "https://evil.example/x.js" in "".join(elements.text)  # shown as text, not fetched


def test_reference_check_catches_an_external_script() -> None:
    source = '<html><head><script src="https://cdn.example/x.js"></script></head><body></body></html>'
    assert _external_references(parse(source), source) == ["<script src=https://cdn.example/x.js>"]


# -- escaping of record text --------------------------------------------------------------


def test_hostile_text_is_escaped_in_the_source(hostile_report: str) -> None:
    assert hostile_report.count(escape(SCRIPT_TAG)) > 0
    assert hostile_report.count("&lt;script&gt;window.__pwned=1;") > 0
    assert hostile_report.count(escape(IMG_ONERROR)) > 0
    assert hostile_report.count(escape(SVG_ONLOAD)) > 0
    assert hostile_report.count(escape(EXTERNAL_SCRIPT)) > 0
    for payload in HOSTILE:
        assert hostile_report.count(payload) == 0


def test_hostile_text_creates_no_elements_or_handlers(hostile_report: str) -> None:
    elements = parse(hostile_report)
    names = elements.names()
    # the page's script, the Vega bundle, the figure loader, and one spec (data) per figure
    assert [a for _, a in _script_tags(elements) if a != {"type": "application/json"}] == [{}, {}, {}]
    assert names.count("script") == 3 + len(page_figures(hostile_report))
    assert "img" not in names and "textarea" not in names and "link" not in names
    handlers = [(t, n) for t, a in elements.tags for n in a if n.lower().startswith("on")]
    assert handlers == []
    assert "svg" not in names  # the figures are specs, drawn by Vega in the browser
    # The text a reader sees holds the payloads verbatim.
    text = "".join(elements.text)
    for payload in HOSTILE:
        assert text.count(payload) > 0
    assert text.count(f"bcas {SCRIPT_TAG}") > 0  # the <h1> title


def test_unknown_label_is_plotted_with_its_escaped_name(hostile_report: str) -> None:
    figures = dict(page_figures(hostile_report))
    assert figures
    values = [row for spec in figures.values() for row in spec.get("data", {}).get("values", [])]
    labels = {row.get("config") for row in values}
    assert "hs/s2/t16k" + SCRIPT_TAG in labels, "a label the grid table does not know still gets its point, intact"
    assert MODEL + SVG_ONLOAD in {row.get("series") for row in values}  # the legend's model
    assert "</script" not in hostile_report.split('<script type="application/json">', 1)[1].split("</script>", 1)[0]


def test_non_latin_and_long_text_are_written_verbatim(hostile_report: str) -> None:
    assert hostile_report.count('<meta charset="utf-8">') > 0
    text = "".join(parse(hostile_report).text)
    for sample in NON_LATIN:
        assert text.count(sample) > 0
    assert text.count(LONG_TEXT) > 0  # the prediction and trajectory are shown whole
    assert hostile_report.count(f"{LONG_TEXT[:160]}</summary>") > 0  # the item heading shows a prefix


def test_records_round_trip_hostile_and_non_latin_text(tmp_path: Path) -> None:
    records = hostile_records()
    store = ResultStore(tmp_path / "run")
    store.extend(Record.from_dict(r) for r in records)
    raw = (tmp_path / "run" / "records.jsonl").read_text(encoding="utf-8")
    assert raw.count(ARABIC) > 0 and raw.count("\\u0645") == 0  # stored as UTF-8, not as \u escapes
    back = [r.to_dict() for r in load_records(tmp_path / "run")]
    assert len(back) == len(records)
    assert [i for i, (got, want) in enumerate(zip(back, records, strict=True)) if got != want] == []


def test_summary_table_lists_every_row(real_report: tuple[str, int]) -> None:
    source, n_rows = real_report
    table = source[source.index('<table class="sortable" id="summary">') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr") - 1 == n_rows  # minus the header row
    assert table.count('<tr class="fr" data-grid=') == n_rows  # every row carries its filter keys
