"""No verdict without its evidence: a winner is named only when the paired test separates
the two after Holm, in the same words in the terminal, summary.json, the report, the MLflow
tags and ``bcas compare``; otherwise "not separable at n = K" with the items 80% power needs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scipy.stats import binomtest

from bcas.cli import main as bcas_main
from bcas.report.verdict import paired_verdict
from bcas.stats import mcnemar_items_for_power
from bcas.testing.project import budget_grid, codename_items, grid_project, preload
from bcas.tracking.folder import read_run_folder

preload()

pytest_plugins = ["pytester"]

RUN = ["--bcas-grid", "verdicts", "--bcas-model", "mock:gold", "--bcas-model", "mock:random", "-p", "no:cacheprovider"]
WINNER_WORDS = re.compile(r"\bbest\b|∞|ahead of|\bwinner\b|\bwins\b", re.IGNORECASE)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    conftest = budget_grid("verdicts", [pytester.path / "items.jsonl"], searches=(1,))
    grid_project(pytester.path, conftest, datasets={"items.jsonl": codename_items(40)})
    return pytester


def _run(project: pytest.Pytester, limit: int) -> tuple[str, Path]:
    run_dir = project.path / f"run{limit}"
    result = project.runpytest(*RUN, "--bcas-limit", str(limit), "--bcas-report", str(run_dir))
    result.assert_outcomes(passed=2)
    return result.stdout.str(), run_dir


def test_two_items_name_no_winner_anywhere_and_forty_name_it_with_its_holm_p(project: pytest.Pytester) -> None:
    out, run_dir = _run(project, 2)
    summary = (run_dir / "summary.json").read_text(encoding="utf-8")
    page = (run_dir / "index.html").read_text(encoding="utf-8")
    (comparison,) = json.loads(summary)["model_comparisons"]
    verdict = comparison["verdict"]
    assert re.match(
        r"mock-gold vs mock-random: not separable at n = 2 \(Holm p = [0-9.]+, alpha 0.05\); about \d+", verdict
    )
    assert comparison["items_needed"] > 2
    for where, text in (("terminal", out), ("summary.json", summary), ("report", page)):
        assert verdict in text, where  # the same words everywhere
        assert not WINNER_WORDS.search(text), (where, WINNER_WORDS.search(text))
    # The cost panel's points carry their paired verdict against the highest observed accuracy.
    top = "mock-gold · bm25/s1/t2k"
    assert (
        f'data-verdict="against the highest observed accuracy ({top}): mock-random · bm25/s1/t2k vs {top}: not separable at n = 2'
        in page
    )
    tags = {c.name: c.tags for c in read_run_folder(run_dir).cases}
    assert {t.get("bcas.verdict.models") for t in tags.values()} == {verdict}  # MLflow's tags, the same words

    out, run_dir = _run(project, 40)
    (comparison,) = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["model_comparisons"]
    holm = re.escape(f"{comparison['p_holm']:.3g}")
    assert re.fullmatch(
        rf"mock-gold ahead of mock-random: separated at alpha 0\.05 \(Holm p = {holm}, .*\)", comparison["verdict"]
    )
    assert comparison["verdict"] in out
    page = (run_dir / "index.html").read_text(encoding="utf-8")
    assert comparison["verdict"] in page
    assert f'data-verdict="against the highest observed accuracy ({top}): {top} ahead of mock-random' in page


def test_bcas_compare_names_the_run_ahead_only_when_separated(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {}
    for model in ("gold", "random"):
        for limit in (2, 40):
            run_dir = project.path / f"{model}{limit}"
            args = ["--bcas-grid", "verdicts", "--bcas-model", f"mock:{model}", "--bcas-limit", str(limit)]
            project.runpytest(*args, "--bcas-report", str(run_dir), "-p", "no:cacheprovider").assert_outcomes(passed=1)
            runs[(model, limit)] = run_dir
    assert bcas_main(["compare", str(runs[("random", 2)]), str(runs[("gold", 2)])]) == 0
    out = capsys.readouterr().out
    assert "not separable at n = 2" in out and not WINNER_WORDS.search(out)
    page = project.path / "cmp.html"
    assert bcas_main(["compare", str(runs[("random", 40)]), str(runs[("gold", 40)]), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    found = re.search(
        r"run B \(mock-gold\) ahead of run A \(mock-random\): separated at alpha 0\.05 \(Holm p = \S+", out
    )
    assert found, out
    assert found.group(0) in page.read_text(encoding="utf-8")


def _scipy_holm_single(b: int, c: int) -> float:
    """An independent two-sided exact McNemar p-value (scipy's binomial test on the discordant items)."""
    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)


@pytest.mark.parametrize("family", [1, 3])
def test_the_wording_boundary_agrees_with_an_independent_scipy_computation(family: int) -> None:
    # All discordant items one way: with k of them the two-sided exact p is 2 * 0.5**k.  Find, with
    # scipy alone, the least k that Holm (the smallest p of a family of `family`, times `family`) separates.
    alpha = 0.05
    k_sep = next(k for k in range(1, 40) if min(1.0, family * _scipy_holm_single(k, 0)) <= alpha)
    for k, separated in ((k_sep - 1, False), (k_sep, True)):
        p_holm = min(1.0, family * _scipy_holm_single(k, 0))
        found = paired_verdict("x", "y", k, 0, 20, p_holm, alpha, family)
        assert found.separated is separated
        assert (found.winner == "x") is separated
        assert ("ahead of" in found.text) is separated
        assert ("not separable at n = 20" in found.text) is (not separated)
    # Just above alpha is not separated however lopsided the items; exactly alpha is.
    assert not paired_verdict("x", "y", 10, 0, 20, alpha + 1e-12, alpha, family).separated
    assert paired_verdict("x", "y", 10, 0, 20, alpha, alpha, family).separated


def _scipy_power(n: int, p_first: float, p_second: float, threshold: float) -> float:
    """Exact power of the one-sided exact McNemar test, by enumerating every table with scipy."""
    from scipy.stats import multinomial

    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if b + c and binomtest(c, b + c, 0.5, alternative="less").pvalue <= threshold:
                total += multinomial.pmf([b, c, n - b - c], n, [p_first, p_second, 1 - p_first - p_second])
    return float(total)


@pytest.mark.parametrize(
    ("first_only", "second_only", "n", "family", "smallest"),
    [(3, 1, 8, 1, 0.05), (2, 0, 2, 1, 0.05), (0, 0, 4, 2, 0.3)],
)
def test_items_needed_reach_80_percent_power_and_one_fewer_does_not(
    first_only: int, second_only: int, n: int, family: int, smallest: float
) -> None:
    found = paired_verdict("x", "y", first_only, second_only, n, 1.0, 0.05, family, smallest)
    assert not found.separated and found.n_needed is not None
    assert f"about {found.n_needed:,} paired items would detect" in found.text
    lag = min(first_only, second_only) / n
    p_first = lag + found.difference
    threshold = 0.05 / (2 * family)
    assert _scipy_power(found.n_needed, p_first, lag, threshold) >= 0.8
    assert _scipy_power(found.n_needed - 1, p_first, lag, threshold) < 0.8
    assert mcnemar_items_for_power(p_first, lag, threshold) == found.n_needed
