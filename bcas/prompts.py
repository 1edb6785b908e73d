"""The one loader of prompt templates: package data read with ``importlib.resources``.

Templates are ``.txt`` files in a package's ``prompts/`` folder (``bcas/agent/prompts``,
``bcas/assess/prompts``, ``bcas/retrieval/prompts``, ``bcas/grading/prompts``), installed
with the package; their hash is part of an answer's identity (:mod:`bcas.identity`).
"""

from __future__ import annotations

import functools
from importlib import resources
from string import Template


class PromptError(FileNotFoundError):
    """A template is missing from the installed package."""


@functools.cache
def prompt_text(package: str, name: str) -> str:
    """The text of ``<package>/prompts/<name>`` (``name`` with or without ``.txt``)."""
    filename = name if name.endswith(".txt") else f"{name}.txt"
    try:
        return resources.files(package).joinpath("prompts", filename).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise PromptError(
            f"prompt template {package}/prompts/{filename} is missing; reinstall bcas with its package data"
        ) from exc


def prompt_template(package: str, name: str, *, strip: bool = True) -> Template:
    """The template of ``<package>/prompts/<name>`` (trailing newlines dropped unless ``strip=False``)."""
    text = prompt_text(package, name)
    return Template(text.rstrip("\n") if strip else text)


__all__ = ["PromptError", "prompt_template", "prompt_text"]
