"""The report's one way to produce HTML: Jinja2 templates with autoescaping on.

Every page and section of the HTML report and of ``compare`` is a template in
``bcas/report/templates/`` rendered by :func:`render`; the environment escapes every
value a template prints unless the value is already :class:`markupsafe.Markup`.
Python code builds data (rows, cells, numbers as text), never markup.  The figures are
Vega-Lite specs (:mod:`bcas.report.charts`) that a template prints as JSON with Jinja2's
``tojson`` (``<``, ``>``, ``&`` and ``'`` escaped, so no label can close its script
element); the browser's Vega draws them (:mod:`bcas.report.vega`).
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from bcas.report.columns import hidden_columns, prose_columns

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


__all__ = ["ENV", "render"]
