"""Datasets: registry, loading with strict validation, content hash, subsets.

The registered datasets are the shipped samples (``bcas/resources/data``, also
reachable as ``fixtures/data`` in a checkout), in our JSON Lines schema: one object
per line with ``id``, ``question``, ``answers``, ``documents`` (``id``, ``title``,
``text``), ``supporting`` and optional ``meta``.  Any other file loads by path
without code changes: a JSONL file in that schema, ``FORMAT:PATH`` for one of the
layouts of ``bcas.formats`` (FlashRAG, official HotpotQA, 2WikiMultihopQA,
MuSiQue, TriviaQA, FEVER, NQ-open, ConflictQA), or a bare path whose layout is
detected.  The registry only adds a name, a task type and a scoring rule.

Run ``bcas data check [NAME | FORMAT:PATH ...]`` to print item count, document
count and content hash (``--formats`` lists the layouts, ``--help`` the usage).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path

from bcas.formats import FORMATS, Format, describe, detect_format, infer_task, lookup_format, read_format, split_spec
from bcas.formats.native import parse_items
from bcas.items import DatasetError, Document, Item, content_hash
from bcas.registry import did_you_mean
from bcas.resources import resource_path

__all__ = [
    "DATASETS",
    "Dataset",
    "DatasetError",
    "DatasetSpec",
    "Document",
    "Item",
    "content_hash",
    "load_calibration",
    "load_dataset",
    "load_evaluation",
    "parse_items",
    "read_items",
    "register_dataset",
    "resolve_spec",
    "split_name",
    "unique_specs",
]

FIXTURE_DIR = resource_path("data")

TASK_TYPES = ("factoid", "multi-hop", "fact-verification", "yes-no-conflict")
SCORING_RULES = ("qa", "label")


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset: its file, task type, scoring rule and file format (``bcas.formats``).

    ``caveat``: what a reader of results on this dataset must know when comparing them
    with a paper (the summaries and the report repeat it for every grid that ran it).
    """

    name: str
    file: str
    task: str
    scoring: str
    description: str = ""
    format: str = "bcas"
    caveat: str = ""

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


# MADARA's CONFLICTS (§5.2) is ConflictQA's entity-answer PopQA part scored by strict EM;
# its data could not be shipped (fixtures/data/README.md), so ``conflictqa`` is the StrategyQA part.
_STRATEGYQA = (
    "conflictqa is ConflictQA's StrategyQA part (yes/no answers, 2 of 4 documents per item support "
    "each side), not MADARA's CONFLICTS (the PopQA part: entity answers under strict EM, Llama NF "
    "13.9%): chance is 50%, so a weak model's NF rarely falls below the router's 30% threshold, the "
    "isolation (PDE) gains of Table 2 cannot show, and accuracies are not comparable with the paper's "
    "CONFLICTS column; compare treatments with each other"
)

# BCAS §4.1 searches "over 500K documents"; two shipped samples search far smaller or
# different collections, so their search-scaling numbers are not the paper's setting.
_TWOWIKI = (
    "2wikimultihopqa's shipped sample searches only its items' own paragraphs (175 in all, 2.2 per "
    "item, 80 of 82 items gold-only), not the paper's collection of over 500K documents "
    "(BCAS §4.1): a search rarely misses, so search and token budgets matter less than in the paper; "
    "give --bcas-corpus for the paper's setting"
)
_TRIVIAQA = (
    "triviaqa's shipped sample searches the passages a retriever already chose for its questions "
    "(RetrievalQA: 1,132 passages, about 23 per item), not the paper's collection of over 500K documents "
    "(BCAS §4.1): its searches re-rank pre-retrieved text, and 35 of 50 items have no answer-bearing "
    "passage; give --bcas-corpus for the paper's setting"
)

