"""Re-grade recorded answers with another judge, without regenerating them.

``bcas rejudge RUN --judge BACKEND:MODEL`` is to grades what
``reprice`` is to cost: every answer of the run that this judge (its grade identity:
judge fingerprint + judge prompt hash + repeats, :func:`bcas.identity.grade_id`) has not
graded yet is sent to it once, and the record is appended again with the new grade added
to ``grades`` and shown as ``judge``/``judge_verdict``.  Nothing else of the record
changes; the newest version of an answer wins when a run is read (``dedupe``).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from bcas.records import PriceSheet, Record, ResultStore


@dataclass
class RejudgeSummary:
    grade_id: str
    graded: int
    already: int
    correct: int
    incorrect: int
    unknown: int
    fingerprint: str = ""  # the judge's
    spec: str = ""
    repeats: int = 1

    def manifest_entry(self) -> dict[str, Any]:
        """The judge as a session entry of run.json describes it (:func:`bcas.run.manifest.record_command`)."""
        return {"spec": self.spec, "repeats": self.repeats, "fingerprint": self.fingerprint, "grade_id": self.grade_id}

    def lines(self) -> list[str]:
        return [
            f"grade: {self.grade_id}",
            f"graded now: {self.graded} (correct {self.correct}, incorrect {self.incorrect}, "
            f"no verdict {self.unknown}); already graded by this judge: {self.already}",
        ]


def _judge_model(spec: str, base_url: str | None, api_key_env: str | None, cache: bool) -> tuple[Any, str]:
    from bcas.llm import backend_meta, load_model
    from bcas.llm.fingerprint import model_fingerprint

    backend, _, name = spec.partition(":")
    options: dict[str, Any] = {}
    if backend_meta(backend, "needs_base_url"):
        if not base_url:
            raise ValueError(f"--judge {backend}:MODEL needs --judge-base-url")
        options["base_url"] = base_url
        if api_key_env:
            options["api_key_env"] = api_key_env
    fingerprint = model_fingerprint(backend, name or None, base_url=base_url, api_key_env=api_key_env)
    return load_model(backend, name or None, cache=cache, **options), fingerprint


def sheet_in_force(run_dir: str | os.PathLike[str]) -> PriceSheet | None:
    """The price sheet of the run's last session (``run.json``), or None: pricing off, no manifest,
    or a sheet file that is no longer there (the judge's cost then stays unknown)."""
    from bcas.records import PriceError, load_price_sheet
    from bcas.records.manifest import read_manifest

    sessions = [s for s in (read_manifest(run_dir) or {}).get("sessions") or [] if isinstance(s, dict)]
    entry = sessions[-1].get("price_sheet") if sessions else None
    if not isinstance(entry, dict) or not entry.get("path"):
        return None
    try:
        return load_price_sheet(str(entry["path"]), entry.get("sheet"))
    except PriceError:
        return None


async def _grade_all(
    records: list[Record], judge: Any, gid: str, store: ResultStore, concurrency: int, sheet: PriceSheet | None
) -> list[Record]:
    from bcas.grading import grade_record
    from bcas.records import reprice_record

    gate = asyncio.Semaphore(concurrency)

    async def one(rec: Record) -> Record:
        async with gate:
            graded: Record = await grade_record(rec, judge, gid)
        if sheet is not None:  # the judge's cost under the run's sheet, as a session prices its grades
            graded = reprice_record(graded, sheet)
        await asyncio.to_thread(store.append, graded)
        return graded

    try:
        return list(await asyncio.gather(*(one(r) for r in records)))
    finally:
        await judge.model.aclose()


def rejudge(
    run_dir: str | os.PathLike[str],
    judge_spec: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    repeats: int = 1,
    concurrency: int = 4,
    cache: bool = True,
    three_way: bool = False,
) -> RejudgeSummary:
    """Grade every answer of ``run_dir`` that ``judge_spec`` has not graded (module docstring)."""
    from bcas.grading import LLMJudge
    from bcas.identity import grade_id
    from bcas.keys import key_name_problem
    from bcas.run.rebuild import check_run_folder

    problem = key_name_problem(api_key_env)
    if problem is not None:
        raise ValueError(f"--api-key-env: the value {problem}")  # never the value itself
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    check_run_folder(run_dir)  # a folder that is not a run is never created (nor its lock)
    model, fingerprint = _judge_model(judge_spec, base_url, api_key_env, cache)  # a bad judge: before any write
    store = ResultStore(run_dir)
    store.merge()
    gid = grade_id(fingerprint, repeats, three_way)
    records = store.records()
    todo = [r for r in records if gid not in (r.grades or {})]
    graded = (
        asyncio.run(
            _grade_all(
                todo,
                LLMJudge(model, repeats=repeats, three_way=three_way),
                gid,
                store,
                concurrency,
                sheet_in_force(run_dir),
            )
        )
        if todo
        else []
    )
    verdicts = [r.judge_verdict for r in graded]
    return RejudgeSummary(
        gid,
        len(graded),
        len(records) - len(todo),
        sum(v is True for v in verdicts),
        sum(v is False for v in verdicts),
        sum(v is None for v in verdicts),
        fingerprint,
        judge_spec,
        repeats,
    )
