"""The examples of README.md and of every page of docs/ run (issues 18 and 28): an
example that stops working fails CI.

Every fenced block of README.md and docs/**/*.md is taken, in a sandbox folder that holds
a copy of ``benchmarks/``, a ``pytest.ini`` (so the sandbox is the rootdir, as the
checkout is), the pages' own files and small samples at the data paths the pages name:

* a block after ``<!-- file: PATH -->`` is written to PATH (the example folder of "Your
  own grids and datasets" in docs/extending.md, whose dataset is the schema example);
* ``python`` blocks run;
* ``bash`` blocks: each command (continuation lines joined, comments dropped, ``&&``
  split) must match a rule of ``_run_command``; a command no rule covers fails, so a new
  example gets a rule when it is written.
  - ``python3 -m pytest FOLDER ...`` is collected (``--collect-only``: every option, grid,
    dataset file and ``-m``/``-k`` selection is checked at collection; ``-n`` is dropped
    there) and must select at least one case: as written when it talks to a server, else
    with its models replaced by ``mock`` variants (``--bcas-limit 2`` added when it gives
    none).  A command that needs no server then runs for real on those mock models when
    its cases are cheap: BM25 cases.  MADARA/RSC cases (100 calibration items probed) and
    hybrid cases on the small 2WikiMultihopQA collection run for real only with
    ``--runslow``; dense and hybrid cases on larger collections are only collected (a
    MiniLM index of the whole collection takes minutes to hours on a CPU).  A command
    that runs on the embedded default must select no case whose token budget and forced
    answer its declared window cannot hold (the session would refuse it before it
    starts, naming ``--bcas-model``: :mod:`bcas.run.plan_checks`).
  - ``bcas ...`` commands run as written (as ``python -m bcas ...``), once their input folders exist (made
    by a cheap mock run when no earlier command of the block made them); ``rejudge``
    runs with the judge ``mock:gold`` in place of a hosted judge that needs a key.
  - ``python docs/gen_reference.py ...`` runs as written in the checkout;
    ``python docs/screenshots.py`` is checked with ``--help`` (a real run needs Chromium
    and rewrites docs/images/: tests/test_docs.py checks the images it wrote);
    ``mkdocs build`` is run by tests/test_docs.py.
  - installs, servers, GPU engines and the perf scripts are not run; each says why.
  - a command that an earlier block (in README.md, then docs/ in name order) already
    holds is not run twice.
* Case ids quoted in the pages exist, and the record fields named in "Reports" are
  fields of ``bcas.records.Record``; tox's environments named in the pages exist.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.skips import MLFLOW_IMPORTABLE, RAY_IMPORTABLE, in_ci

from bcas.testing.project import preload

# Beyond what every run touches: the corpus, the gate, the manifest, the start-of-session
# checks and the mock backend.
preload("bcas.corpus", "bcas.gating", "bcas.harness.manifest", "bcas.run.checks", "bcas.testing.mock")

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))]
TEXTS = {page: (REPO / page).read_text(encoding="utf-8") for page in PAGES}
ALL_PAGES = "\n".join(TEXTS.values())  # every page: names quoted anywhere are checked
PYTEST_TIMEOUT_S = 900

_BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str, str | None, str]]:
    """(page:line, language, file directive, body) of every fenced block of every page."""
    out = []
    for page, text in TEXTS.items():
        for m in _BLOCK.finditer(text):
            line = text[: m.start("lang")].count("\n") + 1
            out.append((f"{page}:{line}", m.group("lang"), m.group("file"), m.group("body")))
    return out


def _commands(body: str) -> list[str]:
    """The block's commands: continuation lines joined, comments dropped, ``a && b`` split, ``&`` dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    out: list[str] = []
    for line in joined.splitlines():
        current: list[str] = []
        for word in shlex.split(line, comments=True) + ["&&"]:
            if word in ("&&", "&"):
                if current:
                    out.append(shlex.join(current))
                current = []
            else:
                current.append(word)
    return out


