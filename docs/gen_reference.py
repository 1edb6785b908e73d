"""The generated reference pages: options and registries, rendered from the code.

``docs/hooks.py`` replaces each ``<!-- bcas:NAME -->`` marker of a page with
``SECTIONS[NAME]()`` when mkdocs builds the site, so the reference is what the installed
code registers, never a copy written by hand.  ``python docs/gen_reference.py NAME``
prints one section (``python docs/gen_reference.py --list`` lists them).

* ``options``: every option of the ``bcas`` group of pytest's parser, as the plugin's
  ``pytest_addoption`` adds it (flag, ini name, help), with the type and default of its
  row in :data:`bcas.run.options.OPTIONS`.
* ``grids``: every registered grid with its configurations (label, run kind, reference).
* ``backends``, ``formats``, ``datasets``, ``retrieval_modes``, ``treatments``,
  ``run_kinds``, ``metrics``, ``markers``: one line per registry entry.
"""

from __future__ import annotations

import html
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the checkout's bcas, not another installed copy
    sys.path.insert(0, str(REPO))

KIND_TYPE = {
    "sink": "target, value optional",
    "append": "text, repeatable",
    "bool": "flag",
    "str": "text",
    "int": "integer",
    "float": "number",
}


def _cell(value: Any) -> str:
    """A table cell: markdown and HTML specials escaped, line breaks joined."""
    text = " ".join(str(value).split())
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "&#124;"), ("*", "\\*"), ("_", "\\_")):
        text = text.replace(a, b)
    return text


def _code(value: Any) -> str:
    """Inline code in a table cell.  A backtick span would show ``\\|`` (the escape a pipe
    needs in a table) as a backslash; an HTML ``<code>`` with the pipe as ``&#124;`` shows it
    as ``|`` on the site and on the repository host."""
    text = html.escape(str(value), quote=False).replace("|", "&#124;")
    return f"<code>{text}</code>"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def option_rows() -> list[dict[str, Any]]:
    """The ``bcas`` option group as pytest's parser holds it, joined with the option table."""
    from _pytest.config.argparsing import Parser

    from bcas.harness.plugin import pytest_addoption
    from bcas.run.options import OPTIONS

    parser = Parser(_ispytest=True)
    pytest_addoption(parser)
    group = parser.getgroup("bcas")
    from bcas.tracking import SINKS

    table = {f"--bcas-{name}": (kind, default) for name, kind, default, _ in OPTIONS}
    sinks = {f"--bcas-{SINKS.meta(name, 'option', name)}": ("sink", None) for name in SINKS.names()}
    rows = []
    for option in group.options:
        (flag,) = option.names()
        attrs = option.attrs()
        kind, default = table[flag] if flag in table else sinks[flag]  # a result sink: not an engine option
        ini = attrs["dest"]
        assert ini in parser._inidict, f"{flag}: no ini option {ini}"  # the plugin registers both
        rows.append({"flag": flag, "kind": kind, "default": default, "ini": ini, "help": attrs["help"]})
    missing = set(table) - {r["flag"] for r in rows}
    assert not missing, f"options in the table but not in the parser: {sorted(missing)}"
    return rows


def options() -> str:
    rows = [
        (
            _code(r["flag"]),
            KIND_TYPE[r["kind"]],
            "—" if r["default"] in (None, False) else _code(r["default"]),
            _code(r["ini"]),
            _cell(r["help"]),
        )
        for r in option_rows()
    ]
    return _table(("option", "type", "default", "ini option", "help"), rows)


def _meta_text(meta: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(meta.items())) or "—"


def _registry(registry: Any) -> str:
    rows = [(_code(name), _cell(_meta_text(registry.meta(name)))) for name in registry.names()]
    return _table(("name", "metadata"), rows)


def backends() -> str:
    from bcas.llm import BACKENDS

    return _registry(BACKENDS)


def retrieval_modes() -> str:
    from bcas.registry import RETRIEVAL_MODES

    return _registry(RETRIEVAL_MODES)


def treatments() -> str:
    from bcas.registry import TREATMENTS

    return _registry(TREATMENTS)


def run_kinds() -> str:
    from bcas.registry import RUN_KINDS

    return _registry(RUN_KINDS)


def metrics() -> str:
    from bcas.grading.outcomes import METRICS

    return _table(("name",), [(_code(name),) for name in METRICS.names()])


