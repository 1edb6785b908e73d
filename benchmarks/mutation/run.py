"""A small mutation check: break one line at a time and see whether the tests named for it notice.

    python benchmarks/mutation/run.py            # every breakage
    python benchmarks/mutation/run.py -k gate    # the breakages whose name contains "gate"

The working tree (tracked and untracked, not ignored files) is copied once to a temporary
folder; each breakage replaces one line there (its text must occur exactly once), runs
only the tests named for it (``python -m pytest``, the copy first on ``PYTHONPATH``),
and restores the line.  A breakage is **caught** when those tests fail, also when they
hang past the per-test timeout (pytest-timeout) or the run's wall-clock limit (a hang
counts as caught only because the suite turns it into a failure); **survived** when they
pass.  Before the breakages the same tests run on the unbroken copy: a selection that
fails there is reported, not counted.  Nothing here runs by default (not collected:
``testpaths`` is ``tests``); docs/measured.md ("Reliability") holds its last result.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PER_TEST_TIMEOUT_S = 240
RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class Breakage:
    name: str
    what: str  # what a user would lose
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


GATE_BOUNDARY = "tests/harness/test_gate_plugin.py::test_the_gate_decides_p_equal_to_alpha_as_significant_in_place_and_in_holm_step_down"
RESUME = "tests/harness/test_resume_identity.py"
DEPLOYMENT = "tests/report/test_identity_groups.py::test_a_changed_deployment_behind_one_name_is_answered_again_and_reported_apart"

BREAKAGES = (
    # -- the seven breakages no test noticed (issue: breakages no test notices) ----------------
    Breakage(
        "report-groups-by-short-name",
        "two models' answers pooled as one model",
        "bcas/report/membership.py",
        'model = names[(str(rec.get("model", "")), str(rec.get("model_fingerprint") or ""))]',
        "model = f\"{rec.get('model', '')} [{short(str(rec.get('model_fingerprint') or ''))}]\"",
        (DEPLOYMENT, "tests/report/test_identity_groups.py"),
    ),
    Breakage(
        "resume-ignores-prompt-hash",
        "answers from an older prompt reused as current",
        "bcas/run/session.py",
        "todo = [(it, e) for it, e in wanted if (fingerprint, config_id, ds.hash, it.id, phash, e) not in done]",
        "todo = [(it, e) for it, e in wanted if (fingerprint, config_id, ds.hash, it.id, e) not in "
        "{(k[0], k[1], k[2], k[3], k[5]) for k in done}]",
        (f"{RESUME}::test_answers_of_an_older_prompt_are_answered_again",),
    ),
    Breakage(
        "resume-never-retries-errors",
        "a transient failure stays an error forever",
        "bcas/run/session.py",
        "done = self.store.done_keys(include_errors=False)",
        "done = self.store.done_keys(include_errors=True)",
        (f"{RESUME}::test_an_error_record_is_retried_by_the_rerun",),
    ),
    Breakage(
        "served-fingerprint-drops-system-fingerprint",
        "a changed deployment behind the same name is not noticed",
        "bcas/identity.py",
        'return f"served:{served_id}" + (f"#{system_fingerprint}" if system_fingerprint else "")',
        'return f"served:{served_id}"',
        (DEPLOYMENT,),
    ),
    Breakage(
        "gate-fails-at-p-below-alpha-only",
        "a case at p == alpha / m passes silently",
        "bcas/harness/gate.py",
        "        p <= threshold,\n",
        "        p < threshold,\n",
        (GATE_BOUNDARY,),
    ),
    Breakage(
        "gate-fails-above-alpha",
        "a case just above alpha / m fails",
        "bcas/harness/gate.py",
        "        p <= threshold,\n",
        "        p <= threshold * (1 + 1e-9),\n",
        (GATE_BOUNDARY,),
    ),
    Breakage(
        "holm-strict",
        "Holm's step-down keeps a case whose adjusted p equals alpha",
        "bcas/stats.py",
        "reject = [adj <= alpha for adj in adjusted]",
        "reject = [adj < alpha for adj in adjusted]",
        (GATE_BOUNDARY,),
    ),
    Breakage(
        "cost-cap-reserves-nothing",
        "concurrent items overshoot --bcas-max-cost",
        "bcas/run/cost.py",
        'state["reserved"][key] = expected or 0.0',
        'state["reserved"][key] = 0.0',
        ("tests/report/test_cost.py::test_max_cost_reserves_what_items_in_flight_will_cost",),
    ),
    # -- caught only by luck before (a random property) or by hanging ---------------------------
    Breakage(
        "turn-requests-whole-budget",
        "a turn may spend the whole remaining budget despite the per-turn cap",
        "bcas/agent/budget.py",
        "return left if cap is None else min(cap, left)",
        "return left",
        ("tests/agent/test_loop.py::test_loop_invariants_for_any_budget_and_script",),
    ),
    Breakage(
        "f1-over-distinct-tokens",
        "repeated answer tokens scored as one",
        "bcas/grading/metrics.py",
        "common = Counter(pred_tokens) & Counter(gold_tokens)",
        "common = Counter(set(pred_tokens)) & Counter(set(gold_tokens))",
        ("tests/grading/test_grading.py::test_token_f1_examples",),
    ),
    Breakage(
        "mcnemar-direction-flipped",
        "the gate tests a candidate being better, not worse (used to hang the gate tests)",
        "bcas/stats.py",
        "return float(min(1.0, binom.cdf(first_only, first_only + second_only, 0.5)))",
        "return float(min(1.0, binom.sf(first_only - 1, first_only + second_only, 0.5)))",
        ("tests/foundations/test_gate_stats.py", "tests/harness/test_gate.py"),
    ),
    # -- already caught before (kept so they stay caught) ----------------------------------------
    Breakage(
        "search-cap-off-by-one",
        "one search more than max_searches",
        "bcas/agent/budget.py",
        "return left is None or left > 0",
        "return left is None or left >= 0",
        ("tests/agent/test_budget.py", "tests/agent/test_loop.py"),
    ),
    Breakage(
        "wilson-centre",
        "a wrong accuracy interval",
        "bcas/stats.py",
        "centre = (p + z2 / (2.0 * n)) / denom",
        "centre = p",
        ("tests/foundations/test_stats.py",),
    ),
    Breakage(
        "holm-is-bonferroni",
        "Holm's step-down replaced by Bonferroni",
        "bcas/stats.py",
        "running = max(running, min(1.0, (m - rank) * p[idx]))",
        "running = max(running, min(1.0, m * p[idx]))",
        ("tests/foundations/test_stats.py",),
    ),
    Breakage(
        "em-keeps-articles",
        "SQuAD EM no longer drops articles",
        "bcas/grading/metrics.py",
        'return " ".join(tok for tok in no_punct.split() if tok not in ARTICLES)',
        'return " ".join(no_punct.split())',
        ("tests/grading/test_grading.py",),
    ),
    Breakage(
        "html-model-name-unescaped",
        "a model name renders as HTML in the report",
        "bcas/report/html_items.py",
        'f\'<th title="{escape(", ".join(c["grids"]))}">{escape(c["model"])} · {escape(c["label"])}</th>\' for c in cols',
        'f\'<th title="{escape(", ".join(c["grids"]))}">{c["model"]} · {escape(c["label"])}</th>\' for c in cols',
        ("tests/proofs/test_hostile.py", "tests/report/test_html.py"),
    ),
)


def copy_tree(dest: Path) -> None:
    """The working tree's files (tracked and untracked, not ignored) into ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        src = REPO / name
        if src.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def run_tests(tree: Path, tests: tuple[str, ...], cache: Path) -> tuple[str, float, str]:
    """('passed' | 'failed' | 'timeout' | 'error', seconds, last lines) of the tests on ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "BCAS_CACHE_DIR": str(cache)}
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider",
               "-o", f"timeout={PER_TEST_TIMEOUT_S}"]  # fmt: skip
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - started, f"no result within {RUN_TIMEOUT_S} s"
    took = time.perf_counter() - started
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
    if done.returncode == 0:
        return "passed", took, tail
    if "Timeout" in done.stdout and "+++++" in done.stdout:
        return "timeout", took, tail
    return ("failed" if done.returncode == 1 else "error"), took, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the breakages whose name contains this")
    args = parser.parse_args(argv)
    chosen = [b for b in BREAKAGES if args.k in b.name]
    with tempfile.TemporaryDirectory(prefix="bcas-mutation-") as tmp:
        tree, cache = Path(tmp) / "tree", Path(tmp) / "cache"
        copy_tree(tree)
        for selection in sorted({b.tests for b in chosen}):
            outcome, took, tail = run_tests(tree, selection, cache)
            if outcome != "passed":
                print(f"unbroken tree: {' '.join(selection)} {outcome} ({took:.0f} s): {tail}")
                return 2
        results = []
        for b in chosen:
            path = tree / b.path
            original = path.read_text(encoding="utf-8")
            if original.count(b.old) != 1:
                results.append((b, "not applied", 0.0, f"the line occurs {original.count(b.old)} times in {b.path}"))
                continue
            path.write_text(original.replace(b.old, b.new), encoding="utf-8")
            try:
                outcome, took, tail = run_tests(tree, b.tests, cache)
            finally:
                path.write_text(original, encoding="utf-8")
            verdict = {"failed": "caught", "timeout": "caught (timeout)", "passed": "SURVIVED"}.get(outcome, "error")
            results.append((b, verdict, took, tail))
            print(f"{verdict:<17} {took:6.0f} s  {b.name}", flush=True)
    print()
    print(f"{'breakage':<45}{'verdict':<18}{'s':>6}  what a user would lose")
    for b, verdict, took, _ in results:
        print(f"{b.name:<45}{verdict:<18}{took:>6.0f}  {b.what}")
    caught = sum(1 for _, v, _, _ in results if v.startswith("caught"))
    survived = [b.name for b, v, _, _ in results if v == "SURVIVED"]
    other = [f"{b.name}: {v} ({tail})" for b, v, _, tail in results if not v.startswith("caught") and v != "SURVIVED"]
    print(f"\n{caught} caught, {len(survived)} survived, {len(other)} not run, of {len(results)}")
    for line in other:
        print(f"  {line}")
    return 0 if not survived and not other else 1


if __name__ == "__main__":
    raise SystemExit(main())
