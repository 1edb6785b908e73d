"""Mutation testing of the trust core with mutmut 3 (``pip install 'mutmut==3.8.*'``).

    python .ci/mutation.py sample --seed <hex> [--count 40] [--limit-s 600]
    python .ci/mutation.py score [--groups identity,stats] [--limit-s 3600] [--root DIR] [--write-docs] [--keep-rows]

The groups (modules paired with the tests near them) and the reviewed equivalent
mutants are in ``pyproject.toml`` under ``[tool.bcas-mutation]``.  Each group runs in its
own scratch copy of the working tree (mutmut writes ``mutants/`` beside the sources), whose
``[tool.mutmut]`` is narrowed to that group: ``only_mutate`` its modules, the test
selection its tests.  mutmut then runs, per mutant, only those tests that executed the
mutated function.

``sample`` (CI, ``.ci/mutation.sh``): the seed orders the groups and draws the mutants, so
each commit checks another sample.  The mutants are split over the first groups that fit
(``--groups-per-run``).  Where the baseline (``.ci/mutation-baseline.json``, written by
``score --write-docs``) has a group, its mutants are drawn from those the score found
caught in functions whose source is unchanged since: each one that survives now is a
regression (a test weakened or lost, or code that slipped out from under its tests) and
fails the run.  A group the baseline can hold to nothing (no baseline, or every function
changed since) is drawn from the mutants no score has a verdict on, and a survivor there is
reported with its diff; so is any survivor of a function changed since the score.  Mutants
the score found surviving in unchanged functions are never drawn (known; the score counts
them).  ``--strict`` (CI: ``BCAS_MUTATION_STRICT=1``) also fails a sample that held no
mutant to the baseline: it checked nothing a score vouches for.  It does not fail on the
survivors of changed functions: at a 95% score about one mutant in twenty survives, so a
sample would fail most commits of a wave that changes many functions for reasons none of
them introduced (see ``failing``).  A mutant mutmut reports ``survived``,
``no tests`` or ``suspicious`` is a survivor unless it is listed as equivalent;
``timeout`` counts as caught (a hang is a failure of the tests, as pytest-timeout makes
it).  Exit status: 0 nothing failing, 1 a failing survivor, 2 nothing could be checked
within the time box.

``score``: every mutant of each named group (default: all, in table order, while
``--limit-s`` lasts); mutmut's own counts (``mutmut export-cicd-stats``) per group are
printed and, with ``--write-docs``, written between the markers of docs/measured.md;
``--keep-rows`` keeps the rows of groups this run did not score as the docs' table has
them (mutmut's counts from an earlier run, each row dated by its run).  ``--write-docs``
also writes each scored group's baseline: per mutated function, mutmut's hash of its
source and the numbers of its mutants found caught and surviving.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LIST_ONLY = "bcas.__list_mutants_only__"  # a name no mutant has: mutmut generates, maps tests, then stops
CAUGHT = {"killed", "timeout", "caught by type check", "segfault"}
DOCS = REPO / "docs" / "measured.md"
BEGIN, END = "<!-- mutation-score:begin -->", "<!-- mutation-score:end -->"
BASELINE = REPO / ".ci" / "mutation-baseline.json"
SURVIVED = {"survived", "no tests", "suspicious"}


@dataclass(frozen=True)
class Group:
    name: str
    modules: list[str]
    tests: list[str]


def load_table() -> tuple[list[Group], dict[str, str]]:
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["bcas-mutation"]
    groups = [Group(name, g["modules"], g["tests"]) for name, g in table["groups"].items()]
    return groups, dict(table.get("equivalent", {}))


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [f for f in out.split("\0") if f and (REPO / f).is_file()]


def scratch_copy(group: Group, root: Path) -> Path:
    """A copy of the working tree whose ``[tool.mutmut]`` covers ``group`` alone."""
    dest = root / group.name
    for rel in tracked_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    text = (dest / "pyproject.toml").read_text()
    narrowed = (
        "[tool.mutmut]\n"
        f"only_mutate = {json.dumps(group.modules)}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(group.tests)}\n"
    )
    text, n = re.subn(r"^\[tool\.mutmut\]\n", narrowed, text, count=1, flags=re.M)
    if n != 1:
        raise SystemExit("pyproject.toml has no [tool.mutmut] section")
    (dest / "pyproject.toml").write_text(text)
    return dest


def mutmut(args: list[str], cwd: Path, deadline: float, log: Path) -> int | None:
    """Run mutmut in its own process group; None when the deadline cut it off (the
    whole group is killed, so no forked mutant outlives it)."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mutmut", *args],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


