"""Under pytest: a mistyped ``--bcas-*`` option is answered with the closest one, and a key
pasted where a variable name goes is refused without being printed, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from bcas.run.options import OPTIONS, mistyped_option
from tests.support.mockruns import make_project, run_pytest

KEY = "sk-proj-abc123XYZdef456UVW"
SERVED = ("--bcas-grid", "brief", "--bcas-model", "openai:x", "--bcas-base-url", "http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--bcas-gird", "brief"], "unknown option --bcas-gird (did you mean '--bcas-grid'?)"),
        (["--bcas-grid", "brief", "--bcas-limt=2"], "unknown option --bcas-limt (did you mean '--bcas-limit'?)"),
        ([*SERVED, "--bcas-api-key-env", KEY], "--bcas-api-key-env: the value looks like a key, not a variable name"),
        ([*SERVED, f"--bcas-api-key-env={KEY}"], "--bcas-api-key-env: the value looks like a key"),
        (
            [*SERVED, f"--bcas-api-kye-env={KEY}"],
            "unknown option --bcas-api-kye-env (did you mean '--bcas-api-key-env'?)",
        ),
    ],
)
def test_a_bad_option_is_a_usage_error_that_never_echoes_a_key(tmp_path: Path, args: list[str], says: str) -> None:
    project = make_project(tmp_path / "project")
    done = run_pytest(project, *args, "--bcas-report", str(project / "reports" / "run"))
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:] + done.stderr[-2000:]
    assert says in done.stderr, done.stderr
    assert KEY not in done.stdout + done.stderr
    assert not (project / "reports").exists()


def test_every_option_is_known_and_only_bcas_options_are_checked() -> None:
    known = [f"--bcas-{name}" for name, *_ in OPTIONS]
    assert mistyped_option([*known, "-k", "x", "--other", "--", "--bcas-after-the-separator"], known) is None
    assert mistyped_option(["--bcas-sed=1"], known) == (
        "unknown option --bcas-sed (did you mean '--bcas-seed'?); pytest --help lists the --bcas-* options"
    )
    assert mistyped_option(["--bcas-zzzzzz"], known) == (
        "unknown option --bcas-zzzzzz; pytest --help lists the --bcas-* options"
    )
