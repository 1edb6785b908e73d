"""Dataset file formats: our JSONL schema, FlashRAG's, and the benchmarks' official layouts.

``--bcas-datasets FORMAT:PATH`` (or ``load_dataset("FORMAT:PATH")``) reads a file in
one of ``FORMATS``; a bare path is auto-detected from its first record, and a record
that fits several layouts is an error that lists them.  Every reader streams the
file (JSON arrays element by element, see ``bcas.formats.stream``) and reports a
malformed record as ``file:line: field 'x' ...``.  The items' content hash
(``bcas.items.content_hash``) depends only on the parsed content, so it is the same
on every machine.

Modules: ``native`` (our schema), ``multihop`` (HotpotQA, 2WikiMultihopQA, MuSiQue),
``qa`` (FlashRAG, TriviaQA, NQ-open), ``claims`` (FEVER, ConflictQA), ``stream``.
Passage corpora (FlashRAG, BEIR, FEVER wiki-pages) are read by ``bcas.corpus``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bcas.formats.claims import read_conflictqa, read_fever
from bcas.formats.multihop import read_2wiki, read_hotpotqa, read_musique
from bcas.formats.native import collect_items, iter_native
from bcas.formats.qa import read_flashrag, read_nq_open, read_triviaqa
from bcas.formats.stream import first_record
from bcas.items import DatasetError, Item
from bcas.registry import Registry

Reader = Callable[[Path], Iterator[tuple[int, Item]]]

FEVER_LABEL_SET = {"supports", "refutes", "not enough info"}
YES_NO_SET = {"yes", "no"}


@dataclass(frozen=True)
class Format:
    """A dataset file layout: how to read it and how to recognise its first record.

    ``task`` / ``scoring`` apply unless ``infer_labels`` finds every gold answer in
    a label set (FEVER labels: fact verification; yes/no: yes-no questions), which
    then scores by label.
    """

    name: str
    description: str
    read: Reader
    detect: Callable[[set[str]], bool]
    task: str = "factoid"
    scoring: str = "qa"
    infer_labels: bool = False
    aliases: tuple[str, ...] = field(default=())


def _read_native(path: Path) -> Iterator[tuple[int, Item]]:
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    return iter_native(path, path.read_bytes())


_OTHER_QA_KEYS = {"documents", "_id", "context", "paragraphs", "memory_answer", "golden_answers", "claim"}

FORMATS: Registry[Format] = Registry("dataset format")


def register_format(fmt: Format) -> Format:
    """Register a dataset format (one registration: a ``Format`` with its reader and detector)."""
    FORMATS.register(fmt.name, fmt)
    return fmt


def _formats() -> list[Format]:
    return [FORMATS.get(name) for name in FORMATS.names()]


for _fmt in (
    Format(
        "bcas",
        "our JSONL schema (bcas/resources/data/README.md)",
        _read_native,
        lambda k: {"question", "answers", "documents"} <= k,
        infer_labels=True,
        aliases=("jsonl",),
    ),
    Format(
        "flashrag",
        "FlashRAG dataset JSONL: id, question, golden_answers, metadata",
        read_flashrag,
        lambda k: {"question", "golden_answers"} <= k,
        infer_labels=True,
    ),
    Format(
        "hotpotqa",
        "official HotpotQA JSON (distractor or fullwiki)",
        read_hotpotqa,
        lambda k: {"_id", "context"} <= k and ("level" in k or "evidences" not in k),
        task="multi-hop",
    ),
    Format(
        "2wikimultihopqa",
        "official 2WikiMultihopQA JSON (dev.json)",
        read_2wiki,
        lambda k: {"_id", "context"} <= k and ("evidences" in k or "level" not in k),
        task="multi-hop",
        aliases=("2wiki",),
    ),
    Format(
        "musique",
        "official MuSiQue JSONL (ans or full)",
        read_musique,
        lambda k: {"question", "paragraphs"} <= k,
        task="multi-hop",
    ),
    Format(
        "triviaqa",
        "official TriviaQA rc / unfiltered JSON (+ evidence/ folder)",
        read_triviaqa,
        lambda k: "QuestionId" in k or "Question" in k,
    ),
    Format(
        "fever",
        "official FEVER claims JSONL (wiki-pages as --bcas-corpus)",
        read_fever,
        lambda k: "claim" in k,
        task="fact-verification",
        scoring="label",
    ),
    Format(
        "nq_open",
        "official NQ-open JSONL: question, answer",
        read_nq_open,
        lambda k: "question" in k and bool(k & {"answer", "answers"}) and not k & _OTHER_QA_KEYS,
        aliases=("nq-open", "nq"),
    ),
    Format(
        "conflictqa",
        "official ConflictQA JSON(L): question, ground_truth, memory/counter evidence",
        read_conflictqa,
        lambda k: "memory_answer" in k or "counter_memory" in k,
        infer_labels=True,
    ),
):
    register_format(_fmt)


def format_names() -> list[str]:
    return FORMATS.names()


def lookup_format(name: str) -> Format | None:
    """The format called ``name`` (or one of its aliases), else None."""
    key = name.strip().lower()
    if key in FORMATS:
        return FORMATS.get(key)
    for fmt in _formats():
        if key in fmt.aliases:
            return fmt
    return None


def split_spec(spec: str) -> tuple[Format | None, str]:
    """``"FORMAT:PATH"`` -> (format, path); anything else -> (None, spec)."""
    head, sep, rest = spec.partition(":")
    if sep and rest:
        fmt = lookup_format(head)
        if fmt is not None:
            return fmt, rest
    return None, spec


def detect_format(path: str | Path, default: Format | None = None) -> Format:
    """The one format whose layout fits the file's first record; an error lists the candidates.

    ``default``: the format to read a file with when no layout fits (its reader then
    names the missing or malformed field).
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    first = first_record(path, member="Data")
    if first is None:
        raise DatasetError(path, None, "holds no items")
    line, obj = first
    if not isinstance(obj, dict):
        if default is not None:
            return default
        raise DatasetError(path, line, f"a record must be a JSON object, got {type(obj).__name__}")
    keys = set(obj)
    found = [fmt for fmt in _formats() if fmt.detect(keys)]
    if len(found) == 1:
        return found[0]
    if not found and default is not None:
        return default
    names = ", ".join(sorted(f.name for f in found)) if found else None
    every = ", ".join(format_names())
    if found:
        raise DatasetError(
            path,
            line,
            f"the layout is ambiguous: it fits {names}; name one as FORMAT:PATH "
            f"(e.g. {sorted(f.name for f in found)[0]}:{path}); formats: {every}",
        )
    shown = ", ".join(sorted(keys)[:12])
    raise DatasetError(
        path, line, f"no known dataset layout has these keys ({shown}); name one as FORMAT:PATH; formats: {every}"
    )


def infer_task(fmt: Format, items: tuple[Item, ...]) -> tuple[str, str]:
    """(task, scoring) of a file: the format's, or a label task when every gold is a label."""
    if fmt.infer_labels:
        golds = {a.strip().lower() for item in items for a in item.answers}
        if golds and golds <= FEVER_LABEL_SET:
            return "fact-verification", "label"
        if golds and golds <= YES_NO_SET:
            return "yes-no-conflict", "label"
    return fmt.task, fmt.scoring


def read_format(path: str | Path, fmt: Format) -> tuple[tuple[Item, ...], str, str]:
    """Every item of ``path`` read as ``fmt``, with the task and scoring rule it implies."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    items = collect_items(path, fmt.read(path))
    task, scoring = infer_task(fmt, items)
    return items, task, scoring


def describe() -> list[dict[str, Any]]:
    """One row per format (name, aliases, description) for help texts and the README."""
    return [{"name": f.name, "aliases": list(f.aliases), "description": f.description} for f in _formats()]
