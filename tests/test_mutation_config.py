"""The mutation-testing table (``[tool.bcas-mutation]`` in pyproject.toml) and its CI sample.

What a user would lose if these broke: a renamed module or test file makes a group mutate
nothing or run no test, and the CI stage passes without checking anything; a sample that
does not follow the seed checks the same mutants on every commit, or cannot be
reproduced from a CI log.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import tomllib
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
TABLE = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["bcas-mutation"]
# The trust core as issue 34 names it: each area must be some group's.
TRUST_CORE = {
    "identity": "bcas/identity.py",
    "records": "bcas/records/store.py",
    "run session and resume": "bcas/run/session.py",
    "gating": "bcas/gating/case.py",
    "stats": "bcas/stats.py",
    "metrics": "bcas/metrics/values.py",
    "grading": "bcas/grading/metrics.py",
    "agent budget": "bcas/agent/budget.py",
    "agent protocol": "bcas/agent/protocol.py",
    "report rendering": "bcas/report/html.py",
    "shards": "bcas/shard.py",
    "merge": "bcas/harness/merge.py",
}


def _driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bcas_ci_mutation", REPO / ".ci" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_group_mutates_existing_modules_and_runs_existing_tests() -> None:
    for name, group in TABLE["groups"].items():
        for pattern in group["modules"]:
            assert list(REPO.glob(pattern)), f"group {name}: {pattern} matches no module"
        for test in group["tests"]:
            path, _, node = test.partition("::")  # a file, or one test of it
            assert (REPO / path).is_file(), f"group {name}: {path} does not exist"
            assert not node or f"def {node}(" in (REPO / path).read_text(), f"group {name}: {test} does not exist"
        assert group["tests"], f"group {name} runs no test"


def test_every_trust_core_area_is_mutated() -> None:
    covered = {str(p.relative_to(REPO)) for g in TABLE["groups"].values() for m in g["modules"] for p in REPO.glob(m)}
    missing = {area: path for area, path in TRUST_CORE.items() if path not in covered}
    assert not missing, f"trust-core modules in no mutation group: {missing}"


def test_every_equivalent_mutant_says_why() -> None:
    for name, reason in TABLE.get("equivalent", {}).items():
        assert name.startswith("bcas.") and "__mutmut_" in name, name
        assert isinstance(reason, str) and len(reason.split()) >= 4, f"{name}: give the reason it is equivalent"


def test_the_sample_follows_the_seed() -> None:
    driver = _driver()
    groups, _ = driver.load_table()

    def draw(seed: str) -> list[tuple[str, int]]:
        return [(g.name, k) for g, k in driver.draw_groups(groups, random.Random(seed), 40, 3)]

    assert draw("a1b2c3") == draw("a1b2c3")  # a CI log's seed reproduces its sample
    drawn = {tuple(draw(f"{n:040x}")) for n in range(20)}
    assert len(drawn) > 10  # other commits, other groups
    for plan in drawn:
        assert sum(k for _, k in plan) == 40 and len({g for g, _ in plan}) == 3


def test_rows_kept_from_the_docs_table_carry_the_counts_and_date_of_their_own_run() -> None:
    """A rerun of one group must not drop the others' scores, nor date them as if rerun."""
    driver = _driver()
    groups = {g.name: g for g in driver.load_table()[0]}
    counts = {"total": 40, "killed": 20, "timeout": 2, "survived": 3, "no_tests": 1, "suspicious": 0}
    counts |= {"segfault": 0, "skipped": 0}
    written = driver.render([driver.Row(groups["stats"], counts, 2, 1.0, "2026-11-30")], ["identity"])
    (row,) = driver.documented_rows(written, groups)
    assert (row.group.name, row.date, row.equivalent, row.checked, row.caught) == ("stats", "2026-11-30", 2, 26, 22)
    assert row.counts == counts
    # written again, it says what it said: 22 caught of 26 checked less 2 equivalent, run on its own date
    assert "| 91.7% | 2026-11-30 |" in written and "| 91.7% | 2026-11-30 |" in driver.render([row], [])
    # the former table had no date column: its rows take the heading's date
    old = (
        "mutmut 3.8.1, `python .ci/mutation.py score`, 2026-12-01, load 0.5 when written, 2 cores:\n\n"
        "| identity | `bcas/identity.py` | 283 | 169 | 156 | 1 | 12 | 0 | 0 | 9 | 98.1% |\n"
        "| **all checked** | | 283 | 169 | | | | | | | **98.1%** |\n"
    )
    (legacy,) = driver.documented_rows(old, groups)
    assert (legacy.date, legacy.checked, legacy.caught, legacy.scored) == ("2026-12-01", 169, 157, 160)
    # a row whose counts do not add up is refused, not scored
    broken = old.replace("| 169 | 156 |", "| 170 | 156 |")
    try:
        driver.documented_rows(broken, groups)
    except SystemExit as exc:
        assert "identity" in str(exc) and "170" in str(exc)
    else:
        raise AssertionError("a row whose counts do not add up was read")