for _spec in (
    DatasetSpec("hotpotqa", "hotpotqa.jsonl", "multi-hop", "qa", "HotpotQA dev, distractor setting"),
    DatasetSpec("2wikimultihopqa", "2wikimultihopqa.jsonl", "multi-hop", "qa", "2WikiMultihopQA dev", caveat=_TWOWIKI),
    DatasetSpec("musique", "musique.jsonl", "multi-hop", "qa", "MuSiQue-Ans dev + train"),
    DatasetSpec("triviaqa", "triviaqa.jsonl", "factoid", "qa", "TriviaQA with retrieved passages", caveat=_TRIVIAQA),
    DatasetSpec("fever", "fever.jsonl", "fact-verification", "label", "FEVER 1.0 dev claims"),
    DatasetSpec(
        "conflictqa",
        "conflictqa_strategyqa.jsonl",
        "yes-no-conflict",
        "label",
        "ConflictQA StrategyQA",
        caveat=_STRATEGYQA,
    ),
    DatasetSpec(
        "conflictqa_strategyqa",
        "conflictqa_strategyqa.jsonl",
        "yes-no-conflict",
        "label",
        "ConflictQA StrategyQA",
        caveat=_STRATEGYQA,
    ),
    DatasetSpec("nq_open", "nq_open.jsonl", "factoid", "qa", "NQ-open with gold passage"),
):
    register_dataset(_spec)


@dataclass(frozen=True)
class Dataset:
    """Items of one file.  ``corpus``: the content hash of the corpus the items search
    (``--bcas-corpus``), folded into ``hash`` so records of different corpora never mix.

    ``task``: the one task of every item (the generator prompt the pipelines use), and
    ``task_source`` where it came from: ``registered`` (the dataset registry), ``format``
    (the file format's declared task, a mixed file's included) or ``file`` (a label task
    that one inference over the whole file found, :func:`bcas.formats.infer_task`); never an
    item's own gold answer."""

    name: str
    path: str
    task: str
    scoring: str
    items: tuple[Item, ...]
    hash: str
    corpus: str | None = None
    task_source: str = "registered"

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

    def with_corpus(self, corpus_hash: str) -> Dataset:
        """The same items searching the corpus with content hash ``corpus_hash``."""
        return replace(self, corpus=corpus_hash, hash=_combined_hash(content_hash(self.items), corpus_hash))

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
        return self._keep(self._ranked(seed)[:limit])

    def _ranked(self, seed: int) -> list[int]:
        """Item positions in the seeded permutation: ordered by sha256(seed:id)."""
        return sorted(
            range(len(self.items)),
            key=lambda i: hashlib.sha256(f"{seed}:{self.items[i].id}".encode()).hexdigest(),
        )

    def _keep(self, positions: list[int]) -> Dataset:
        items = tuple(self.items[i] for i in sorted(positions))
        h = content_hash(items)
        if self.corpus is not None:
            h = _combined_hash(h, self.corpus)
        return replace(self, items=items, hash=h)

    def calibration_split(self, calibration_n: int, seed: int = 0) -> tuple[Dataset, Dataset]:
        """``(calibration, rest)``: disjoint item sets for MADARA's Algorithm 2.

        Calibration is the first ``calibration_n`` items of the seeded permutation that
        :meth:`subset` also uses; ``rest`` holds every other item, and
        ``rest.subset(limit, seed)`` takes the evaluated items from it (the next items
        of the same permutation), so the probe, EM_NF and the router never see an
        evaluated item.  ``DatasetError`` when fewer than ``calibration_n`` items exist.
        """
        if calibration_n < 1:
            raise ValueError(f"calibration_n must be >= 1, got {calibration_n}")
        if len(self.items) < calibration_n:
            raise DatasetError(
                self.path,
                None,
                f"dataset {self.name!r} has {len(self.items)} items, fewer than the {calibration_n} calibration "
                "items MADARA's probe and router need (Algorithm 2, AssessConfig.calibration_n): pass a larger "
                "file (--bcas-datasets FORMAT:PATH) or lower calibration_n",
            )
        ranked = self._ranked(seed)
        return self._keep(ranked[:calibration_n]), self._keep(ranked[calibration_n:])


def _combined_hash(items_hash: str, corpus_hash: str) -> str:
    return hashlib.sha256(f"items:{items_hash}\ncorpus:{corpus_hash}\n".encode()).hexdigest()