# mutmut's exit codes (mutmut.stats.status_by_exit_code) that keep their verdict when a score
# goes on in a kept folder: caught ones (killed, timeout, type check, segfault) and skipped.
KEPT_EXIT_CODES = {1, 3, 36, 24, -24, 152, 255, 37, -11, -9, 34}


def recheck_survivors(cwd: Path) -> int:
    """Clear the verdict of every mutant a kept folder holds as not caught (survived, no
    tests, suspicious, interrupted), so the tests of today check it again.  mutmut keeps a
    verdict while the function's source is unchanged, whatever tests were added since; a
    caught mutant stays caught (tests only grow; the CI sample checks that they did not
    shrink).  Returns how many were cleared."""
    cleared = 0
    for meta in sorted((cwd / "mutants").rglob("*.meta")):
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        stale = [k for k, code in codes.items() if code is not None and code not in KEPT_EXIT_CODES]
        if stale:
            for key in stale:
                codes[key] = None
            meta.write_text(json.dumps(data, indent=4))
            cleared += len(stale)
    return cleared


def statuses(cwd: Path) -> dict[str, str]:
    """Every mutant's status as ``mutmut results --all true`` prints it."""
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name.startswith("bcas."):
            found[name] = status
    return found


def function_hashes(cwd: Path) -> dict[str, str]:
    """mutmut's hash of each mutated function's source, keyed as its mutants' names start."""
    found = {}
    root = cwd / "mutants"
    for meta in root.rglob("*.py.meta"):
        module = str(meta.relative_to(root))[: -len(".py.meta")].replace("/", ".")
        for function, digest in json.loads(meta.read_text()).get("hash_by_function_name", {}).items():
            found[f"{module}.{function}"] = digest
    return found


def split_name(name: str) -> tuple[str, int]:
    """``bcas.m.x_f__mutmut_7`` -> (``bcas.m.x_f``, 7)."""
    function, _, number = name.rpartition("__mutmut_")
    return function, int(number)


def ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3,7"``."""
    parts: list[str] = []
    for n in sorted(set(numbers)):
        if parts and parts[-1].rpartition("-")[2] == str(n - 1):
            parts[-1] = f"{parts[-1].partition('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ",".join(parts)


def numbers(text: str) -> set[int]:
    """``"1-3,7"`` -> ``{1, 2, 3, 7}``."""
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


def baseline_entry(status: dict[str, str], hashes: dict[str, str], equivalent: dict[str, str]) -> dict[str, object]:
    """A group's baseline: per function, its source hash and its mutants caught and surviving."""
    caught: dict[str, list[int]] = {}
    survived: dict[str, list[int]] = {}
    for name, state in status.items():
        function, number = split_name(name)
        if name in equivalent or function not in hashes:
            continue
        if state in CAUGHT:
            caught.setdefault(function, []).append(number)
        elif state in SURVIVED:
            survived.setdefault(function, []).append(number)
    return {
        f: {"hash": hashes[f], "caught": ranges(caught.get(f, [])), "survived": ranges(survived.get(f, []))}
        for f in sorted(set(caught) | set(survived))
    }


def standing(names: list[str], hashes: dict[str, str], entry: dict[str, dict[str, str]]) -> dict[str, str]:
    """Each mutant's standing against its group's baseline: ``caught`` (the score found it
    caught, in a function unchanged since: one surviving now is a regression), ``survived``
    (found surviving there: known, already counted against the score), ``unscored`` (its
    function is unchanged but the score did not reach it) or ``changed`` (its function is new
    or its source changed since the score: mutmut numbers a function's mutants afresh, so no
    verdict of the score applies to it)."""
    found = {}
    for name in names:
        function, number = split_name(name)
        known = entry.get(function)
        if not known or known["hash"] != hashes.get(function):
            found[name] = "changed"
        elif number in numbers(known["caught"]):
            found[name] = "caught"
        elif number in numbers(known["survived"]):
            found[name] = "survived"
        else:
            found[name] = "unscored"
    return found


def failing(checked: dict[str, str], stand: dict[str, str]) -> list[str]:
    """The checked mutants that fail the sample: those the baseline found caught (in a function
    unchanged since) that survive now.  A survivor of a function changed since the score, or
    one the score did not reach, is printed with its diff but fails nothing: about one mutant
    in twenty of code at a 95% score survives (equivalents among them, whose listed names a
    changed function renumbers), so failing on them would fail most commits of a wave that
    changes many functions for reasons none of them introduced; the full score counts them."""
    return sorted(n for n, s in checked.items() if s not in CAUGHT and stand.get(n) == "caught")