def test_the_baseline_holds_the_sample_to_what_the_score_found_caught() -> None:
    """A mutant the full score found caught and that survives now must fail CI; one in a
    function changed since, one the score saw survive, or an equivalent one must not."""
    driver = _driver()
    assert driver.ranges([7, 1, 2, 3, 9, 10]) == "1-3,7,9-10" and driver.ranges([]) == ""
    assert driver.numbers("1-3,7,9-10") == {1, 2, 3, 7, 9, 10} and driver.numbers("") == set()
    status = {
        "bcas.m.x_f__mutmut_1": "killed",
        "bcas.m.x_f__mutmut_2": "timeout",
        "bcas.m.x_f__mutmut_3": "survived",
        "bcas.m.x_f__mutmut_4": "not checked",
        "bcas.m.x_f__mutmut_5": "no tests",
        "bcas.m.x_f__mutmut_6": "killed",  # reviewed equivalent: never held to anything
        "bcas.m.xǁCǁg__mutmut_12": "segfault",
    }
    hashes = {"bcas.m.x_f": "aaa", "bcas.m.xǁCǁg": "bbb"}
    entry = driver.baseline_entry(status, hashes, {"bcas.m.x_f__mutmut_6": "why"})
    assert entry == {
        "bcas.m.x_f": {"hash": "aaa", "caught": "1-2", "survived": "3,5"},
        "bcas.m.xǁCǁg": {"hash": "bbb", "caught": "12", "survived": ""},
    }
    names = sorted([*status, "bcas.m.x_f__mutmut_7", "bcas.m.new__mutmut_1"])
    stand = driver.standing(names, hashes, entry)
    assert stand == {
        "bcas.m.x_f__mutmut_1": "caught", "bcas.m.x_f__mutmut_2": "caught", "bcas.m.x_f__mutmut_3": "survived",
        "bcas.m.x_f__mutmut_4": "unscored", "bcas.m.x_f__mutmut_5": "survived", "bcas.m.x_f__mutmut_6": "unscored",
        "bcas.m.x_f__mutmut_7": "unscored", "bcas.m.xǁCǁg__mutmut_12": "caught", "bcas.m.new__mutmut_1": "changed",
    }  # fmt: skip
    # g's source changed since the score: its mutants may be other mutants now
    assert driver.standing(names, {**hashes, "bcas.m.xǁCǁg": "ccc"}, entry)["bcas.m.xǁCǁg__mutmut_12"] == "changed"
    # Only a survivor the baseline found caught fails the sample; a survivor of a changed
    # function, one the score did not reach or one it saw survive is reported.
    now = {name: "survived" for name in names} | {"bcas.m.x_f__mutmut_2": "killed"}
    assert driver.failing(now, stand) == ["bcas.m.x_f__mutmut_1", "bcas.m.xǁCǁg__mutmut_12"]
    assert driver.failing({"bcas.m.x_f__mutmut_1": "timeout", "bcas.m.new__mutmut_1": "no tests"}, stand) == []
    # The exit status: a regression fails; strict also fails a sample that held nothing to the baseline.
    fresh = {"bcas.m.new__mutmut_1": "survived", "bcas.m.x_f__mutmut_4": "survived"}
    for strict in (False, True):
        assert driver.exit_status(now, stand, strict) == 1
        assert driver.exit_status({}, stand, strict) == 2
        assert driver.exit_status({**fresh, "bcas.m.x_f__mutmut_1": "killed"}, stand, strict) == 0
    assert driver.exit_status(fresh, stand, strict=False) == 0
    assert driver.exit_status(fresh, stand, strict=True) == 1


def test_the_committed_baseline_matches_the_table_and_todays_sources() -> None:
    """Every baselined group is a group of the table, and every function it holds is named
    as mutmut names a function of that group's modules (a stale entry guards nothing)."""
    driver = _driver()
    groups = {g.name: g for g in driver.load_table()[0]}
    baseline = driver.read_baseline()
    for name, entry in baseline.items():
        assert name in groups, f"baseline group {name} is not in the table"
        modules = {
            str(path.relative_to(REPO)).removesuffix(".py").replace("/", ".")
            for pattern in groups[name].modules
            for path in REPO.glob(pattern)
        }
        for function, known in entry["functions"].items():
            assert function.rpartition(".")[0] in modules, f"{name}: {function} is outside the group's modules"
            assert known["caught"] or known["survived"]