def read_items(path: str | Path) -> tuple[Item, ...]:
    """Read and validate every line of a JSONL file; raise ``DatasetError`` on the first fault."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    return parse_items(path, path.read_bytes())


_SPLIT_NAMES = {"train", "dev", "test", "val", "valid", "validation", "corpus"}


def dataset_name(path: str | Path) -> str:
    """A readable name for a dataset file: its stem, with the folder for bare split names.

    ``hotpotqa/dev.jsonl`` (FlashRAG's layout) is ``hotpotqa-dev``; characters other
    than letters, digits and ``_.+-`` become ``-`` so the name fits a test id.
    """
    path = Path(path)
    stem = path.stem
    if stem.lower() in _SPLIT_NAMES and path.parent.name:
        stem = f"{path.parent.name}-{stem}"
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", stem) or "dataset"


_NAMED = re.compile(r"^([A-Za-z0-9_.+-]+)=(.+)$")


def split_name(spec: str) -> tuple[str | None, str]:
    """``NAME=SPEC`` -> (NAME, SPEC): the name a file's dataset goes by (case ids, its marker,
    summary rows, records); anything else -> (None, spec).  An existing path is never split."""
    text = str(spec)
    found = _NAMED.match(text)
    if found is None or Path(text).exists():
        return None, text
    return found.group(1), found.group(2)


def dataset_label(spec: str) -> str:
    """The label of a ``--bcas-datasets`` entry in case ids: its ``NAME=``, a registered name, or the file's name."""
    name, spec = split_name(spec)
    if name:
        return name
    if spec in DATASETS:
        return spec
    _, path = split_spec(spec)
    return dataset_name(path)


def unique_specs(specs: list[str]) -> list[str]:
    """``specs`` with ``NAME=`` given to each file whose name another dataset of the list shares.

    Files named alike in different folders (``a/data.jsonl``, ``b/data.jsonl``) would pool
    into one summary row with repeated item ids; each gets its nearest distinct folders
    prepended (``a-data``, ``b-data``).  Registered names and named entries keep theirs.
    """
    labels = [dataset_label(s) for s in specs]
    taken = set(labels)
    out = list(specs)
    for i, spec in enumerate(specs):
        if labels.count(labels[i]) < 2 or spec in DATASETS or split_name(spec)[0]:
            continue
        path = Path(split_spec(spec)[1]).resolve()
        stem = dataset_name(path)
        folders = [f for f in path.parent.parts if f not in ("/", "")]
        candidates = [f"{'-'.join(folders[-k:])}-{stem}" for k in range(1, len(folders) + 1)]
        candidates = [re.sub(r"[^A-Za-z0-9_.+-]+", "-", c) for c in candidates] + [f"{stem}-{n}" for n in range(2, 99)]
        name = next(c for c in candidates if c not in taken)
        taken.add(name)
        out[i] = f"{name}={spec}"
    return out


def resolve_spec(name_or_path: str | Path) -> DatasetSpec:
    """The registered spec for a name, or an ad-hoc spec for ``FORMAT:PATH`` or a path.

    A bare path that exists has its layout detected (``bcas.formats.detect_format``);
    a ``.jsonl`` path that does not exist is read as our schema (and reported missing).
    """
    key = str(name_or_path)
    name, rest = split_name(key)
    if name:
        return replace(resolve_spec(rest), name=name)
    if key in DATASETS:
        return DATASETS[key]
    fmt, rest = split_spec(key)
    if fmt is not None:
        path = Path(rest)
        return DatasetSpec(dataset_name(path), str(path.resolve()), fmt.task, fmt.scoring, fmt.description, fmt.name)
    path = Path(key)
    if path.is_file():
        # A .jsonl file no layout fits is read as our schema, whose checks name the faulty field.
        fmt = detect_format(path, default=FORMATS.get("bcas") if path.suffix == ".jsonl" else None)
        return DatasetSpec(dataset_name(path), str(path.resolve()), fmt.task, fmt.scoring, fmt.description, fmt.name)
    if path.suffix == ".jsonl" or path.exists():
        return DatasetSpec(path.stem, str(path.resolve()), "factoid", "qa", "ad-hoc JSONL file")
    raise DatasetError(
        key,
        None,
        f"unknown dataset{did_you_mean(key, DATASETS)}; registered names are {sorted(DATASETS)}, or give a file path "
        "or FORMAT:PATH (bcas data check --formats lists the formats)",
    )


def _inferred(fmt: Format, task: str, scoring: str) -> str:
    """Where a file's task came from: ``file`` when its golds made it a label task (every gold a
    label, :func:`bcas.formats.infer_task`), ``format`` when the format's declared task stands (a
    mixed file, such as HotpotQA's yes/no and span answers, keeps it)."""
    return "file" if (task, scoring) != (fmt.task, fmt.scoring) else "format"