def read_baseline() -> dict[str, Any]:
    return json.loads(BASELINE.read_text())["groups"] if BASELINE.is_file() else {}


def equivalent_survivors(status: dict[str, str], equivalent: dict[str, str]) -> list[str]:
    """The reviewed equivalents that were checked and not caught: left out of the score.
    One mutmut did not reach (``not checked``) was never counted, so it is not left out."""
    return [n for n, s in status.items() if n in equivalent and s in SURVIVED]


def draw_groups(groups: list[Group], rng: random.Random, count: int, per_run: int) -> list[tuple[Group, int]]:
    """The groups a sample visits, in the order drawn, and how many mutants each gets
    (``count`` split as evenly as it goes over ``per_run`` of them)."""
    order = rng.sample(groups, min(per_run, len(groups)))
    return [(g, count // len(order) + (i < count % len(order))) for i, g in enumerate(order)]


def sample(args: argparse.Namespace) -> int:
    groups, equivalent = load_table()
    rng = random.Random(args.seed)
    plan = draw_groups(groups, rng, args.count, args.groups_per_run)
    order = [g for g, _ in plan]
    deadline = time.monotonic() + args.limit_s
    root = Path(tempfile.mkdtemp(prefix="bcas-mutation-"))
    log = root / "mutmut.log"
    print(f"mutation sample: seed {args.seed}, {args.count} mutants over {', '.join(g.name for g in order)}")
    print(f"mutmut output: {log}")
    baseline = read_baseline()
    checked: dict[str, str] = {}
    home: dict[str, Path] = {}
    stands: dict[str, str] = {}  # each listed mutant's standing against its group's baseline
    stale: list[str] = []  # drawn groups the baseline could hold to nothing
    unreached: list[str] = []
    for group, k in plan:
        cwd = scratch_copy(group, root)
        mutmut(["run", "--max-children", str(args.jobs), LIST_ONLY], cwd, deadline, log)
        names = sorted(n for n in statuses(cwd) if n not in equivalent)
        if not names:
            unreached.append(group.name)
            continue
        entry = baseline.get(group.name)
        stand = standing(names, function_hashes(cwd), entry["functions"] if entry else {})
        stands.update(stand)
        pool = [n for n in names if stand[n] == "caught"]
        changed = sum(s == "changed" for s in stand.values())
        if pool:
            print(
                f"  {group.name}: {len(pool)} of {len(names)} mutants found caught by the baseline of "
                f"{entry['date'] if entry else '?'} in unchanged functions ({changed} in functions changed since)"
            )
        else:
            # Nothing to hold to the baseline: draw from what no score has a verdict on, to report.
            pool = [n for n in names if stand[n] in ("changed", "unscored")]
            stale.append(group.name)
            print(
                f"  {group.name}: no baseline mutant in an unchanged function; {len(pool)} drawn from for a report "
                f"(rescore: python .ci/mutation.py score --groups {group.name} --write-docs --keep-rows)"
            )
        chosen = rng.sample(pool, min(k, len(pool)))
        home.update(dict.fromkeys(chosen, cwd))
        rc = mutmut(["run", "--max-children", str(args.jobs), *chosen], cwd, deadline, log)
        result = statuses(cwd)
        done = {n: result[n] for n in chosen if result.get(n, "not checked") != "not checked"}
        checked.update(done)
        if rc is None or len(done) < len(chosen):
            unreached.append(f"{group.name} ({len(chosen) - len(done)} of {len(chosen)} not checked in time)")
    survivors = sorted(n for n, s in checked.items() if s not in CAUGHT)
    caught = len(checked) - len(survivors)
    held = sum(stands.get(n) == "caught" for n in checked)
    print(
        f"mutation sample: {caught} caught, {len(survivors)} not caught, of {len(checked)} checked "
        f"({held} held to the baseline)"
    )
    why = {
        "caught": "caught in the baseline: a regression",
        "changed": "its function changed since the baseline: reported",
        "unscored": "not reached by the baseline's score: reported",
    }
    for name in survivors:
        print(f"  {checked[name]}: {name} ({why.get(stands.get(name, ''), 'no baseline: reported')})")
        show = subprocess.run(
            [sys.executable, "-m", "mutmut", "show", name],
            cwd=home[name],
            capture_output=True,
            text=True,
        )
        print("    " + show.stdout.strip().replace("\n", "\n    "))
    if unreached:
        print("not reached within the time box: " + "; ".join(unreached))
    if survivors:
        print(
            "a mutant survived: add the test that catches it, or list it under "
            "[tool.bcas-mutation.equivalent] with the reason it changes nothing observable"
        )
    if args.strict and checked and not held:
        print(
            "strict: the sample held no mutant to the baseline (" + ", ".join(stale) + " have none in unchanged "
            "functions); it checked nothing a score vouches for: rescore those groups"
        )
    return exit_status(checked, stands, args.strict)


def exit_status(checked: dict[str, str], stands: dict[str, str], strict: bool) -> int:
    """0: nothing failing; 1: a regression (``failing``), or with ``strict`` a sample that held
    no mutant to the baseline; 2: nothing could be checked."""
    if failing(checked, stands):
        return 1
    if not checked:
        return 2
    return 1 if strict and not any(stands.get(n) == "caught" for n in checked) else 0


STATUS_KEYS = ("killed", "timeout", "segfault", "survived", "no_tests", "suspicious", "skipped")


def score(args: argparse.Namespace) -> int:
    groups, equivalent = load_table()
    if args.groups:
        wanted = args.groups.split(",")
        groups = [g for g in groups if g.name in wanted]
    deadline = time.monotonic() + args.limit_s
    if args.reuse:
        root = Path(args.reuse)
    elif args.root:  # a folder kept between runs: mutmut keeps each unchanged function's verdicts
        root = Path(args.root)
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="bcas-mutation-score-"))
    log = root / "mutmut.log"
    print(f"mutmut output: {log}")
    rows: list[Row] = []
    entries: dict[str, dict[str, object]] = {}
    for group in groups:
        cwd = root / group.name
        t0 = time.monotonic()
        if args.reuse:
            if not (cwd / "mutants").is_dir():
                continue
        else:
            cwd = scratch_copy(group, root)
            recheck_survivors(cwd)
            mutmut(["run", "--max-children", str(args.jobs)], cwd, deadline, log)
        if not (cwd / "mutants").is_dir():
            break
        subprocess.run([sys.executable, "-m", "mutmut", "export-cicd-stats"], cwd=cwd, capture_output=True, check=True)
        counts = json.loads((cwd / "mutants" / "mutmut-cicd-stats.json").read_text())
        status = statuses(cwd)
        equal = equivalent_survivors(status, equivalent)
        rows.append(Row(group, counts, len(equal), time.monotonic() - t0))
        entries[group.name] = {
            "date": rows[-1].date,
            "functions": baseline_entry(status, function_hashes(cwd), equivalent),
        }
        print(group.name, json.dumps(counts), f"equivalent {len(equal)}")
        if time.monotonic() >= deadline:
            break
    if not rows:
        return 2
    done = {r.group.name for r in rows}
    text = DOCS.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    if args.keep_rows:
        by_name = {g.name: g for g in load_table()[0]}
        others = {name: g for name, g in by_name.items() if name not in done}  # only those rows are read
        kept = documented_rows(text[start:end], others)
        order = list(by_name)
        rows = sorted(rows + kept, key=lambda r: order.index(r.group.name))
        done |= {r.group.name for r in kept}
    table = render(rows, [g.name for g in load_table()[0] if g.name not in done], reused=bool(args.reuse))
    print(table)
    if args.write_docs:
        DOCS.write_text(text[:start] + "\n" + table + "\n" + text[end:])
        kept_entries = {g: e for g, e in read_baseline().items() if g not in entries} if args.keep_rows else {}
        groups_out = {**kept_entries, **entries}
        BASELINE.write_text(json.dumps({"groups": groups_out}, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return 0


def documented_rows(block: str, groups: dict[str, Group]) -> list[Row]:
    """The rows of the score table as this script wrote it into the docs, for ``--keep-rows``:
    each group's mutmut counts and the date of the run that produced them (the table's
    heading date where a row has no date of its own)."""
    heading = re.search(r"`python \.ci/mutation\.py score`, (\d{4}-\d{2}-\d{2})", block)
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 11 or cells[0] not in groups:
            continue
        total, checked, killed, timeout, survived, no_tests, suspicious, equivalent = map(int, cells[2:10])
        counts = {
            "total": total, "killed": killed, "timeout": timeout, "survived": survived, "no_tests": no_tests,
            "suspicious": suspicious, "segfault": 0, "skipped": 0,
        }  # fmt: skip
        if sum(counts[k] for k in STATUS_KEYS) != checked:
            raise SystemExit(f"docs/measured.md: the {cells[0]} row's counts do not add up to its {checked} checked")
        date = cells[11] if len(cells) > 11 and cells[11] else (heading.group(1) if heading else "?")
        rows.append(Row(groups[cells[0]], counts, equivalent, 0.0, date))
    return rows


@dataclass(frozen=True)
class Row:
    group: Group
    counts: dict[str, int]
    equivalent: int
    seconds: float
    date: str = time.strftime("%Y-%m-%d")  # of the mutmut run that counted these

    @property
    def checked(self) -> int:
        return sum(self.counts.get(k, 0) for k in STATUS_KEYS)

    @property
    def caught(self) -> int:
        return sum(self.counts.get(k, 0) for k in ("killed", "timeout", "segfault"))

    @property
    def scored(self) -> int:
        return self.checked - self.counts.get("skipped", 0) - self.equivalent


def render(rows: list[Row], missing: list[str], *, reused: bool = False) -> str:
    """The docs table from mutmut's counts per group.  Score = caught (killed, timeout,
    segfault) / (checked - skipped - equivalent); a group the time limit cut off is scored
    on the mutants checked so far and says how many those are."""
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    lines = [
        f"mutmut {version()}, `python .ci/mutation.py score`, {time.strftime('%Y-%m-%d')}, "
        f"load {load} when written, {os.cpu_count()} cores:",
        "",
        "| group | modules | mutants | checked | killed | timeout | survived | no tests | suspicious | equivalent | score | run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        c = r.counts
        lines.append(
            f"| {r.group.name} | {', '.join(f'`{m}`' for m in r.group.modules)} | {c['total']} | {r.checked} | "
            f"{c['killed']} | {c['timeout']} | {c['survived']} | {c['no_tests']} | {c['suspicious']} | "
            f"{r.equivalent} | {100 * r.caught / max(r.scored, 1):.1f}% | {r.date} |"
        )
    total = sum(r.counts["total"] for r in rows)
    checked = sum(r.checked for r in rows)
    caught = sum(r.caught for r in rows)
    scored = sum(r.scored for r in rows)
    lines.append(
        f"| **all checked** | | {total} | {checked} | | | | | | | **{100 * caught / max(scored, 1):.1f}%** | |"
    )
    unreviewed = sum(r.checked - r.counts.get("skipped", 0) for r in rows)
    lines += [
        "",
        f"Counting the reviewed equivalents as survivors instead of leaving them out: "
        f"{100 * caught / max(unreviewed, 1):.1f}% of the {unreviewed} checked.",
    ]
    partial = [f"{r.group.name} ({r.checked} of {r.counts['total']})" for r in rows if r.checked < r.counts["total"]]
    if partial:
        lines += [
            "",
            "Cut off by the time limit, scored on the mutants checked: " + ", ".join(partial) + " (mutmut "
            "checks the mutants with the fastest tests first, so this is not a random sample).",
        ]
    if missing:
        lines += ["", "Not run yet: " + ", ".join(missing) + "."]
    return "\n".join(lines)


def version() -> str:
    from importlib.metadata import version as v

    return v("mutmut")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="a seeded, time-boxed sample (CI)")
    s.add_argument("--seed", required=True)
    s.add_argument("--count", type=int, default=40)
    s.add_argument("--groups-per-run", type=int, default=3)
    s.add_argument("--limit-s", type=float, default=600)
    s.add_argument("--jobs", type=int, default=2)
    s.add_argument("--strict", action="store_true", help="also fail a sample that held no mutant to the baseline")
    s.set_defaults(func=sample)
    f = sub.add_parser("score", help="every mutant of the named groups")
    f.add_argument("--groups", default="")
    f.add_argument("--limit-s", type=float, default=3600)
    f.add_argument("--jobs", type=int, default=2)
    f.add_argument("--write-docs", action="store_true")
    f.add_argument("--reuse", default="", help="score an earlier run's scratch folder without running mutmut")
    f.add_argument(
        "--root",
        default="",
        help="scratch folder to run in and keep (default: a new temporary one); given an earlier run's, the"
        " group copies are refreshed from the tree and mutmut goes on where it stopped, checking again the"
        " mutants of functions whose source changed and every mutant not caught",
    )
    f.add_argument(
        "--keep-rows",
        action="store_true",
        help="keep the docs table's rows of groups this run did not score (each with the date of its run)",
    )
    f.set_defaults(func=score)
    args = parser.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
