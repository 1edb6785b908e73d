"""mkdocs hook: the generated reference sections (``docs/gen_reference.py``) rendered into their pages.

A page holds ``<!-- bcas:NAME -->`` (and, in the repository, the section's text up to
``<!-- /bcas:NAME -->``) where section NAME goes; an unknown name fails the build.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS)]  # the checkout's bcas, then gen_reference

import gen_reference  # noqa: E402


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return gen_reference.fill(markdown, page.file.src_path)