def test_only_equivalents_that_were_checked_and_survived_are_left_out_of_the_score() -> None:
    """An equivalent mutmut never reached was never counted: leaving it out of the checked
    ones anyway would lift the score, past 100% where enough of them are listed."""
    driver = _driver()
    status = {
        "a__mutmut_1": "survived",
        "a__mutmut_2": "not checked",
        "a__mutmut_3": "killed",
        "a__mutmut_4": "no tests",
    }
    equivalent = {name: "reason" for name in status}
    assert driver.equivalent_survivors(status, equivalent) == ["a__mutmut_1", "a__mutmut_4"]
    groups = {g.name: g for g in driver.load_table()[0]}
    counts = {"total": 10, "killed": 3, "timeout": 0, "survived": 2, "no_tests": 0, "suspicious": 0}
    counts |= {"segfault": 0, "skipped": 0}
    text = driver.render([driver.Row(groups["stats"], counts, 1, 1.0)], [])
    assert "| **75.0%** |" in text  # 3 caught of 5 checked less 1 equivalent
    assert "60.0% of the 5 checked" in text  # the equivalent counted against


def test_a_kept_scratch_folder_is_refreshed_and_keeps_mutmuts_verdicts(tmp_path: Path) -> None:
    """``score --root DIR`` goes on where an earlier run stopped: the group's copy gets
    today's sources and tests, and mutmut's folder (its verdicts, keyed by each function's
    source hash) is left for mutmut to reuse.  Lost, a resumed score would start over; not
    refreshed, it would score yesterday's tests."""
    driver = _driver()
    group = driver.Group("identity", ["bcas/identity.py"], ["tests/foundations/test_identity.py"])
    verdicts = tmp_path / "identity" / "mutants" / "bcas" / "identity.py.meta"
    verdicts.parent.mkdir(parents=True)
    verdicts.write_text('{"exit_code_by_key": {"bcas.identity.x__mutmut_1": 1}}')
    stale = tmp_path / "identity" / "bcas" / "identity.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("# an older copy\n")
    cwd = driver.scratch_copy(group, tmp_path)
    assert cwd == tmp_path / "identity"
    assert verdicts.read_text() == '{"exit_code_by_key": {"bcas.identity.x__mutmut_1": 1}}'
    assert stale.read_text() == (REPO / "bcas" / "identity.py").read_text()
    config = tomllib.loads((cwd / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert config["only_mutate"] == ["bcas/identity.py"]
    assert config["pytest_add_cli_args_test_selection"] == ["tests/foundations/test_identity.py"]


def test_a_kept_folder_checks_its_survivors_again_with_todays_tests(tmp_path: Path) -> None:
    """mutmut keeps a verdict while the function is unchanged, however many tests were added
    since; a score that went on in a kept folder would report yesterday's survivors.  Every
    mutant not caught is cleared for mutmut to check again; caught and skipped ones keep
    their verdict, and a mutant not checked yet stays unchecked."""
    driver = _driver()
    meta = tmp_path / "mutants" / "bcas" / "m.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {"survived": 0, "killed": 1, "timeout": 36, "no_tests": 33, "suspicious": 35, "skipped": 34,
             "unchecked": None, "segfault": -11, "interrupted": 2}  # fmt: skip
    meta.write_text(json.dumps({"exit_code_by_key": {f"bcas.m.x_f__mutmut_{k}": c for k, c in codes.items()}}))
    assert driver.recheck_survivors(tmp_path) == 4
    after = json.loads(meta.read_text())["exit_code_by_key"]
    assert {k.split("__mutmut_")[1] for k, c in after.items() if c is None} == {
        "survived", "no_tests", "suspicious", "unchecked", "interrupted"}  # fmt: skip
    assert after["bcas.m.x_f__mutmut_killed"] == 1 and after["bcas.m.x_f__mutmut_timeout"] == 36
    assert after["bcas.m.x_f__mutmut_skipped"] == 34 and after["bcas.m.x_f__mutmut_segfault"] == -11


def test_each_mutant_runs_in_a_child_of_a_process_that_ran_no_test():
    """mutmut's default forks each mutant's run from the process whose tests mapped the functions;
    tests there that ran torch or faiss left an OpenMP thread pool whose lock a forked child waits
    on forever, and mutmut counts that hang as caught (a session group measured that way had 114
    of 275 mutants "caught" by hanging, many of them survivors).  The fork server forks from a
    process that only collected the tests."""
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert settings["process_isolation"] == "forkserver"
    assert settings.get("forkserver_warmup", "collect") == "collect"  # collection imports, runs nothing