def load_dataset(name_or_path: str | Path, limit: int | None = None, seed: int = 0) -> Dataset:
    """Load a registered dataset by name, a file by path, or ``FORMAT:PATH`` (each may be ``NAME=...``)."""
    name, rest = split_name(str(name_or_path))
    if name in DATASETS and rest != name:
        raise DatasetError(rest, None, f"the name {name!r} is a registered dataset's; choose another NAME= for it")
    spec = resolve_spec(rest)
    registered = spec.name in DATASETS and DATASETS[spec.name] is spec
    path = spec.path if registered else Path(spec.file)
    task, scoring, source = spec.task, spec.scoring, "registered"
    if spec.format == "bcas":
        items = _cached_items(str(path))
        if not registered:  # a file of ours: a label task when every gold is a label (FEVER's, yes/no)
            task, scoring = infer_task(FORMATS.get("bcas"), items)
            source = _inferred(FORMATS.get("bcas"), task, scoring)
    else:
        fmt = lookup_format(spec.format)
        assert fmt is not None
        items, task, scoring = _cached_format(str(path), fmt)
        source = _inferred(fmt, task, scoring)
    full = Dataset(name or spec.name, str(path), task, scoring, items, content_hash(items), task_source=source)
    return full.subset(limit, seed)


def load_evaluation(name_or_path: str | Path, limit: int | None = None, seed: int = 0, holdout: int = 0) -> Dataset:
    """The evaluated items of a case: ``load_dataset``'s subset, or with ``holdout`` > 0
    the subset drawn from the items outside the calibration split
    (:meth:`Dataset.calibration_split`), for grids whose router calibrates."""
    if holdout <= 0:
        return load_dataset(name_or_path, limit, seed)
    _, rest = load_dataset(name_or_path, None, seed).calibration_split(holdout, seed)
    if not rest.items:
        raise DatasetError(
            rest.path,
            None,
            f"dataset {rest.name!r} has only the {holdout} calibration items and none left to evaluate (they must "
            "be disjoint, MADARA Algorithm 2): pass a larger file (--bcas-datasets FORMAT:PATH)",
        )
    return rest.subset(limit, seed)


def load_calibration(name_or_path: str | Path, calibration_n: int, seed: int = 0) -> Dataset:
    """The calibration items (MADARA Algorithm 2's C): never among :func:`load_evaluation`'s items."""
    calibration, _ = load_dataset(name_or_path, None, seed).calibration_split(calibration_n, seed)
    return calibration


_ITEM_CACHE: dict[tuple[str, str], tuple[Item, ...]] = {}
_FORMAT_CACHE: dict[tuple[str, str, str], tuple[tuple[Item, ...], str, str]] = {}


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


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        raise DatasetError(path, None, "no such file") from None
    return h.hexdigest()


def _cached_format(path: str, fmt: Format) -> tuple[tuple[Item, ...], str, str]:
    # Keyed on a streamed digest of the file (large official files are never read whole).
    p = Path(path)
    key = (fmt.name, str(p.resolve()), _file_digest(p))
    if key not in _FORMAT_CACHE:
        _FORMAT_CACHE[key] = read_format(p, fmt)
    return _FORMAT_CACHE[key]


def check_lines(names: list[str] | None = None) -> list[str]:
    """``bcas data check``: item count, document count and content hash of each dataset (every
    registered one by default); :class:`DatasetError` on the first that cannot be read."""
    loaded = [load_dataset(name) for name in (names or list(DATASETS))]
    # columns as wide as their longest cell plus two spaces: a long name never runs into its task
    name_w = max([len("dataset"), *(len(ds.name) for ds in loaded)]) + 2
    task_w = max([len("task"), *(len(ds.task) for ds in loaded)]) + 2
    lines = [f"{'dataset':<{name_w}}{'task':<{task_w}}{'items':>7}{'docs':>8}  sha256"]
    for ds in loaded:
        n_docs = sum(len(i.documents) for i in ds.items)
        lines.append(f"{ds.name:<{name_w}}{ds.task:<{task_w}}{len(ds):>7}{n_docs:>8}  {ds.hash}")
    return lines


def format_lines() -> list[str]:
    """``bcas data check --formats``: the dataset formats ``FORMAT:PATH`` accepts."""
    lines = []
    for row in describe():
        aliases = f" (also {', '.join(row['aliases'])})" if row["aliases"] else ""
        lines.append(f"{row['name']:<18}{row['description']}{aliases}")
    return lines
