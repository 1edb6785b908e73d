"""The paired bootstrap over items (non-binary metrics) against a brute-force computation, and
``bcas compare --metric f1|cost_usd|evidence_recall`` on hand-made runs."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.cli import main as bcas_main
from bcas.records import Record, ResultStore
from bcas.report.compare import compare_runs, load_run
from bcas.report.paired import paired_bootstrap

values = st.floats(-5, 5, allow_nan=False, allow_infinity=False, width=32)


def brute(candidate: dict[str, float], reference: dict[str, float], alpha: float, r: int, seed: int) -> tuple:
    """The definition, one resample at a time with plain Python sums."""
    items = sorted(set(candidate) & set(reference))
    d = [candidate[i] - reference[i] for i in items]
    n = len(d)
    draws = np.random.default_rng(seed).integers(0, n, size=(r, n))
    means = sorted(sum(d[int(j)] for j in row) / n for row in draws)
    mean = sum(d) / n
    lo = means[math.floor(alpha / 2 * (r - 1))]
    hi = means[math.ceil((1 - alpha / 2) * (r - 1))]
    p = min(1.0, (1 + sum(1 for m in means if abs(m - mean) >= abs(mean) - 1e-12)) / (r + 1))
    return mean, lo, hi, p


@settings(max_examples=40, deadline=None)
@given(
    pairs=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3), st.tuples(values, values), min_size=1, max_size=12
    ),
    extra=st.dictionaries(st.text("xyz", min_size=1, max_size=2), values, max_size=3),
    alpha=st.sampled_from([0.05, 0.1, 0.2]),
    seed=st.integers(0, 2**16),
)
def test_paired_bootstrap_equals_brute_force(
    pairs: dict[str, tuple[float, float]], extra: dict[str, float], alpha: float, seed: int
) -> None:
    candidate = {k: a for k, (a, _) in pairs.items()} | extra  # items in one map only are left out
    reference = {k: b for k, (_, b) in pairs.items()}
    got = paired_bootstrap(candidate, reference, alpha=alpha, n_resamples=200, seed=seed)
    mean, lo, hi, p = brute(candidate, reference, alpha, 200, seed)
    assert got.n_paired == len(pairs) and got.test == "paired-bootstrap"
    assert got.diff == pytest.approx(mean, abs=1e-9)
    assert (got.ci_lo, got.ci_hi) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))
    assert got.p_value == pytest.approx(p)
    assert got.b == sum(1 for a, b in pairs.values() if a - b > 0) and got.c == sum(
        1 for a, b in pairs.values() if a < b
    )
    # item-id order: the same maps built in another order give the same result
    keys = list(pairs)
    random.Random(seed).shuffle(keys)
    again = paired_bootstrap(
        {k: candidate[k] for k in keys}, {k: reference[k] for k in reversed(keys)}, alpha, 200, seed
    )
    assert (again.diff, again.ci_lo, again.ci_hi, again.p_value) == (got.diff, got.ci_lo, got.ci_hi, got.p_value)


def test_paired_bootstrap_edges() -> None:
    assert paired_bootstrap({}, {"a": 1.0}).n_paired == 0
    same = paired_bootstrap({"a": 0.5, "b": 0.2}, {"a": 0.5, "b": 0.2})
    assert (same.diff, same.ci_lo, same.ci_hi, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    shifted = paired_bootstrap({str(i): 1.0 + i % 3 for i in range(30)}, {str(i): float(i % 3) for i in range(30)})
    assert shifted.diff == pytest.approx(1.0) and shifted.ci_lo == pytest.approx(1.0) and shifted.p_value < 0.01
    with pytest.raises(ValueError, match="alpha"):
        paired_bootstrap({"a": 1.0}, {"a": 0.0}, alpha=1.5)


# -- compare on value metrics --------------------------------------------------------------


def _rec(item: int, f1: float, cost: float | None, recall: float | None) -> Record:
    return Record(
        run_id="r", config_id="cfg", model="m", dataset="hotpotqa", item_id=f"q{item}", question=f"q {item}?",
        answers=["alpha"], prediction="alpha beta", correct_em=False, f1=f1, label="bm25/s1/t2k",
        model_fingerprint="gguf:sha256:aaaa", dataset_hash="d" * 64, prompt_hash="p" * 16, cost_usd=cost,
        extra={} if recall is None else {"evidence_recall": recall},
    )  # fmt: skip


F1_A = [0.5, 0.0, 1.0, 0.2, 0.4, 0.6]
F1_B = [0.7, 0.1, 1.0, 0.0, 0.9, 0.6]
RECALL_A = [0.5, 1.0, None, 0.0, 0.5, 1.0]  # q2 has no gold
RECALL_B = [1.0, 1.0, None, 0.5, 0.5, 0.0]


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    ResultStore(a).extend([_rec(i, f, 0.001 * (i + 1), r) for i, (f, r) in enumerate(zip(F1_A, RECALL_A, strict=True))])
    ResultStore(b).extend([_rec(i, f, 0.002 * (i + 1), r) for i, (f, r) in enumerate(zip(F1_B, RECALL_B, strict=True))])
    return a, b


def test_compare_on_f1_evidence_recall_and_cost_uses_the_paired_bootstrap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _runs(tmp_path)
    run_a, run_b = load_run(a), load_run(b)
    (f1,), _ = compare_runs(run_a, run_b, "f1")
    want = paired_bootstrap({f"q{i}": x for i, x in enumerate(F1_B)}, {f"q{i}": x for i, x in enumerate(F1_A)})
    assert (f1.diff, f1.ci_lo, f1.ci_hi, f1.p_value) == (want.diff, want.ci_lo, want.ci_hi, want.p_value)
    assert f1.acc_a == pytest.approx(sum(F1_A) / 6) and f1.acc_b == pytest.approx(sum(F1_B) / 6)
    assert f1.a_only == ["q3"] and f1.b_only == ["q0", "q1", "q4"] and not f1.binary and f1.share
    (recall,), _ = compare_runs(run_a, run_b, "evidence_recall")
    assert recall.n == 5 and any("1 not measured" in n for n in recall.notes)  # q2 has no gold: left out
    (cost,), _ = compare_runs(run_a, run_b, "cost_usd")
    assert cost.diff == pytest.approx(0.0035) and not cost.share and cost.ci_lo > 0
    html = tmp_path / "cmp.html"
    assert bcas_main(["compare", str(a), str(b), "--metric", "cost_usd", "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "A >" in out and "+0.0035" in out
    assert "no flipped items" in out  # value metrics list no flips
    page = html.read_text()
    assert "Paired comparison (cost_usd)" in page and "paired bootstrap" in page and "<script" not in page
