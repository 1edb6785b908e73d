"""A failed case never shows as a result, in any view of the run.

The smoke grid on a file of one-document items, with ``mock:gold``: MADARA's PDE and SDA
keep 2 documents, so their cases fail ("items averaged 1.0 documents, fewer than the 2
that pde needs"), while their records, graded against the gold answers, are all right.
Each view a user reads (summary.json and summary.csv on disk, the rendered report, the
terminal summary and an MLflow store) must carry the failed cases' status and reason
and no accuracy for them; the case that passed (No-Filter) keeps its accuracy.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from support.mockruns import REPO, run_pytest
from support.skips import MLFLOW_IMPORTABLE, skip_if_no_mlflow

from bcas.testing.project import grid_project

FAILED = ("madara/pde", "madara/sda")
REASON = "items averaged 1.0 documents, fewer than the 2 that {} needs"


def _one_document_items(n: int = 3) -> list[dict[str, Any]]:
    """The first ``n`` HotpotQA sample items, each with only its first document."""
    rows = []
    for line in (REPO / "fixtures" / "data" / "hotpotqa.jsonl").read_text(encoding="utf-8").splitlines()[:n]:
        row = json.loads(line)
        first = row["documents"][0]
        row["documents"] = [first]
        row["supporting"] = [s for s in row.get("supporting") or [] if s == first["id"]]
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str], str | None]:
    folder = grid_project(tmp_path_factory.mktemp("onedoc"), datasets={"onedoc.jsonl": _one_document_items()})
    uri = f"sqlite:///{folder / 'mlruns.db'}" if MLFLOW_IMPORTABLE else None
    args = ["--bcas-grid", "smoke", "--bcas-model", "mock:gold", "--bcas-datasets", "onedoc.jsonl"]
    args += ["--bcas-limit", "3", "--bcas-report", str(folder / "run"), "-k", "madara", "-p", "no:randomly"]
    if uri:
        args.append(f"--bcas-mlflow={uri}")
    result = run_pytest(folder, *args, env={"BCAS_MLFLOW_EXPERIMENT": "case-status"})
    return folder / "run", result, uri


def test_the_cases_fail_in_pytest_with_the_reason(
    run: tuple[Path, subprocess.CompletedProcess[str], str | None],
) -> None:
    _, result, _ = run
    out = result.stdout
    assert re.search(r"\b2 failed, 1 passed\b", out), out[-3000:]
    for label in FAILED:
        assert REASON.format(label.split("/")[1]) in out


def test_summary_json_and_csv_carry_status_and_reason_and_no_accuracy(
    run: tuple[Path, subprocess.CompletedProcess[str], str | None],
) -> None:
    run_dir, _, _ = run
    rows = {r["label"]: r for r in json.loads((run_dir / "summary.json").read_text())["rows"]}
    assert set(rows) == {"madara/nf", *FAILED}
    assert rows["madara/nf"]["status"] == "passed" and rows["madara/nf"]["accuracy"] == 1.0
    for label in FAILED:
        row = rows[label]
        assert row["status"] == "failed"
        assert REASON.format(label.split("/")[1]) in row["reason"]
        for name in ("accuracy", "ci_lo", "ci_hi", "correct", "em_squad", "mean_f1", "judge_accuracy"):
            assert row[name] is None, name
        assert row["n"] == 3  # what it ran is still said
    summary = json.loads((run_dir / "summary.json").read_text())
    compared = {(c["label"], c["reference"]) for c in summary["comparisons"]} | {
        (c["reference"], c["label"]) for c in summary["comparisons"]
    }
    assert not any(label in pair for pair in compared for label in FAILED)  # no comparison rests on them
    with (run_dir / "summary.csv").open(encoding="utf-8") as handle:
        csv_rows = {r["label"]: r for r in csv.DictReader(handle)}
    assert csv_rows["madara/nf"]["accuracy"] == "1.0"
    for label in FAILED:
        assert csv_rows[label]["status"] == "failed" and csv_rows[label]["accuracy"] == ""
        assert REASON.format(label.split("/")[1]) in csv_rows[label]["reason"]


class _Cells(HTMLParser):
    """The text of each row of the table ``id``, and the page's text."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id, self.inside, self.rows, self.text = table_id, False, [], []
        self.row: list[str] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.inside = dict(attrs).get("id") == self.table_id
        elif self.inside and tag == "tr":
            self.row = []
        elif self.inside and tag == "td":
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif tag == "td" and self.row is not None and self.cell is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr" and self.row:
            self.rows.append(self.row)
            self.row = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self.cell is not None:
            self.cell.append(data)