def formats() -> str:
    from bcas.formats import describe

    rows = [
        (_code(f["name"]), ", ".join(_code(a) for a in f["aliases"]) or "—", _cell(f["description"]))
        for f in describe()
    ]
    return _table(("format", "aliases", "description"), rows)


def datasets() -> str:
    from bcas.data import DATASETS

    rows = [
        (_code(s.name), _code(s.file), s.task, s.scoring, _cell(s.description), _cell(s.caveat) or "—")
        for s in DATASETS.values()
    ]
    return _table(("name", "file", "task", "scoring", "description", "caveat"), rows)


def grids() -> str:
    from bcas.grids import GRIDS

    parts = []
    for name in GRIDS.names():
        grid = GRIDS.get(name)
        parts.append(f"### `{name}`\n")
        facts = [
            f"**datasets**: {', '.join(_code(d) for d in grid.datasets)}",
            f"**items per dataset**: {grid.limit if grid.limit is not None else 'the default (20)'}",
            f"**primary metric**: {_code(grid.primary_metric)}",
        ]
        if grid.paper:
            facts.append(f"**paper**: {_cell(grid.paper)}")
        if grid.description:
            parts.append(_cell(grid.description) + "\n")
        parts.append("; ".join(facts) + "\n")
        rows = [
            (
                _code(entry.label),
                _code(entry.kind),
                "yes" if entry.reference else "",
                ", ".join(_code(d) for d in entry.datasets) or "the grid's",
                ", ".join(_code(r) for r in entry.requires) or "—",
            )
            for entry in grid.entries
        ]
        parts.append(_table(("configuration", "run kind", "reference", "datasets", "markers"), rows) + "\n")
    return "\n".join(parts)


def markers() -> str:
    from bcas.data import DATASETS
    from bcas.grids import GRIDS
    from bcas.harness.settings import KIND_MARKER, REQUIREMENT_MARKERS
    from bcas.registry import RUN_KINDS

    marks: dict[str, list[str]] = {}
    for m, text in REQUIREMENT_MARKERS.items():
        marks.setdefault(m, []).append(_cell(text))
    for g in GRIDS.names():
        marks.setdefault(g, []).append(f"cases of the {_cell(g)} grid")
    for d in DATASETS:
        marks.setdefault(d, []).append(f"cases on the {_cell(d)} dataset")
    for k in RUN_KINDS.names():
        marks.setdefault(KIND_MARKER.format(k), []).append(f"cases run by the {k} run kind (in any grid)")
    return _table(("marker", "selects"), [(_code(m), "; ".join(texts)) for m, texts in marks.items()])


SECTIONS: dict[str, Callable[[], str]] = {
    "options": options,
    "grids": grids,
    "backends": backends,
    "formats": formats,
    "datasets": datasets,
    "retrieval_modes": retrieval_modes,
    "treatments": treatments,
    "run_kinds": run_kinds,
    "metrics": metrics,
    "markers": markers,
}


# A page holds ``<!-- bcas:NAME -->`` ... ``<!-- /bcas:NAME -->``: the section's text sits between
# the two markers in the repository (readable on the repository host) and is rendered again at build.
REGION = re.compile(r"<!-- bcas:(\w+) -->(?:.*?<!-- /bcas:\1 -->)?", re.S)
PAGES = ("reference/options.md", "reference/registries.md")


def fill(markdown: str, where: str = "page") -> str:
    """``markdown`` with every generated region holding its current text; unknown names: ValueError."""

    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in SECTIONS:
            raise ValueError(f"{where}: unknown generated section {name!r}")
        return f"<!-- bcas:{name} -->\n\n{SECTIONS[name]().strip()}\n\n<!-- /bcas:{name} -->"

    return REGION.sub(render, markdown)


def write_pages() -> list[str]:
    """Regenerate the reference pages in the checkout; the pages that changed."""
    changed = []
    for page in PAGES:
        path = Path(__file__).resolve().parent / page
        old = path.read_text(encoding="utf-8")
        new = fill(old, page)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        changed = write_pages()
        print("\n".join(f"wrote docs/{page}" for page in changed) or "the reference pages are current")
        return 0
    if argv == ["--list"] or not argv:
        print("\n".join(SECTIONS))
        return 0
    for name in argv:
        if name not in SECTIONS:
            print(f"unknown section {name!r}; sections: {', '.join(SECTIONS)}", file=sys.stderr)
            return 2
        print(SECTIONS[name]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
