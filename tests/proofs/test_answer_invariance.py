"""Nothing a model sees depends on the answer: the invariance proof.

A model under evaluation may know the question, the documents it retrieved and the
dataset's declared task; the gold answer and every annotation are for grading only.  A
check for known field names misses the leak nobody thought of, so this proof asks the
consequence instead.  Each shipped dataset is cut to a few items and written twice:

- as it is;
- with the gold answers and every other item annotation (supporting facts, gold
  flags, meta: stance, side, origin, ...) moved one item on, and inside each item the
  documents' texts moved one place on while their ids and annotations (stance, side,
  supports_gold, ...) stay where they were: a document's id, position in the file and
  annotations now belong to another text.

Where a grid routes (MADARA Algorithm 2), the calibration items keep their answers: the
route is learnt from them by design (EvalNF is exact match on the calibration set), and
they are never evaluated; the ``rsc`` grid, which probes and runs EvalNF without routing,
moves theirs too, so a calibration prompt chosen from its gold still fails.

Every registered grid runs on both copies through a model whose replies depend on the
request alone (the ``random`` mock, behind a recording model).  Every request of the two
runs (messages, tool definitions, JSON schema, token caps) must be byte-identical.  A
prompt chosen from an item's gold answer (yes/no against factoid), a dataset id shown as
a passage id, documents kept in the file's order, an annotation in a prompt: each makes
some request differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.data import DATASETS, load_dataset
from bcas.grids import GRIDS
from bcas.registry import ROUTED_METHOD
from bcas.resources import resource_path
from bcas.testing.recording import RecordingModel, recording_backend

N_ITEMS = 4  # items per copy: 1 calibrates the grids that hold a calibration split out, 3 are evaluated
CALIBRATION_N = 1
SEED = 0  # the runs' seed (--bcas-seed's default)
LABELS = {"yes", "no", "supports", "refutes", "not enough info"}
_MODELS: list[RecordingModel] = []


@pytest.fixture(autouse=True)
def _recording_backend() -> Iterator[None]:
    """A recording model in front of the ``random`` mock (its replies read the request only)."""
    with recording_backend("answerblind") as made:
        global _MODELS
        _MODELS = made
        yield


def shipped() -> list[Path]:
    """Every dataset file the package ships (``fixtures/data`` is the same folder)."""
    return sorted(resource_path("data").glob("*.jsonl"))


def _is_label(row: dict[str, Any]) -> bool:
    return {str(a).strip().lower() for a in row["answers"]} <= LABELS


def small_copy(rows: list[dict[str, Any]], n: int = N_ITEMS) -> list[dict[str, Any]]:
    """The first ``n`` items; where the file has golds of both kinds (a label: yes/no, FEVER's;
    anything else), the first of each kind in turn, so moving the golds one item on changes the
    kind of every item's gold."""
    kinds = [[r for r in rows if not _is_label(r)], [r for r in rows if _is_label(r)]]
    if not all(kinds):
        return rows[:n]
    return [kinds[j % 2][j // 2] for j in range(n) if j // 2 < len(kinds[j % 2])]


def _moved(values: list[Any]) -> list[Any]:
    """``values`` moved one place on (the last becomes the first)."""
    return values[-1:] + values[:-1]


DOCUMENT_REFERENCES = ("supporting", "gold")  # item annotations that name the item's documents by id


def _renamed(ids: list[str], source: dict[str, Any], target: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """``source``'s document ids in ``ids`` as the ids of ``target``'s documents at the same places
    (an annotation moved to another item keeps naming documents of the item it is in)."""
    place = {d["id"]: j for j, d in enumerate(source.get("documents") or [])}
    theirs = [d["id"] for d in next(r for r in rows if r["id"] == target["id"]).get("documents") or []]
    return [
        theirs[place[i]] if i in place and place[i] < len(theirs) else i
        for i in ids
        if i not in place or place[i] < len(theirs)
    ]


def permuted(rows: list[dict[str, Any]], held: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """``rows`` with every answer and annotation moved among the items (but those of ``held``),
    and inside each item the document texts moved among the documents' ids, positions and
    annotations (module docstring)."""
    item_keys = sorted({k for r in rows for k in r} - {"id", "question", "documents"})
    out = [{"id": r["id"], "question": r["question"]} for r in rows]
    missing = object()
    moving = [r for r in rows if r["id"] not in held]
    after = dict(zip([r["id"] for r in moving], _moved(moving), strict=True))
    sources = [after.get(r["id"], r) for r in rows]
    for key in item_keys:
        for row, source in zip(out, sources, strict=True):
            value = source.get(key, missing)
            if value is not missing:
                row[key] = _renamed(value, source, row, rows) if key in DOCUMENT_REFERENCES else value
    for row, original in zip(out, rows, strict=True):
        docs = original.get("documents") or []
        texts = _moved([(d.get("title", ""), d["text"]) for d in docs])
        row["documents"] = [
            {**doc, "title": title, "text": text} for doc, (title, text) in zip(docs, texts, strict=True)
        ]
    return out


def write(rows: list[dict[str, Any]], path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def seen(request: Any) -> str:
    """Everything of ``request`` a model reads, as one canonical string."""
    return json.dumps(
        {
            "messages": list(request.messages),
            "schema": request.json_schema,
            "tools": list(request.tools or ()),
            "max_tokens": request.max_tokens,
            "stop": list(request.stop or ()),
            "seed": request.seed,
        },
        sort_keys=True,
        ensure_ascii=False,
    )


def prompts(grid: str, dataset: str, run_dir: Path) -> list[str]:
    """Every request of ``grid`` on ``dataset`` (sorted: concurrent items may interleave)."""
    del _MODELS[:]
    bcas.evaluate(
        grids=grid,
        models="answerblind:random",
        datasets=f"copy-{Path(dataset).stem}={dataset}",
        limit="all",
        out=run_dir,
        no_cache=True,
        calibration_n=CALIBRATION_N,
        seed=SEED,
    )
    return sorted(seen(r) for model in _MODELS for r in model.requests)


def first_difference(a: list[str], b: list[str]) -> str:
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if not only_a and not only_b:
        return f"{len(a)} requests against {len(b)}"
    x, y = (only_a or [""])[0], (only_b or [""])[0]
    at = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
    return f"first differing request, at character {at}:\n  as is:    ...{x[max(0, at - 80) : at + 80]}\n  permuted: ...{y[max(0, at - 80) : at + 80]}"


def routes(grid: str) -> bool:
    """Whether ``grid`` runs the routed MADARA pipeline (Algorithm 2)."""
    return any(e.kind == "madara" and e.config.assess.method == ROUTED_METHOD for e in GRIDS[grid].entries)


def calibration_ids(path: str) -> frozenset[str]:
    """The ids of the items a run with ``CALIBRATION_N`` calibrates on (the seeded split, ids only)."""
    calibration, _ = load_dataset(path).calibration_split(CALIBRATION_N, SEED)
    return frozenset(i.id for i in calibration.items)


def assert_invariant(grid: str, source: Path, tmp: Path) -> None:
    """The routed pipeline learns its route from the calibration items' answers (Algorithm 2, line 6:
    EvalNF is exact match on C), so where a grid routes, those items keep theirs; the ``rsc`` grid
    (the probe and EvalNF, no route) moves them like every other item."""
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    small = small_copy(rows)
    name = source.stem.replace("_", "-")
    plain = write(small, tmp / "plain" / f"{name}.jsonl")
    held = calibration_ids(plain) if routes(grid) else frozenset()
    moved = write(permuted(small, held), tmp / "moved" / f"{name}.jsonl")
    first = prompts(grid, plain, tmp / "run-plain")
    second = prompts(grid, moved, tmp / "run-moved")
    assert first, f"no request reached the model: {grid} on {source.name}"
    assert first == second, (
        f"{grid} on {source.name}: a prompt depends on the answer; {first_difference(first, second)}"
    )


MIXED = "hotpotqa"  # the shipped dataset whose golds mix yes/no with other answers
# Grids whose pair on MIXED runs the most model calls (the bridged agent's turns, the five
# methods, the context and ablation sweeps): their MIXED pair joins CI's required proof stage to
# keep the default run short.
HEAVY = frozenset({"agents", "baselines", "context_scaling", "ablation"})


def pairs() -> Iterator[Any]:
    """Every (grid, shipped dataset): in the default run every grid but the ``HEAVY`` ones on
    ``MIXED``, where a task chosen per item from its gold would differ from the dataset's, and
    the smoke grid (both pipelines) on its own datasets; in CI's required proof stage
    (``--runproofs``, every submission) the ``HEAVY`` grids on ``MIXED``, each grid on its
    other own datasets and the smoke grid on every other dataset; the other pairs with
    ``--runslow``."""
    files = {DATASETS[name].path.resolve(): name for name in DATASETS}
    mixed = DATASETS[MIXED].path.resolve()
    for grid in sorted(GRIDS):
        own = {DATASETS[d].path.resolve() for d in GRIDS[grid].datasets if d in DATASETS}
        for source in shipped():
            where = source.resolve()
            default = (grid == "smoke" and where in own) or (where == mixed and grid not in HEAVY)
            proof = where in own or where == mixed or grid == "smoke"
            marks = () if default else (pytest.mark.proof_stage,) if proof else (pytest.mark.slow,)
            yield pytest.param(grid, source, id=f"{grid}-{files.get(source.resolve(), source.stem)}", marks=marks)


@pytest.mark.parametrize(("grid", "source"), list(pairs()))
def test_no_prompt_depends_on_the_answer(grid: str, source: Path, tmp_path: Path) -> None:
    assert_invariant(grid, source, tmp_path)


def test_the_permutation_moves_every_answer_and_annotation() -> None:
    """The second copy differs from the first in each answer and annotation it can move."""
    for source in shipped():
        rows = small_copy([json.loads(x) for x in source.read_text(encoding="utf-8").splitlines() if x.strip()])
        moved = permuted(rows)
        assert [r["question"] for r in moved] == [r["question"] for r in rows]
        assert [r["answers"] for r in moved] == _moved([r["answers"] for r in rows])
        if len({json.dumps(r["answers"]) for r in rows}) > 1:
            assert [r["answers"] for r in moved] != [r["answers"] for r in rows], source.name
        for before, after in zip(rows, moved, strict=True):
            texts = [d["text"] for d in before["documents"]]
            assert sorted(d["text"] for d in after["documents"]) == sorted(texts)
            assert [d["id"] for d in after["documents"]] == [d["id"] for d in before["documents"]]
            if len(set(texts)) > 1:  # an id now names another text
                assert [d["text"] for d in after["documents"]] != texts