def test_the_report_marks_the_failed_cases_and_says_why(
    run: tuple[Path, subprocess.CompletedProcess[str], str | None],
) -> None:
    run_dir, _, _ = run
    page = (run_dir / "index.html").read_text(encoding="utf-8")
    parsed = _Cells("summary")
    parsed.feed(page)
    by_label = {row[3]: row for row in parsed.rows}
    assert by_label["madara/nf"][5] == "100.0"
    for label in FAILED:
        row = by_label[label]
        assert row[5] == "FAILED"
        assert "100.0" not in row  # no figure of the failed case reads as its accuracy
    text = " ".join(parsed.text)
    assert "2 of 3 cases did not pass" in text
    for label in FAILED:
        assert REASON.format(label.split("/")[1]) in text
    madara = _Cells("madara")
    madara.feed(page)
    strict = {row[3]: row[5] for row in madara.rows}
    assert strict == {"madara/nf": "100.0", "madara/pde": "FAILED", "madara/sda": "FAILED"}


def test_the_terminal_summary_marks_the_failed_cases(
    run: tuple[Path, subprocess.CompletedProcess[str], str | None],
) -> None:
    _, result, _ = run
    lines = result.stdout.splitlines()
    table = [line for line in lines if line.startswith("smoke ") and "madara/" in line]
    assert len(table) == 3, "\n".join(lines[-60:])
    for line in table:
        failed = any(f" {label} " in line for label in FAILED)
        assert ("FAILED" in line) == failed and ("100.0" in line) == (not failed), line
    for label in FAILED:
        method = label.split("/")[1]
        assert any(
            line.startswith(f"FAILED: smoke/mock-gold/onedoc/{label}: {REASON.format(method)}") for line in lines
        )
    # the end-of-case line while the run goes on: the reason, not an accuracy
    for label in FAILED:
        ends = [line for line in lines if line.startswith("[bcas] ") and f"-{label}:" in line]
        assert ends and all("FAILED: " in line and "100.0%" not in line for line in ends), ends
    nf = [line for line in lines if line.startswith("[bcas] ") and "-madara/nf:" in line]
    assert nf and "100.0%" in nf[0], nf


@skip_if_no_mlflow
def test_mlflow_has_the_status_and_reason_and_no_accuracy(
    run: tuple[Path, subprocess.CompletedProcess[str], str | None],
) -> None:
    from mlflow.tracking import MlflowClient

    _, _, uri = run
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("case-status")
    runs = client.search_runs([experiment.experiment_id])
    cases = {r.data.params["label"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert set(cases) == {"madara/nf", *FAILED}
    for label, case in cases.items():  # named model · dataset · configuration
        assert case.info.run_name == f"{case.data.params['model']} · {case.data.params['dataset']} · {label}"
    assert cases["madara/nf"].data.tags["bcas.status"] == "passed"
    assert cases["madara/nf"].data.metrics["accuracy"] == 1.0
    for label in FAILED:
        case = cases[label]
        assert case.data.tags["bcas.status"] == "failed"
        assert REASON.format(label.split("/")[1]) in case.data.tags["bcas.status_reason"]
        assert not {"accuracy", "ci_lo", "ci_hi", "em_squad", "mean_f1"} & set(case.data.metrics)
        assert case.data.metrics["n"] == 3
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.data.metrics["cases_not_passed"] == 2
