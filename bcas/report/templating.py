"""The report's one way to produce HTML: Jinja2 templates with autoescaping on.

Every page and section of the HTML report and of ``compare`` is a template in
``bcas/report/templates/`` rendered by :func:`render`; the environment escapes every
value a template prints unless the value is already :class:`markupsafe.Markup`.
Python code builds data (rows, cells, numbers as text), never markup.

What must stay raw goes through the one reviewed path, :func:`element`: the SVG
charts (:mod:`bcas.report.plots`) are trees of elements whose tag names are constants of
the calling code and whose attribute values and text children are escaped here, by
``Markup.format`` and ``Markup.join``, which escape everything that is not already
``Markup``.  A caller cannot hand it a raw string that ends up unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from bcas.report.columns import hidden_columns, prose_columns

_TAG = re.compile(r"^[a-zA-Z][a-zA-Z0-9]*$")
_ATTR = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_:-]*$")

ENV = Environment(
    loader=PackageLoader("bcas.report", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
)
ENV.globals["hidden_columns"] = hidden_columns  # which columns a table shows first (bcas.report.columns)
ENV.globals["prose_columns"] = prose_columns  # which columns wrap (bcas.report.columns)


def render(template: str, **context: Any) -> Markup:
    """``template`` (a file of ``bcas/report/templates``) rendered with ``context``, autoescaped."""
    return Markup(ENV.get_template(template).render(**context))


def element(tag: str, attrs: dict[str, Any] | None = None, children: Iterable[Any] = ()) -> Markup:
    """``<tag attr="value">children</tag>``: values and text children escaped, ``Markup`` children kept.

    The report's only producer of raw markup outside templates (the SVG charts). ``tag`` and
    attribute names must be plain names (a ``ValueError`` otherwise), so no caller's text can
    become a tag or an attribute; an attribute whose value is ``None`` is left out.
    """
    if not _TAG.match(tag):
        raise ValueError(f"not an element name: {tag!r}")
    parts = []
    for name, value in (attrs or {}).items():
        if value is None:
            continue
        name = name.rstrip("_").replace("_", "-")
        if not _ATTR.match(name) or name.lower().startswith("on"):
            raise ValueError(f"not an allowed attribute name: {name!r}")
        parts.append(Markup(' {}="{}"').format(name, value))
    return Markup("<{0}{1}>{2}</{0}>").format(tag, Markup("").join(parts), Markup("").join(children))


__all__ = ["ENV", "element", "render"]
