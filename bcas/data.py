"""Datasets: registry, JSONL loading with strict validation, content hash, subsets.

Every file follows the schema of ``fixtures/data/README.md``: one JSON object per
line with ``id``, ``question``, ``answers``, ``documents`` (``id``, ``title``,
``text``), ``supporting`` and optional ``meta``.  Any JSONL file in that schema
loads by path without code changes; the registry only adds a name, a task type and
a scoring rule.

Run ``python -m bcas.data`` to print every registered dataset's item count,
document count and content hash.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "data"

TASK_TYPES = ("factoid", "multi-hop", "fact-verification", "yes-no-conflict")
SCORING_RULES = ("qa", "label")


class DatasetError(ValueError):
    """A dataset file is malformed; the message names file, line and field."""

    def __init__(self, path: str | Path, line: int | None, message: str, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        where = f"{self.path}:{line}" if line is not None else self.path
        what = f"field '{field}' " if field else ""
        super().__init__(f"{where}: {what}{message}")


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    answers: tuple[str, ...]
    documents: tuple[Document, ...]
    supporting: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def canonical(self) -> dict[str, Any]:
        """The item as plain JSON-ready data (the input of the content hash)."""
        return {
            "id": self.id,
            "question": self.question,
            "answers": list(self.answers),
            "documents": [{"id": d.id, "title": d.title, "text": d.text} for d in self.documents],
            "supporting": list(self.supporting),
            "meta": self.meta,
        }


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its file, task type and scoring rule."""

    name: str
    file: str
    task: str
    scoring: str
    description: str = ""

    @property
    def path(self) -> Path:
        return FIXTURE_DIR / self.file


DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    if spec.task not in TASK_TYPES:
        raise ValueError(f"unknown task type {spec.task!r}; expected one of {TASK_TYPES}")
    if spec.scoring not in SCORING_RULES:
        raise ValueError(f"unknown scoring rule {spec.scoring!r}; expected one of {SCORING_RULES}")
    DATASETS[spec.name] = spec
    return spec


for _spec in (
    DatasetSpec("hotpotqa", "hotpotqa.jsonl", "multi-hop", "qa", "HotpotQA dev, distractor setting"),
    DatasetSpec("2wikimultihopqa", "2wikimultihopqa.jsonl", "multi-hop", "qa", "2WikiMultihopQA dev"),
    DatasetSpec("musique", "musique.jsonl", "multi-hop", "qa", "MuSiQue-Ans dev + train"),
    DatasetSpec("triviaqa", "triviaqa.jsonl", "factoid", "qa", "TriviaQA with retrieved passages"),
    DatasetSpec("fever", "fever.jsonl", "fact-verification", "label", "FEVER 1.0 dev claims"),
    DatasetSpec("conflictqa", "conflictqa_strategyqa.jsonl", "yes-no-conflict", "label", "ConflictQA StrategyQA"),
    DatasetSpec("nq_open", "nq_open.jsonl", "factoid", "qa", "NQ-open with gold passage"),
):
    register_dataset(_spec)


@dataclass(frozen=True)
class Dataset:
    name: str
    path: str
    task: str
    scoring: str
    items: tuple[Item, ...]
    hash: str

    def __len__(self) -> int:
        return len(self.items)

    @property
    def documents(self) -> list[Document]:
        """All documents of the collection, de-duplicated by (title, text), first id kept."""
        seen: set[tuple[str, str]] = set()
        docs: list[Document] = []
        for item in self.items:
            for doc in item.documents:
                key = (doc.title, doc.text)
                if key not in seen:
                    seen.add(key)
                    docs.append(doc)
        return docs

    def subset(self, limit: int | None, seed: int = 0) -> Dataset:
        """A seeded subset of ``limit`` items, stable across runs and machines.

        Items are ordered by sha256(seed:id), so the subset depends only on the ids
        and the seed, and a larger limit always contains a smaller one.  The kept
        items stay in file order.
        """
        if limit is None or limit >= len(self.items):
            return self
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        ranked = sorted(
            range(len(self.items)),
            key=lambda i: hashlib.sha256(f"{seed}:{self.items[i].id}".encode()).hexdigest(),
        )
        keep = sorted(ranked[:limit])
        items = tuple(self.items[i] for i in keep)
        return Dataset(self.name, self.path, self.task, self.scoring, items, content_hash(items))