BLOCKS = _blocks()
FILES = {f: body for _, _, f, body in BLOCKS if f}
RUN = [(where, lang, body) for where, lang, f, body in BLOCKS if not f and lang in ("python", "bash")]


def _first_seen() -> dict[str, str]:
    """Each shell command with the page:line of the first block that holds it."""
    seen: dict[str, str] = {}
    for where, lang, body in RUN:
        if lang == "bash":
            for command in _commands(body):
                seen.setdefault(command, where)
    return seen


FIRST_SEEN = _first_seen()


# -- the sandbox ----------------------------------------------------------------------


def _flashrag_questions(path: Path, dataset: str, n: int) -> None:
    from bcas.data import load_dataset

    rows = []
    for it in load_dataset(dataset).items[:n]:
        by_id = {d.id: d for d in it.documents}
        gold = [by_id[s].title for s in it.supporting]
        rows.append(
            {
                "id": it.id,
                "question": it.question,
                "golden_answers": list(it.answers),
                "metadata": {"supporting_facts": {"title": gold, "sent_id": [0] * len(gold)}},
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _flashrag_corpus(path: Path, datasets: tuple[str, ...], n: int) -> None:
    from bcas.data import load_dataset

    lines = []
    for name in datasets:
        for it in load_dataset(name).items[:n]:
            lines.extend(
                json.dumps({"id": f"{name}-{d.id}", "contents": f'"{d.title}"\n{d.text}'}) for d in it.documents
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _samples(root: Path) -> None:
    """Small files at the data paths the README's commands name (real sample content)."""
    from support import official

    _flashrag_questions(root / "hotpotqa" / "dev.jsonl", "hotpotqa", 8)
    _flashrag_questions(root / "nq" / "test.jsonl", "nq_open", 8)
    _flashrag_corpus(root / "wiki18_100w.jsonl", ("hotpotqa", "nq_open"), 8)
    official.fever(root / "paper_dev.jsonl", root / "wiki-pages", n=120)  # MADARA calibrates on 100


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme-template")
    (root / "benchmarks").mkdir()
    for name in ("conftest.py", "test_grids.py"):
        shutil.copy(REPO / "benchmarks" / name, root / "benchmarks" / name)
    (root / "pytest.ini").write_text("[pytest]\n")
    for rel, body in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    _samples(root)
    return root


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme-cache")  # index caches shared by the module's runs


@pytest.fixture
def sandbox(
    template: Path, cache_dir: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A fresh copy of the template as the working folder of in-process pytest runs (``pytester``).

    The example's conftest.py registers a grid and a dataset in this process: the
    registries are restored afterwards, so no other test sees them.
    """
    from bcas.data import DATASETS
    from bcas.grids import GRIDS

    grids, datasets = GRIDS.snapshot(), dict(DATASETS)
    shutil.copytree(template, pytester.path, dirs_exist_ok=True)
    pytester.syspathinsert()  # as `python3 -m pytest` does: -p mybench.conftest imports from here
    monkeypatch.setenv("BCAS_CACHE_DIR", str(cache_dir))
    yield pytester.path
    GRIDS.restore(grids)
    DATASETS.clear()
    DATASETS.update(datasets)


def _env(cache_dir: Path) -> dict[str, str]:
    env = {**os.environ, "BCAS_CACHE_DIR": str(cache_dir), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _run(args: list[str], cwd: Path, cache_dir: Path, expect: int = 0) -> str:
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(cache_dir), capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == expect, f"{shlex.join(args)} exited {proc.returncode}:\n{out[-4000:]}"
    return out


# -- commands -------------------------------------------------------------------------

NOT_RUN = {
    r"^bash \.ci/install\b": "installs packages: CI runs it before the tests",
    r"^python3? -m pytest tests\b": "the test suite itself, of which this test is a part",
    r"^vllm serve\b": "a vLLM server needs a GPU and the gpu extra",
    r"^bcas view\b.*--serve\b": "serves until Ctrl-C: tests/report/test_view.py serves the site and stops it",
    r"--bcas-grid my_agent\b": (
        "the page's command-line agent in its grid: tests/bridge/test_agent_kind.py runs that agent, as shown, in a grid"
    ),
    r"^bcas serve\b": "starts a llama.cpp server (tests/llm/test_preflight.py runs the recipe)",
    r"^bcas index milvus\b": "starts a Milvus Lite server (tests/retrieval/test_engine.py runs one)",
    r"^python3? benchmarks/perf/run_all\.py\b": "prints speed figures for minutes; nothing to assert",
    r"^pip install\b": "installs packages: .ci/install installs the same extras",
    r"^(sudo )?apt-get install\b": "installs system packages: .ci/tracking.sh installs the Slurm tools",
    r"^mlflow ui\b": "a browser UI that serves until stopped (tests/tracking/test_mlflow_sink.py runs an MLflow server)",
    r"^ray (start|job submit)\b": "a Ray cluster (tests/deploy/test_ray_cluster.py runs one on this machine, slow stage)",
    r"\bbash deploy/slurm/|^export SLURM_CONF=|^squeue\b": (
        "a Slurm cluster (tests/deploy/test_slurm_cluster.py starts one and submits this block, slow stage)"
    ),
    r"^(?:[A-Z_]+=\S+ )*python3? deploy/ray/bcas_ray_job\.py\b": "a Ray job (tests/deploy runs it on a local cluster in the slow stage)",
    r"^(python3? -m )?mkdocs (build|serve)\b": "tests/test_docs.py builds the site with --strict (and .ci/run does)",
    r"--bcas-grid (mine|baselines_s\w+)\b": (
        "grids the page's own Python block registers (tests/methods/test_baselines_grid.py registers and runs one)"
    ),
    r"^bcas latency\b": "reads one served model's runs at several levels (tests/run/test_latency_run.py runs it)",
}
SERVER_OPTIONS = ("--bcas-base-url", "--bcas-retriever")
MOCK_VARIANTS = ("mock:gold", "mock:random", "mock:verbose")
_BM25 = re.compile(r"-bm25/[^\]]*\]$")
_DENSE = re.compile(r"-(hs|hs\+r)/[^\]]*\]$")
_SMALL_DENSE = re.compile(r"-2wikimultihopqa-(hs|hs\+r)/")  # a 180-paragraph collection: seconds to embed
_CASE = re.compile(r"::test_case\[[^\]]+\]")


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def _without(args: list[str], flag: str, takes_value: bool = True) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == flag:
            skip = takes_value
            continue
        if a.startswith(flag + "="):
            continue
        out.append(a)
    return out


def _needs_a_server(args: list[str]) -> bool:
    backends = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--bcas-backend"]
    models = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--bcas-model"]
    return (
        any(b in ("openai", "vllm") for b in backends)
        or any(o in args for o in SERVER_OPTIONS)
        or any(m.startswith(("openai:", "vllm:")) for m in models)
    )


def _on_the_embedded_default(args: list[str]) -> bool:
    """Whether a command runs on the embedded backend (no model named: the default), whatever
    retrieval server it names."""
    if "--bcas-base-url" in args:
        return False
    backends = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--bcas-backend"]
    models = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--bcas-model"]
    if not models:
        return all(b == "embedded" for b in backends)
    return any(m.startswith("embedded") or m.endswith(".gguf") for m in models)


def _past_the_embedded_window(args: list[str], cases: list[str]) -> list[str]:
    """The collected cases of ``args``' grids that the embedded default's window cannot hold."""
    from bcas.grids import GRIDS
    from bcas.llm import backend_meta
    from bcas.run.plan_checks import window_need

    window = int(backend_meta("embedded", "context_window"))
    grids = (_value(args, "--bcas-grid") or "").split(",")
    labels = {
        e.label
        for g in grids
        if g in GRIDS
        for e in GRIDS.get(g).entries
        if (window_need(e.kind, e.config) or 0) > window
    }
    # pytest numbers an id two grids share (``...-hs/sinf/t16k1]``)
    return [c for c in cases if any(re.search(rf"-{re.escape(label)}\d*\]$", c) for label in labels)]


def _on_mock(args: list[str]) -> list[str]:
    """The command with every non-mock model replaced by an unused mock variant, and a tiny limit."""
    out, used = [], {a for a in args if a.startswith("mock:")}
    free = [v for v in MOCK_VARIANTS if v not in used]
    i = 0
    while i < len(args):
        if args[i] == "--bcas-model" and i + 1 < len(args):
            model = args[i + 1] if args[i + 1].startswith("mock:") else free.pop(0)
            out += ["--bcas-model", model]
            i += 2
            continue
        out.append(args[i])
        i += 1
    if "--bcas-model" not in out:
        out += ["--bcas-model", free[0]]
    if "--bcas-limit" not in out:
        out += ["--bcas-limit", "2"]
    return out


def _pytest(args: list[str], pytester: pytest.Pytester, full: bool, env: dict[str, str] | None = None) -> str:
    """Collect the command as written; run it on the mock backend when that is cheap (see the module doc).

    In process (``pytester``, its folder the sandbox): a subprocess per command would spend
    most of its time importing; ``-n`` runs in a subprocess.
    """
    # A local command is collected as it will run, on the mock models (a baseline a previous
    # mock run wrote is refused for another model, as it should be).
    local = not _needs_a_server(args)
    collect = _without(_without(_on_mock(args) if local else args, "-n"), "--junitxml")
    # A command naming --bcas-api-key-env assumes its reader exported the key (an unset
    # variable stops the session at start): collect it with a placeholder in that variable.
    key_vars = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--bcas-api-key-env"]
    given = {name: os.environ.get(name) or "sk-readme-placeholder" for name in key_vars} | (env or {})
    with _environment(given):
        return _collect_and_run(args, collect, pytester, full)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment (in-process pytest runs read it), restored after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _collect_and_run(args: list[str], collect: list[str], pytester: pytest.Pytester, full: bool) -> str:
    result = pytester.runpytest(*collect, "--collect-only", "-q", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, f"pytest {shlex.join(args)} --collect-only exited {result.ret}:\n{out[-3000:]}"
    cases = _CASE.findall(out)
    assert cases, f"pytest {shlex.join(args)} selects no case:\n{out[-3000:]}"
    if _on_the_embedded_default(args):
        past = _past_the_embedded_window(args, cases)
        assert not past, (
            f"pytest {shlex.join(args)} runs on the embedded default, whose window cannot hold these cases' "
            f"budgets (the session refuses them before it starts): {past[:4]}"
        )
    if _needs_a_server(args):
        return f"collected {len(cases)} cases (needs a server)"
    if any(_DENSE.search(c) and not _SMALL_DENSE.search(c) for c in cases):
        return f"collected {len(cases)} cases (dense retrieval over a large collection: an index build of minutes)"
    if not full and not all(_BM25.search(c) for c in cases):
        return f"collected {len(cases)} cases (hybrid or MADARA cases: they run with --runslow)"
    # xdist, and the dense models (torch cannot be imported twice in one process), need a process of their own.
    own_process = "-n" in args or not all(_BM25.search(c) for c in cases)
    run = pytester.runpytest_subprocess if own_process else pytester.runpytest
    result = run(*_on_mock(args), "-q", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, f"pytest {shlex.join(_on_mock(args))} exited {result.ret}:\n{out[-3000:]}"
    return f"ran {len(cases)} cases on the mock backend"


def _prepare(folder: str, pytester: pytest.Pytester, shard: str | None = None) -> None:
    """An input run folder a command expects: a cheap mock run of the smoke grid's BM25 cases."""
    if (pytester.path / folder).is_dir():
        return
    args = [
        "benchmarks",
        "--bcas-grid",
        "smoke",
        "-m",
        "hotpotqa",
        "--bcas-model",
        "mock:gold",
        "--bcas-limit",
        "20",
        "--bcas-report",
        folder,
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    result = pytester.runpytest(*args, *(["--bcas-shard", shard] if shard else []))
    assert result.ret == 0, result.stdout.str()[-3000:]


def _run_command(command: str, pytester: pytest.Pytester, cache_dir: Path, full: bool) -> str:
    cwd = pytester.path
    for pattern, why in NOT_RUN.items():
        if re.search(pattern, command):
            return f"not run: {why}"
    words = shlex.split(command)
    env: dict[str, str] = {}
    while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value prefixes: the command's environment
        name, _, value = words[0].partition("=")
        env[name] = value
        words = words[1:]
    if words[:3] in (["python3", "-m", "pytest"], ["python", "-m", "pytest"]):
        baseline = _value(words[3:], "--bcas-baseline")
        if baseline and baseline.endswith(".json") and not (cwd / baseline).exists():
            # a baseline file an earlier block of the page wrote: written here the same way
            base = ["benchmarks", "--bcas-grid", "smoke", "-m", "hotpotqa", "--bcas-limit", "200"]
            _pytest([*base, "--bcas-report", "reports/base"], pytester, full, env)
            _run(["-m", "bcas", "gate", "write", "reports/base", baseline], cwd, cache_dir)
        return _pytest(words[3:], pytester, full, env)
    if words[:2] in (["python", "docs/gen_reference.py"], ["python3", "docs/gen_reference.py"]):
        out = _run(words[1:], REPO, cache_dir)
        assert out.strip(), f"{command} printed nothing"
        return "ran in the checkout"
    if words[:2] in (["python", "docs/screenshots.py"], ["python3", "docs/screenshots.py"]):
        out = _run([words[1], "--help"], REPO, cache_dir)
        assert "usage:" in out
        return "checked with --help (tests/test_docs.py checks the images it wrote)"
    if words[0] == "bcas":  # the installed command, run as python -m bcas
        args = words[1:]
        inputs = [w for w in args[1:] if w.startswith("reports/")]
        if args[:1] == ["merge"]:
            shards = [w for w in inputs if w != _value(args, "--out")]
            for k, folder in enumerate(shards, start=1):
                _prepare(folder, pytester, f"{k}/{len(shards)}")
        elif args[:1] == ["rejudge"]:
            for folder in inputs:
                _prepare(folder, pytester)
            args = _without(_without(_without(args, "--judge"), "--judge-base-url"), "--api-key-env")
            args += ["--judge", "mock:gold"]  # a hosted judge needs a key: the mock judge grades instead
        elif args[:1] == ["compare"]:
            for folder in (w for w in inputs if w != _value(args, "--report")):  # --report: the folder it writes
                _prepare(folder, pytester)
        elif args[:1] in (["figures"], ["view"]):
            for folder in inputs:
                _prepare(folder, pytester)
        elif args[:2] != ["gate", "write"]:
            raise AssertionError(f"docs command without a rule in tests/test_readme.py: {command}")
        _run(["-m", "bcas", *args], cwd, cache_dir)
        return "ran"
    raise AssertionError(f"docs command without a rule in tests/test_readme.py: {command}")


EXTRAS = {"mlflow": MLFLOW_IMPORTABLE, "ray": RAY_IMPORTABLE}  # optional extras a docs example may use


def _uses(body: str, extra: str) -> bool:
    """The example imports ``extra`` or passes it to ``bcas.evaluate`` (``mlflow=...``)."""
    return re.search(rf"^\s*(?:import|from) {extra}\b|\b{extra}=", body, flags=re.M) is not None


@pytest.mark.parametrize(("where", "lang", "body"), RUN, ids=[where for where, _, _ in RUN])
def test_readme_example_runs(
    where: str,
    lang: str,
    body: str,
    sandbox: Path,
    cache_dir: Path,
    pytester: pytest.Pytester,
    request: pytest.FixtureRequest,
) -> None:
    if lang == "python":
        extra = next((name for name, present in EXTRAS.items() if not present and _uses(body, name)), None)
        if extra and not in_ci():  # README command 1 installs neither; CI installs both and runs the example
            pytest.skip(f"the example uses {extra}, which is not installed: pip install 'bcas[{extra}]'")
        for folder in sorted(set(re.findall(r"[\"'](reports/[\w.-]+)[\"']", body))):
            _prepare(folder, pytester)  # a run folder the example reads, made by a cheap mock run
        _run(["-c", body], sandbox, cache_dir)
        return
    full = bool(request.config.getoption("--runslow", default=False))
    for command in _commands(body):
        if FIRST_SEEN[command] != where:
            print(f"{where}: {command}\n  -> the same command as {FIRST_SEEN[command]}")
            continue
        print(f"{where}: {command}\n  -> {_run_command(command, pytester, cache_dir, full)}")


def test_readme_has_examples_of_each_kind() -> None:
    # The extraction itself can fail silently (a changed fence): the README's examples are found.
    langs = [lang for _, lang, _ in RUN]
    assert langs.count("python") >= 1 and langs.count("bash") >= 10
    assert {"mybench/conftest.py", "mybench/test_mybench.py", "mybench/museums.jsonl"} <= set(FILES)


def test_schema_example_is_a_valid_dataset(tmp_path: Path) -> None:
    from bcas.data import load_dataset

    path = tmp_path / "museums.jsonl"
    path.write_text(FILES["mybench/museums.jsonl"])
    ds = load_dataset(path)
    assert len(ds) == 2 and len(ds.documents) == 2  # the shared Louvre paragraph is one document
    assert (ds.task, ds.scoring) == ("factoid", "qa")


def test_case_ids_quoted_in_the_readme_exist(tmp_path: Path) -> None:
    quoted = set(re.findall(r"`(smollm2-135m-[^`\s]+)`", ALL_PAGES))
    assert quoted
    grids = _run(["-c", "from bcas.grids import GRIDS; print(','.join(GRIDS))"], REPO, tmp_path).strip()
    out = _run(
        ["-m", "pytest", "benchmarks", "--bcas-grid", grids, "--collect-only", "-q", "-p", "no:cacheprovider"],
        REPO,
        tmp_path,
    )
    ids = {m[len("::test_case[") : -1] for m in _CASE.findall(out)}
    assert quoted <= ids, sorted(quoted - ids)


def test_record_fields_named_in_the_readme_exist() -> None:
    from bcas.records import Record

    bullet = re.search(r"^- `records\.jsonl`:(.*?)^- ", ALL_PAGES, re.S | re.M)
    assert bullet is not None
    named = set(re.findall(r"`([a-z_]+)`", bullet.group(1)))
    fields = {f.name for f in dataclasses.fields(Record)}
    assert {"correct_em", "searches_used", "cost_usd"} <= named
    assert named <= fields, sorted(named - fields)


def test_tox_environments_named_in_the_readme_exist(tmp_path: Path) -> None:
    named = set(re.findall(r"tox -e (\w+)", ALL_PAGES))
    assert named >= {"perf", "vllm"}
    shutil.copy(REPO / "tox.ini", tmp_path / "tox.ini")  # tox lists without writing into the checkout
    listed = subprocess.run(
        [sys.executable, "-m", "tox", "list"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    envs = {line.split(" ->")[0].strip() for line in listed.splitlines() if " -> " in line}
    assert named <= envs, sorted(named - envs)
