"""The launch files under deploy/ (issue 27): shell scripts parse, manifests carry what their kinds
require, the Ray job compiles and builds the shard commands, and the docs point at every file.

Playing the Slurm scripts as an array is in ``test_shard_auto.py``; nothing here needs a cluster.
"""

from __future__ import annotations

import importlib.util
import py_compile
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SHELL = sorted([*DEPLOY.rglob("*.sh"), *DEPLOY.rglob("*.sbatch")])
MANIFESTS = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
RAY_JOB = DEPLOY / "ray" / "bcas_ray_job.py"


def test_the_three_launchers_are_there() -> None:
    names = {p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*") if p.is_file()}
    assert {"slurm/bcas-shards.sbatch", "slurm/bcas-merge.sbatch", "slurm/submit.sh", "slurm/vllm-up.sh"} <= names
    assert {"k8s/bcas-shards-job.yaml", "k8s/vllm.yaml", "k8s/bcas-merge-job.yaml", "ray/bcas_ray_job.py"} <= names


@pytest.mark.parametrize("script", SHELL, ids=[p.name for p in SHELL])
def test_shell_script_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    if shutil.which("shellcheck"):
        lint = subprocess.run(["shellcheck", "-x", "-P", str(REPO), str(script)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout


def test_the_batch_script_declares_an_array_and_runs_auto_shards() -> None:
    text = (DEPLOY / "slurm" / "bcas-shards.sbatch").read_text()
    assert "#SBATCH --array=0-" in text and "--bcas-shard auto" in text and "vllm_up " in text
    assert '--dependency="afterany:' in (DEPLOY / "slurm" / "submit.sh").read_text()


def _docs() -> list[tuple[str, dict[str, Any]]]:
    return [(f"{p.name}#{i}", d) for p in MANIFESTS for i, d in enumerate(yaml.safe_load_all(p.read_text())) if d]


def _require(doc: dict[str, Any], *path: str) -> Any:
    node: Any = doc
    for key in path:
        assert isinstance(node, dict) and key in node, f"{doc.get('kind')} {doc.get('metadata')}: no {'.'.join(path)}"
        node = node[key]
    return node


@pytest.mark.parametrize(("name", "doc"), _docs(), ids=[n for n, _ in _docs()])
def test_manifest_has_the_required_fields(name: str, doc: dict[str, Any]) -> None:
    for key in ("apiVersion", "kind"):
        assert doc.get(key), f"{name}: no {key}"
    assert _require(doc, "metadata", "name")
    kind = doc["kind"]
    if kind in ("Job", "Deployment"):
        containers = _require(doc, "spec", "template", "spec", "containers")
        assert containers and all(c.get("name") and c.get("image") for c in containers), name
    if kind == "Job":
        assert doc["apiVersion"] == "batch/v1"
        assert _require(doc, "spec", "template", "spec", "restartPolicy") in ("Never", "OnFailure")
        for key in ("completions", "parallelism"):
            assert isinstance(_require(doc, "spec", key), int) and doc["spec"][key] >= 1, name
    if kind == "Deployment":
        labels = _require(doc, "spec", "selector", "matchLabels")
        assert labels.items() <= _require(doc, "spec", "template", "metadata", "labels").items()
    if kind == "Service":
        assert _require(doc, "spec", "selector") and _require(doc, "spec", "ports")
    if kind == "PersistentVolumeClaim":
        assert "ReadWriteMany" in _require(doc, "spec", "accessModes")


def test_the_indexed_job_and_its_shard_count_agree_with_the_service() -> None:
    docs = dict(_docs())
    job = docs["bcas-shards-job.yaml#1"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] <= spec["completions"]
    container = spec["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert int(env["BCAS_SHARD_COUNT"]) == spec["completions"]  # --bcas-shard auto refuses another count
    assert "--bcas-shard=auto" in container["args"]
    service = docs["vllm.yaml#1"]
    port = service["spec"]["ports"][0]["port"]
    assert f"--bcas-base-url=http://{service['metadata']['name']}:{port}/v1" in container["args"]
    claim = docs["bcas-shards-job.yaml#0"]["metadata"]["name"]
    assert {
        v["persistentVolumeClaim"]["claimName"]
        for v in spec["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    } == {claim}


def test_ray_job_compiles_and_builds_each_shards_command(tmp_path: Path) -> None:
    py_compile.compile(str(RAY_JOB), cfile=str(tmp_path / "job.pyc"), doraise=True)
    spec = importlib.util.spec_from_file_location("bcas_ray_job", RAY_JOB)
    assert spec is not None and spec.loader is not None
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)  # Ray itself is imported only when tasks are submitted
    args = job.parse(
        [
            "--shards",
            "4",
            "--run",
            "/r",
            "--model",
            "openai:m",
            "--base-url",
            "http://h:8000/v1",
            "--",
            "--bcas-grid",
            "smoke",
        ]
    )
    command = job.shard_command(args)
    assert command[1:4] == ["-m", "pytest", "benchmarks"] and command[-2:] == ["--bcas-grid", "smoke"]
    assert command[command.index("--bcas-shard") + 1] == "auto"
    from bcas.shard import parse_shard

    # What --bcas-shard auto reads from each task's environment: shards 1..4 of 4.
    assert [parse_shard("auto", job.shard_env(k, 4)).label for k in range(4)] == ["1/4", "2/4", "3/4", "4/4"]


def test_the_docs_name_every_launch_file() -> None:
    docs = (REPO / "docs" / "scaling.md").read_text() + (DEPLOY / "README.md").read_text()
    for path in [*SHELL, *MANIFESTS, RAY_JOB]:
        assert path.name in docs, f"{path.relative_to(REPO)} is not mentioned in docs/scaling.md or deploy/README.md"
    assert "deploy/" in (REPO / "README.md").read_text()
