"""mkdocs hook: the generated reference sections (``docs/gen_reference.py``) rendered into their pages.

A page holds ``<!-- bcas:NAME -->`` where section NAME goes; an unknown name fails the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS)]  # the checkout's bcas, then gen_reference

import gen_reference  # noqa: E402

MARKER = re.compile(r"<!-- bcas:(\w+) -->")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in gen_reference.SECTIONS:
            raise ValueError(f"{page.file.src_path}: unknown generated section {name!r}")
        return gen_reference.SECTIONS[name]()

    return MARKER.sub(render, markdown)
