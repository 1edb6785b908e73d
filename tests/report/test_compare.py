"""``bcas compare RUN_A RUN_B``: flipped items against a hand count, refusal of
incomparable answers and its override, escaping of the HTML page.

Hand-made runs (records written with ResultStore) give outcomes chosen by hand; two runs
of the ``mock`` backend (gold vs random) check the same path end to end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bcas.cli import main as bcas_main
from bcas.records import Record, ResultStore
from bcas.report.compare import compare_runs, load_run
from bcas.testing.project import grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

HOSTILE = "<script>alert(1)</script>"

# Outcomes by hand: items q0..q9; A is right on 0 1 2 3 5 8, B on 0 2 4 5 6 7 8.
A_RIGHT = {0, 1, 2, 3, 5, 8}
B_RIGHT = {0, 2, 4, 5, 6, 7, 8}
A_ONLY = ["q1", "q3"]  # A right, B wrong: counted by hand
B_ONLY = ["q4", "q6", "q7"]  # A wrong, B right


def _rec(item: int, right: bool, *, label: str = "bm25/s1/t2k", epoch: int = 0, **identity: str) -> Record:
    fields = {"model_fingerprint": "gguf:sha256:aaaa", "dataset_hash": "d" * 64, "prompt_hash": "p" * 16}
    fields["config_id"] = f"cfg-{label}"
    fields.update(identity)
    return Record(
        run_id="r",
        model="smollm2-135m",
        dataset="hotpotqa",
        item_id=f"q{item}",
        question=f"question {item}?",
        answers=["alpha"],
        prediction="alpha" if right else "beta",
        correct_em=right,
        f1=1.0 if right else 0.0,
        label=label,
        epoch=epoch,
        steps=[
            {"kind": "search", "query": f"query {item}", "output": "{}", "docs": [f"d{item}"], "titles": [f"T{item}"]},
            {"kind": "answer", "output": "alpha" if right else "beta"},
        ],
        **fields,
    )


def _run(path: Path, records: list[Record]) -> Path:
    ResultStore(path).extend(records)
    return path


def _pair(tmp_path: Path, b_identity: dict[str, str] | None = None) -> tuple[Path, Path]:
    a = _run(
        tmp_path / "A",
        [_rec(i, i in A_RIGHT) for i in range(10)] + [_rec(i, True, label="bm25/s2/t2k") for i in range(4)],
    )
    b_recs = [_rec(i, i in B_RIGHT, **(b_identity or {})) for i in range(11)]  # q10: only in B
    b = _run(tmp_path / "B", b_recs + [_rec(i, True, label="bm25/s2/t2k") for i in range(4)])
    return a, b


def test_flipped_items_match_the_hand_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _pair(tmp_path)
    comps, unmatched = compare_runs(load_run(a), load_run(b))
    assert unmatched == []
    by_label = {c.label: c for c in comps}
    s1, s2 = by_label["bm25/s1/t2k"], by_label["bm25/s2/t2k"]
    assert (s1.n, s1.a_only, s1.b_only) == (10, A_ONLY, B_ONLY)
    assert (s1.acc_a, s1.acc_b) == (0.6, 0.7) and s1.diff == pytest.approx(0.1)
    assert s1.p_value == pytest.approx(1.0)  # 2 x P(Bin(5, 1/2) <= 2)
    assert s1.ci_lo < 0.1 < s1.ci_hi
    assert any("1 in B" in note for note in s1.notes)  # q10 is left out and said so
    assert (s2.n, s2.a_only, s2.b_only) == (4, [], [])

    out_html = tmp_path / "cmp.html"
    assert bcas_main(["compare", str(a), str(b), "--html", str(out_html)]) == 0
    out = capsys.readouterr().out
    assert "A right, B wrong (2): q1, q3" in out and "A wrong, B right (3): q4, q6, q7" in out
    html = out_html.read_text()
    shown = re.findall(r'<details class="flip" data-item="([^"]+)"', html)
    assert shown == A_ONLY + B_ONLY
    assert html.count('<div class="side">') == 2 * len(shown)  # both trajectories of every flipped item
    assert "T4" in html and "query 6" in html


@pytest.mark.parametrize(
    ("field", "named"),
    [("dataset_hash", "dataset hash"), ("prompt_hash", "prompt hash"), ("config_id", "configuration id")],
)
def test_incomparable_answers_are_refused_naming_the_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, named: str
) -> None:
    a, b = _pair(tmp_path, {field: "other-" + field})
    assert bcas_main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1  # one line
    assert f"{named} differs" in err and f"other-{field}" in err and "--allow-mismatch" in err

    out_html = tmp_path / "cmp.html"
    assert bcas_main(["compare", str(a), str(b), "--allow-mismatch", "--html", str(out_html)]) == 0
    out = capsys.readouterr().out
    assert "MISMATCH ALLOWED" in out and f"other-{field}" in out
    assert "A right, B wrong (2): q1, q3" in out
    override = re.search(r'<div class="warn" id="override">(.*?)</div>', out_html.read_text()).group(1)
    assert f"{named} differs" in override and f"other-{field}" in override


def test_hostile_text_is_escaped_in_the_page(tmp_path: Path) -> None:
    a = _run(tmp_path / "A", [_rec(0, True).replace(question=HOSTILE, answers=[HOSTILE]), _rec(1, False)])
    evil = _rec(0, False).replace(
        prediction=HOSTILE,
        question=HOSTILE,
        answers=[HOSTILE],
        steps=[{"kind": HOSTILE, "query": HOSTILE, "titles": [HOSTILE]}],
    )
    b = _run(tmp_path / "B", [evil, _rec(1, False)])
    out_html = tmp_path / "cmp.html"
    assert bcas_main(["compare", str(a), str(b), "--html", str(out_html)]) == 0
    html = out_html.read_text()
    # the only scripts: the Vega bundle and the figure loader, admitted by their hashes, and the figure's spec (data)
    assert sorted(re.findall(r"<script[^>]*>", html, flags=re.I)) == [
        '<script type="application/json">',
        "<script>",
        "<script>",
    ]
    assert html.count("<script") == 3
    # question, gold answer, B's prediction, step kind, query and document title
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 6
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def test_epochs_compare_per_item_means(tmp_path: Path) -> None:
    # A: q0 2/2, q1 1/2, q2 0/2; B: q0 1/2, q1 1/2, q2 2/2 -> A higher on q0, B higher on q2.
    a_right = {(0, 0), (0, 1), (1, 0)}
    b_right = {(0, 1), (1, 1), (2, 0), (2, 1)}
    a = _run(tmp_path / "A", [_rec(i, (i, e) in a_right, epoch=e) for i in range(3) for e in range(2)])
    b = _run(tmp_path / "B", [_rec(i, (i, e) in b_right, epoch=e) for i in range(3) for e in range(2)])
    [comp], _ = compare_runs(load_run(a), load_run(b))
    assert (comp.epochs, comp.a_only, comp.b_only) == (2, ["q0"], ["q2"])
    assert comp.test.startswith("paired t") and comp.acc_a == pytest.approx(0.5) and comp.acc_b == pytest.approx(2 / 3)
    assert comp.diff == pytest.approx(1 / 6)


def test_nothing_in_common_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path / "A", [_rec(0, True)])
    b = _run(tmp_path / "B", [_rec(0, True, label="other")])
    assert bcas_main(["compare", str(a), str(b)]) == 2
    assert "no model / dataset / configuration is in both runs" in capsys.readouterr().err


def test_mock_gold_against_mock_random_end_to_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(pytester.path)
    runs = {}
    for variant in ("gold", "random"):
        runs[variant] = pytester.path / variant
        result = pytester.runpytest(
            "--bcas-model",
            f"mock:{variant}",
            "--bcas-grid",
            "smoke",
            "-k",
            "bm25 and s1",
            "--bcas-limit",
            "5",
            "--bcas-report",
            str(runs[variant]),
            "-p",
            "no:cacheprovider",
        )
        result.assert_outcomes(passed=1)
    outcome = {v: {r["item_id"]: r["correct_em"] for r in read_records(p)} for v, p in runs.items()}
    assert len(outcome["gold"]) == 5 and set(outcome["gold"]) == set(outcome["random"])
    capsys.readouterr()

    # One model each, different fingerprints: the models are the comparison, no warning.
    out_html = tmp_path / "models.html"
    assert bcas_main(["compare", str(runs["gold"]), str(runs["random"]), "--html", str(out_html)]) == 0
    captured = capsys.readouterr()
    assert "MISMATCH" not in captured.out and captured.err == ""
    assert "models compared: A mock-gold (mock:gold) vs B mock-random (mock:random)" in captured.out
    assert 'id="override"' not in out_html.read_text() and "despite" not in out_html.read_text()
    [comp], _ = compare_runs(load_run(runs["gold"]), load_run(runs["random"]))
    assert comp.a_only == sorted(i for i in outcome["gold"] if outcome["gold"][i] and not outcome["random"][i])
    assert comp.b_only == sorted(i for i in outcome["gold"] if outcome["random"][i] and not outcome["gold"][i])
    assert comp.a_only  # the gold answers beat random spans somewhere
    # A run against itself: same identity, nothing flips.
    assert bcas_main(["compare", str(runs["gold"]), str(runs["gold"])]) == 0
    assert "no flipped items" in capsys.readouterr().out


def test_a_wrong_number_of_runs_is_one_line_naming_the_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run, or three without --report: refused with the count; three with --report are combined."""
    from bcas.report.compare import compare_command

    runs = [tmp_path / name for name in ("a", "b", "c")]
    for run in runs:
        run.mkdir()
    for given, extra in ((runs[:1], []), (runs, [])):
        capsys.readouterr()
        assert bcas_main(["compare", *map(str, given), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert f"got {len(given)}" in err and "--report DIR" in err and len(err.splitlines()) == 1, err
    assert compare_command([str(r) for r in runs]) == 2  # the function refuses as the command does
    assert "got 3" in capsys.readouterr().err