def content_hash(items: tuple[Item, ...] | list[Item]) -> str:
    """sha256 over the canonical JSON of the items, in order."""
    h = hashlib.sha256()
    for item in items:
        h.update(json.dumps(item.canonical(), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


def _require_str(path: Path, line: int, obj: dict, key: str, where: str = "") -> str:
    value = obj.get(key)
    name = f"{where}{key}"
    if key not in obj:
        raise DatasetError(path, line, "is missing", name)
    if not isinstance(value, str):
        raise DatasetError(path, line, f"must be a string, got {type(value).__name__}", name)
    return value


def _parse_item(path: Path, line: int, obj: Any) -> Item:
    if not isinstance(obj, dict):
        raise DatasetError(path, line, f"a line must hold a JSON object, got {type(obj).__name__}")
    item_id = obj.get("id")
    if not isinstance(item_id, (str, int)) or str(item_id) == "":
        raise DatasetError(path, line, "must be a non-empty string", "id")
    question = _require_str(path, line, obj, "question")
    if not question.strip():
        raise DatasetError(path, line, "must not be empty", "question")
    answers = obj.get("answers")
    if (
        not isinstance(answers, list)
        or not answers
        or not all(isinstance(a, str) and a.strip() for a in answers)
    ):
        raise DatasetError(path, line, "must be a non-empty list of non-empty strings", "answers")
    raw_docs = obj.get("documents")
    if not isinstance(raw_docs, list) or not raw_docs:
        raise DatasetError(path, line, "must be a non-empty list of documents", "documents")
    docs: list[Document] = []
    doc_ids: set[str] = set()
    for j, raw in enumerate(raw_docs):
        where = f"documents[{j}]."
        if not isinstance(raw, dict):
            raise DatasetError(path, line, "must be an object", f"documents[{j}]")
        doc_id = _require_str(path, line, raw, "id", where)
        title = raw.get("title", "")
        if not isinstance(title, str):
            raise DatasetError(path, line, "must be a string", f"{where}title")
        text = _require_str(path, line, raw, "text", where)
        if not text.strip():
            raise DatasetError(path, line, "must not be empty", f"{where}text")
        if doc_id in doc_ids:
            raise DatasetError(path, line, f"duplicate document id {doc_id!r}", f"{where}id")
        doc_ids.add(doc_id)
        docs.append(Document(doc_id, title, text))
    supporting = obj.get("supporting", [])
    if not isinstance(supporting, list) or not all(isinstance(s, str) for s in supporting):
        raise DatasetError(path, line, "must be a list of document ids", "supporting")
    for s in supporting:
        if s not in doc_ids:
            raise DatasetError(path, line, f"names no document of this item: {s!r}", "supporting")
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise DatasetError(path, line, "must be an object", "meta")
    return Item(str(item_id), question, tuple(answers), tuple(docs), tuple(supporting), meta)


def read_items(path: str | Path) -> tuple[Item, ...]:
    """Read and validate every line of a JSONL file; raise ``DatasetError`` on the first fault."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    return parse_items(path, path.read_bytes())


def parse_items(path: str | Path, data: bytes) -> tuple[Item, ...]:
    """Validate the JSONL bytes ``data`` read from ``path`` (named in errors)."""
    path = Path(path)
    items: list[Item] = []
    item_lines: dict[str, int] = {}
    doc_lines: dict[str, int] = {}
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(path, line_no, f"is not valid UTF-8 (byte offset {exc.start})") from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(path, line_no, f"invalid JSON: {exc.msg} at column {exc.colno}") from None
        item = _parse_item(path, line_no, obj)
        if item.id in item_lines:
            raise DatasetError(
                path, line_no, f"duplicate item id {item.id!r} (first on line {item_lines[item.id]})", "id"
            )
        item_lines[item.id] = line_no
        for doc in item.documents:
            if doc.id in doc_lines:
                raise DatasetError(
                    path,
                    line_no,
                    f"duplicate document id {doc.id!r} (first on line {doc_lines[doc.id]})",
                    "documents.id",
                )
            doc_lines[doc.id] = line_no
        items.append(item)
    if not items:
        raise DatasetError(path, None, "holds no items")
    return tuple(items)


def resolve_spec(name_or_path: str | Path) -> DatasetSpec:
    """The registered spec for a name, or an ad-hoc spec for a JSONL path."""
    key = str(name_or_path)
    if key in DATASETS:
        return DATASETS[key]
    path = Path(key)
    if path.suffix == ".jsonl" or path.exists():
        return DatasetSpec(path.stem, str(path.resolve()), "factoid", "qa", "ad-hoc JSONL file")
    raise DatasetError(key, None, f"unknown dataset; registered names are {sorted(DATASETS)} or give a .jsonl path")


def load_dataset(name_or_path: str | Path, limit: int | None = None, seed: int = 0) -> Dataset:
    """Load a registered dataset by name, or any JSONL file in the fixture schema by path."""
    spec = resolve_spec(name_or_path)
    path = spec.path if spec.name in DATASETS and DATASETS[spec.name] is spec else Path(spec.file)
    items = _cached_items(str(path))
    full = Dataset(spec.name, str(path), spec.task, spec.scoring, items, content_hash(items))
    return full.subset(limit, seed)


_ITEM_CACHE: dict[tuple[str, str], tuple[Item, ...]] = {}


def _cached_items(path: str) -> tuple[Item, ...]:
    # Keyed on the bytes actually parsed, not on mtime and size: a file rewritten
    # with equal size and restored mtime (rsync -t, tar, cp -p) must not be served stale.
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError:
        raise DatasetError(path, None, "no such file") from None
    key = (str(p.resolve()), hashlib.sha256(data).hexdigest())
    if key not in _ITEM_CACHE:
        _ITEM_CACHE[key] = parse_items(p, data)
    return _ITEM_CACHE[key]


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv else None) or list(DATASETS)
    print(f"{'dataset':<18}{'task':<20}{'items':>7}{'docs':>8}  sha256")
    for name in names:
        try:
            ds = load_dataset(name)
        except DatasetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        n_docs = sum(len(i.documents) for i in ds.items)
        print(f"{ds.name:<18}{ds.task:<20}{len(ds):>7}{n_docs:>8}  {ds.hash}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
