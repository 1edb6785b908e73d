"""Bad input to any ``bcas`` subcommand: one line on standard error, exit status 2, nothing
created (no folder, no ``.records.lock``, no output file) and nothing changed; a mistyped
name is answered with the closest one; a key pasted where a variable name goes is never
echoed."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import click
import pytest

from bcas.cli import cli, main

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "smoke_mock.jsonl"
KEY = "sk-proj-abc123XYZdef456UVW"


def _dead_url() -> str:
    """A local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# (argv with RUN for a valid run folder, a part of the one line)
CASES: list[tuple[str, list[str], str]] = [
    ("merge", ["merge", "missing-run"], "missing-run: no such run folder"),
    ("merge", ["merge", "RUN", "RUN"], "give --out DIR"),
    ("compare", ["compare", "RUN", "missing-run"], "missing-run: no such run folder"),
    ("compare", ["compare", "RUN", "RUN", "--metric", "evidnce_recall"], "did you mean 'evidence_recall'?"),
    ("compare", ["compare", "RUN", "RUN", "RUN"], "combined into one report with --report DIR"),
    ("figures", ["figures", "RUN"], "no index.html (write the report first: bcas report"),
    ("figures", ["figures", "RUN", "--format", "gif"], "Invalid value for '--format'"),
    ("latency", ["latency", "missing-run"], "missing-run: no records.jsonl"),
    ("latency", ["latency", "RUN", "--out", "out/knee.html"], "no such folder"),
    ("view", ["view", "missing-run"], "missing-run: no such run folder"),
    ("view", ["view", "RUN/records.jsonl"], "not a folder (give run folders, or a folder holding them)"),
    ("view", ["view", "RUN", "missing-run"], "missing-run: no such run folder"),  # checked before any write
    ("view", ["view", "RUN", "--port", "8000"], "--port and --serve-seconds go with --serve"),
    ("report", ["report", "missing-run"], "missing-run: no such run folder"),
    ("report", ["report", "."], "holds no records.jsonl"),
    ("report", ["report", "RUN", "missing-run"], "missing-run: no such run folder"),  # checked before any write
    ("report", ["report", "RUN", "--mlflow", "DEADROOT"], "is not reachable"),  # the sink is reached first
    ("rejudge", ["rejudge", "missing-run", "--judge", "mock:gold"], "missing-run: no such run folder"),
    ("rejudge", ["rejudge", "RUN", "--judge", "mock:glod"], "unknown mock variant 'glod'"),
    (
        "rejudge",
        ["rejudge", "RUN", "--judge", "opneai:gpt-4o-mini"],
        "unknown backend 'opneai' (did you mean 'openai'?)",
    ),
    ("rejudge", ["rejudge", "RUN", "--judge", "openai:gpt-4o-mini", "--judge-base-url", "DEAD"], "connection refused"),
    ("rejudge", ["rejudge", "RUN", "--judge", "openai:m", "--judge-base-url", "localhost:1"], "http:// or https://"),
    ("rejudge", ["rejudge", "RUN", "--judge", "mock:gold", "--repeats", "0"], "--repeats"),
    ("rejudge", ["rejudge", "RUN", "--jduge", "mock:gold"], "Did you mean '--judge'?"),
    ("rejudge", ["rejudge", "RUN", "--judge", "mock:gold", "--api-key-env", KEY], "looks like a key"),
    ("reprice", ["reprice", "RUN", "--prices", "lsit"], "did you mean 'list'?"),
    (
        "reprice",
        ["reprice", "RUN", "--prices", "list", "--out", "RUN/records.jsonl"],
        "--out must differ from the input",
    ),
    ("reprice", ["reprice", "missing-run", "--prices", "list"], "missing-run: no such run folder"),
    ("reprice", ["reprice", "RUN", "--prices", "missing.toml", "--out", "out/r.jsonl"], "missing.toml does not exist"),
    ("gate write", ["gate", "write", "missing-run", "out/b.json"], "missing-run: no such run folder"),
    ("gate power", ["gate", "power", "--n", "ten"], "--n: expected whole numbers"),
    ("gate power", ["gate", "power", "--alpha", "2"], "--alpha"),
    ("data check", ["data", "check", "hotpotq"], "did you mean 'hotpotqa'?"),
    ("data check", ["data", "check", "missing.jsonl"], "missing.jsonl"),
    ("models", ["models", "--ggfu"], "Did you mean '--gguf'?"),
    ("models convert", ["models", "convert", "--gguf", "missing.gguf", "--out", "out"], "missing.gguf"),
    ("models convert", ["models", "convert", "--dtype", "int3"], "--dtype"),
    ("serve", ["serve", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ("serve", ["serve", "--model", "missing.gguf", "--port", "1"], "missing.gguf"),
    ("index evaluate", ["index", "evaluate", "--dataset", "hotpotq"], "did you mean 'hotpotqa'?"),
    (
        "index evaluate",
        ["index", "evaluate", "--dataset", "2wikimultihopqa", "--modes", "dense", "--embedder", "nosuch"],
        "unknown embedder 'nosuch'",
    ),
    ("index milvus", ["index", "milvus", "--data-dir", "out", "--port", "99999"], "--port"),
    ("(group)", ["mrege"], "did you mean 'merge'?"),
    ("(group)", ["gate", "wirte"], "did you mean 'write'?"),
]


def _leaves(group: click.Group, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            out |= _leaves(command, path + " ")
            if command.invoke_without_command:
                out.add(path)
        else:
            out.add(path)
    return out


def test_every_subcommand_is_driven_with_bad_input() -> None:
    assert _leaves(cli) == {name for name, _, _ in CASES} - {"(group)"}


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(("name", "argv", "says"), CASES, ids=[" ".join(c[1])[:60] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(
    name: str,
    argv: list[str],
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(GOLDEN, run / "records.jsonl")
    monkeypatch.chdir(tmp_path)
    dead = _dead_url()
    argv = [
        {
            "RUN": str(run),
            "RUN/records.jsonl": str(run / "records.jsonl"),
            "DEAD": dead,
            "DEADROOT": dead.removesuffix("/v1"),
        }.get(a, a)
        for a in argv
    ]
    before = _tree(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]
    assert "Traceback" not in captured.err and KEY not in captured.err + captured.out
    assert _tree(tmp_path) == before  # no folder, no lock file, no output, no record appended


def test_a_key_given_as_a_variable_name_is_never_echoed(capsys: pytest.CaptureFixture[str]) -> None:
    """Neither the command nor the library repeats a value that looks like a key."""
    from bcas.keys import looks_like_key
    from bcas.rejudge import rejudge

    for key in (
        KEY,
        "sk-ant-api03-abcdef",
        "hf_AbCdEfGhIjKlMnOpQrStUv",
        "ghp_0123456789abcdefABCDEF",
        "AbC123xYz789QwErTy456UiOp",
    ):
        assert looks_like_key(key), key
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "my_key", "KEY2"):
        assert not looks_like_key(name), name
    from bcas.llm.base import ModelError
    from bcas.llm.openai_compat import OpenAICompatModel
    from bcas.llm.preflight import PreflightError, preflight

    with pytest.raises(ValueError, match="looks like a key") as info:
        rejudge(".", "mock:gold", api_key_env=KEY)
    assert KEY not in str(info.value)
    with pytest.raises(ModelError, match="looks like a key") as model_info:
        OpenAICompatModel("m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY)
    with pytest.raises(PreflightError, match="looks like a key") as preflight_info:
        preflight("http://127.0.0.1:9/v1", "m", api_key_env=KEY)
    assert KEY not in str(model_info.value) + str(preflight_info.value)


def test_a_folder_of_shards_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shard = tmp_path / "run" / "shard-1-of-2"
    shard.mkdir(parents=True)
    shutil.copyfile(GOLDEN, shard / "records.jsonl")
    before = _tree(tmp_path)
    assert main(["report", str(tmp_path / "run")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"error: {tmp_path / 'run'}: holds the shards of a run, not its records: join them first " + (
        f"(bcas merge {tmp_path / 'run'})"
    )
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("argv", [[], ["gate"], ["data"], ["index"]])
def test_a_group_without_its_subcommand_prints_its_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"Usage: {' '.join(['bcas', *argv])} [OPTIONS] COMMAND") and captured.err == ""
