"""Group by identity, display by name: two fingerprints are never pooled in a report.

The user-level case is a served model whose deployment changes behind the same name
(another ``system_fingerprint``): the second run must answer every item again, and the
run folder's summary and report must show two groups, each with its own answers, not
one model with two epochs.  The server is a scripted loopback double (control flow
only: which fingerprint it reports), the retrieval is the real BM25 index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bcas.identity import server_fingerprint, short
from bcas.records import Record
from bcas.report.compare import Run, compare_runs
from bcas.report.membership import model_names, unique_short
from bcas.testing.fault_server import FaultServer
from bcas.testing.instant import canned_reply
from bcas.testing.project import budget_grid, codename_items, grid_project, preload, read_records

preload("bcas.llm.openai_compat")

pytest_plugins = ["pytester"]

QWEN = "served:Qwen/Qwen3-8B"
QWEN_X = "served:Qwen/Qwen3-8B#fp_x"


# -- the display forms ---------------------------------------------------------------------


def test_fingerprints_sharing_ten_characters_get_distinct_longer_forms() -> None:
    assert short(QWEN) == short(QWEN_X)  # the clash the report used to pool
    assert unique_short([QWEN, QWEN_X]) == {QWEN: "served:Qwen/Qwen3-8B", QWEN_X: "served:Qwen/Qwen3-8B#"}
    gguf = "gguf:sha256:" + "ab" * 32
    assert unique_short([gguf, "mock:gold"]) == {gguf: "gguf:ababababab", "mock:gold": "mock:gold"}
    # Fingerprints no width tells apart (they differ before the last ':') are shown whole.
    twins = ["hf-local:a:0123", "hf-local:b:0123"]
    assert unique_short(twins) == {fp: fp for fp in twins}
    assert unique_short([]) == {}


fingerprint = st.one_of(
    st.text(max_size=30),
    st.builds(server_fingerprint, st.text(min_size=1, max_size=20), st.one_of(st.none(), st.text(max_size=8))),
    st.builds(lambda h: f"gguf:sha256:{h}", st.text("0123456789abcdef", max_size=64)),
)


@example([QWEN, QWEN_X])
@example(["x:y", "x:z:y", "x:y:y"])
@given(st.lists(fingerprint, max_size=12))
def test_distinct_fingerprints_always_get_distinct_displays(prints: list[str]) -> None:
    forms = unique_short(prints)
    assert set(forms) == set(prints)
    assert len(set(forms.values())) == len(set(prints))


@example([("m", QWEN), ("m", QWEN_X)])
@example([("m", "a"), ("m [a]", "b"), ("m", "")])
@given(st.lists(st.tuples(st.sampled_from(["m", "m [mock:a]", "n"]), st.sampled_from(["", "mock:a", "mock:b", QWEN]))))
def test_model_names_are_one_name_per_label_and_fingerprint(pairs: list[tuple[str, str]]) -> None:
    names = model_names({"model": label, "model_fingerprint": fp} for label, fp in pairs)
    assert set(names) == set(pairs)
    assert len(set(names.values())) == len(names)
    for (label, _), name in names.items():
        assert name.startswith(label)


# -- a run folder, as a user meets it ------------------------------------------------------


class DeploymentServer(FaultServer):
    """The scripted server with a ``system_fingerprint`` in every answer (another deployment: another value)."""

    system_fingerprint = "fp_a"

    def completion(self, body: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        return {**super().completion(body, text), "system_fingerprint": self.system_fingerprint}


ITEMS = 3


def _run(pytester: pytest.Pytester, server: FaultServer, report: Path) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "no:cacheprovider", "--bcas-no-cache",
        "--bcas-backend", "openai", "--bcas-base-url", server.base_url, "--bcas-model", "Qwen/Qwen3-8B",
        "--bcas-grid", "deploy", "--bcas-report", str(report),
    )  # fmt: skip


def test_a_changed_deployment_behind_one_name_is_answered_again_and_reported_apart(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    data = pytester.path / "deploy.jsonl"
    grid_project(
        pytester.path,
        budget_grid("deploy", [data], searches=(1,), limit=ITEMS),
        datasets={data.name: codename_items(ITEMS)},
    )
    report = pytester.path / "run"
    with DeploymentServer(model="Qwen/Qwen3-8B", reply=canned_reply) as server:
        _run(pytester, server, report).assert_outcomes(passed=1)
        first = server.requests
        server.system_fingerprint = "fp_b"  # the same name now serves another deployment
        _run(pytester, server, report).assert_outcomes(passed=1)
        second = server.requests - first
    records = read_records(report)
    prints = sorted({r["model_fingerprint"] for r in records})
    # Both fingerprints carry what the server reported; they share far more than 10 characters.
    assert len(prints) == 2 and all(p.startswith("served:Qwen/Qwen3-8B") for p in prints), prints
    assert {p.rsplit("fp_", 1)[-1] for p in prints} == {"a", "b"}
    assert short(prints[0]) == short(prints[1])
    # The second deployment answered every item itself: nothing of the first was reused.
    assert second >= ITEMS and len(records) == 2 * ITEMS
    for fp in prints:
        assert sorted(r["item_id"] for r in records if r["model_fingerprint"] == fp) == sorted(
            {r["item_id"] for r in records}
        )
    # summary.json: two groups of one epoch each, one per fingerprint, under distinct names.
    rows = json.loads((report / "summary.json").read_text())["rows"]
    assert len(rows) == 2, rows
    assert sorted(r["model_fingerprint"] for r in rows) == prints
    assert all(r["n"] == ITEMS and r["epochs"] == 1 for r in rows)
    names = [r["model"] for r in rows]
    label = records[0]["model"]
    assert len(set(names)) == 2 and all(name.startswith(f"{label} [") for name in names)
    html = (report / "index.html").read_text(encoding="utf-8")
    assert all(name in html for name in names)


# -- comparisons -----------------------------------------------------------------------------


def _records(label: str, fp: str, correct: list[bool]) -> list[Record]:
    return [
        Record(
            run_id="r", model=label, config_id="c", label="s1", dataset="d", dataset_hash="h", item_id=f"q{i}",
            question="?", answers=["x"], prediction="x" if ok else "y", correct_em=ok, f1=float(ok),
            model_fingerprint=fp,
        )
        for i, ok in enumerate(correct)
    ]  # fmt: skip


def test_compare_pairs_equal_fingerprints_and_never_pools_two_models() -> None:
    right, wrong = [True] * 4, [False] * 4
    run_a = Run(Path("a"), _records("qwen", QWEN, right) + _records("qwen", QWEN_X, wrong), None)
    run_b = Run(Path("b"), _records("qwen", QWEN, right) + _records("qwen", QWEN_X, right), None)
    comps, unmatched = compare_runs(run_a, run_b)
    assert not unmatched and len(comps) == 2
    by_model = {c.model: c for c in comps}
    assert set(by_model) == {"qwen [served:Qwen/Qwen3-8B]", "qwen [served:Qwen/Qwen3-8B#]"}
    assert (
        by_model["qwen [served:Qwen/Qwen3-8B]"].diff == 0.0 and not by_model["qwen [served:Qwen/Qwen3-8B]"].mismatches
    )
    assert by_model["qwen [served:Qwen/Qwen3-8B#]"].diff == 1.0 and by_model["qwen [served:Qwen/Qwen3-8B#]"].epochs == 1
    # One fingerprint in each run, different: still paired, the two models named (the model is the comparison).
    lone_a, lone_b = (
        Run(Path("a"), _records("qwen", QWEN, right), None),
        Run(Path("b"), _records("qwen", QWEN_X, right), None),
    )
    (comp,), unmatched = compare_runs(lone_a, lone_b)
    assert not unmatched and not comp.mismatches
    assert any(n.startswith("models compared: A qwen") and QWEN in n and QWEN_X in n for n in comp.notes)
    # Two fingerprints in A, the other one only in B: only the equal fingerprint is paired.
    half_b = Run(Path("b"), _records("qwen", QWEN_X, right), None)
    (comp,), unmatched = compare_runs(run_a, half_b)
    assert comp.model_a == "qwen [served:Qwen/Qwen3-8B#]" and comp.diff == 1.0
    assert unmatched == ["only in A: qwen [served:Qwen/Qwen3-8B] / d / s1"]


# -- one label, several answer identities -----------------------------------------------------


def _variant(prompt_hash: str, correct: bool, config_id: str = "c", dataset_hash: str = "h") -> list[dict[str, Any]]:
    out = []
    for rec in _records("qwen", QWEN, [correct] * 3):
        row = rec.to_dict()
        row.update(prompt_hash=prompt_hash, config_id=config_id, dataset_hash=dataset_hash)
        out.append(row)
    return out


def test_answers_of_an_older_prompt_are_a_group_of_their_own_not_an_epoch() -> None:
    from bcas.report.summary import summarize

    old = _variant("aaaaaa111111", correct=False)
    new = _variant("aaaaaa222222", correct=True)
    rows = summarize(old + new)
    assert sorted(r.label for r in rows) == ["s1 [prompt aaaaaa1]", "s1 [prompt aaaaaa2]"]
    assert {r.label: r.accuracy for r in rows} == {"s1 [prompt aaaaaa1]": 0.0, "s1 [prompt aaaaaa2]": 1.0}
    assert all(r.epochs == 1 and r.n == 3 for r in rows)
    # another file under the dataset's name and another configuration under the label are told apart too
    rows = summarize(_variant("p", True, config_id="c1", dataset_hash="h1") + _variant("p", True, "c2", "h2"))
    assert sorted(r.label for r in rows) == ["s1 [config c1, data h1]", "s1 [config c2, data h2]"]
    # one identity: the label alone, whatever the epochs
    assert [r.label for r in summarize(new)] == ["s1"]
