"""What a user loses when an answer's identity is computed wrongly (``bcas.identity``, ``bcas.shard``).

Each test states the promise a user relies on: resume never reuses an answer made under
other prompts, the same templates hash the same on any file system, a run's seed reaches
every epoch's sampling, a served model's facts hash the same in any key order, and the
documented shard formula keeps the shards of every version disjoint.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import bcas.identity as identity
from bcas.config import AgentConfig, RunConfig
from bcas.identity import epoch_seed, prompt_hash, server_fingerprint
from bcas.shard import Shard, shard_number


@pytest.fixture
def package_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the package's prompt folders that ``bcas.identity`` hashes instead of the installed ones."""
    fake = tmp_path / "pkg"
    folders = {"agent/prompts", "retrieval/prompts", "assess/prompts", "grading/prompts"}
    for folder in folders:
        shutil.copytree(identity.PACKAGE_ROOT / folder, fake / folder)
    monkeypatch.setattr(identity, "PACKAGE_ROOT", fake)
    identity.option_prompt_hash.cache_clear()
    yield fake
    identity.option_prompt_hash.cache_clear()  # the installed templates' hashes again


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("cite", "answer_cite_json.txt"),
        ("cite", "answer_cite_text.txt"),
        ("abstain", "tool_abstain.txt"),
        ("abstain", "answer_abstain.txt"),
    ],
)
def test_rewording_an_option_prompt_is_another_configuration(package_copy: Path, option: str, name: str) -> None:
    """Resume keys on the configuration id: an option's reworded prompt must not reuse older answers."""
    on = RunConfig(agent=AgentConfig(**{option: True}))
    off = RunConfig()
    before_on, before_off = on.config_id, off.config_id
    template = package_copy / "agent/prompts/options" / name  # every template the agent renders for it
    template.write_text(template.read_text(encoding="utf-8") + "\nA reworded instruction.\n", encoding="utf-8")
    identity.option_prompt_hash.cache_clear()
    assert on.config_id != before_on  # answers made under the old wording are not this configuration's
    assert off.config_id == before_off  # a configuration without the option is untouched


def test_every_option_template_is_in_some_option_s_identity() -> None:
    """A template added to the options folder but to no option's hash would change answers unseen."""
    on_disk = {p.name for p in (identity.PACKAGE_ROOT / "agent/prompts/options").glob("*.txt")}
    hashed = {Path(p).name for paths in identity.OPTION_PROMPTS.values() for p in paths}
    assert on_disk == hashed


@pytest.mark.parametrize("kind", ["bcas", "madara"])
def test_prompt_hash_does_not_depend_on_the_directory_listing_order(
    package_copy: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Two file systems list a folder in different orders; the same templates must hash the same."""
    original = Path.glob

    def listed(reverse: bool):  # type: ignore[no-untyped-def]
        def glob(self: Path, pattern: str, **kwargs: object) -> Iterator[Path]:
            return iter(sorted(original(self, pattern, **kwargs), reverse=reverse))  # type: ignore[arg-type]

        return glob

    hashes = []
    for reverse in (False, True):
        monkeypatch.setattr(Path, "glob", listed(reverse))
        hashes.append(prompt_hash(kind))
    monkeypatch.setattr(Path, "glob", original)
    assert len(list((package_copy / identity.prompt_dirs(kind)[0]).glob("*.txt"))) >= 2  # an order to differ in
    assert hashes[0] == hashes[1]


def test_runs_with_different_seeds_sample_every_epoch_differently() -> None:
    """``--bcas-seed`` must reach every epoch, not only the first: otherwise two seeds share later samples."""
    seeds = range(6)
    for epoch in range(1, 5):
        per_seed = [epoch_seed(seed, epoch) for seed in seeds]
        assert len(set(per_seed)) == len(per_seed), (epoch, per_seed)
    # within one run, every epoch samples under its own seed, and epoch 0 under the run's seed
    for seed in seeds:
        run = [epoch_seed(seed, e) for e in range(5)]
        assert run[0] == seed and len(set(run)) == 5
    # and a given seed and epoch always give the same sampling seed, in every process and on every
    # machine (a value pinned here, not a second call in this process: a per-process salt would pass that)
    assert epoch_seed(3, 2) == 3896045312


def test_a_served_model_identity_does_not_depend_on_the_order_of_its_facts() -> None:
    """The server's facts arrive as a mapping in any order; the fingerprint must not follow that order."""
    facts = {"root": "/models/x.gguf", "n_ctx": 8192, "meta": {"n_params": 135, "vocab": 49152}}
    reordered = {"meta": {"vocab": 49152, "n_params": 135}, "n_ctx": 8192, "root": "/models/x.gguf"}
    assert server_fingerprint("x", facts=facts) == server_fingerprint("x", facts=reordered)
    assert server_fingerprint("x", facts=facts) != server_fingerprint("x", facts={**facts, "n_ctx": 4096})


# The documented formula (bcas/shard.py, docs): 1 + (first 8 bytes of sha256(UTF-8 id), big-endian) mod N.
# Known vectors, pinned: a version that reads the digest otherwise puts items on other shards, and the
# shards of two versions then overlap when they are merged.
SHARD_VECTORS = {
    "item-0": (1, 2, 2, 1, 11),
    "5a8b2c1e": (1, 1, 1, 6, 11),
    "hotpotqa-5ab3b0bf": (1, 3, 2, 5, 1),
    "q7": (2, 2, 1, 4, 16),
    "\u00e9-\u00fc": (2, 3, 2, 3, 12),
}
COUNTS = (2, 3, 5, 7, 16)


@pytest.mark.parametrize(("key", "expected"), sorted(SHARD_VECTORS.items()))
def test_the_shard_formula_is_pinned_by_known_vectors(key: str, expected: tuple[int, ...]) -> None:
    assert tuple(shard_number(key, n) for n in COUNTS) == expected
    assert [Shard(k, 16).owns(key) for k in range(1, 17)].count(True) == 1
    # the vectors follow from the documented formula (a check of the table itself)
    head = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    assert tuple(1 + head % n for n in COUNTS) == expected


def test_a_three_way_grade_is_not_taken_for_a_correct_incorrect_grade() -> None:
    """Rejudging with the three-way judge (SimpleQA's labels) grades again: its grade has its own identity."""
    fingerprint = "gguf:sha256:" + "0" * 64
    assert identity.judge_prompt_hash(three_way=True) != identity.judge_prompt_hash()
    assert identity.grade_id(fingerprint, 1, three_way=True) != identity.grade_id(fingerprint, 1)
    assert identity.grade_id(fingerprint, 3) != identity.grade_id(fingerprint, 1)  # repeats are part of it


def test_a_three_way_grade_follows_the_three_way_judges_templates(package_copy: Path) -> None:
    """Editing one judge's prompt regrades that judge's answers only: each grade id carries its own prompts' hash."""
    fingerprint = "gguf:sha256:" + "0" * 64
    two_way, three_way = identity.grade_id(fingerprint, 1), identity.grade_id(fingerprint, 1, three_way=True)
    (package_copy / "grading/prompts/judge_three_way.txt").write_text(
        "Label the answer: CORRECT, WRONG or NOT ATTEMPTED."
    )
    assert identity.grade_id(fingerprint, 1, three_way=True) != three_way
    assert identity.grade_id(fingerprint, 1) == two_way
    (package_copy / "grading/prompts/judge.txt").write_text("Is the answer correct?")
    assert identity.grade_id(fingerprint, 1) != two_way


# Values recorded by earlier versions, pinned: a version that hashes otherwise takes every recorded
# grade or local-checkpoint answer for another one and asks the model again on resume.
def test_grade_ids_and_checkpoint_fingerprints_of_earlier_runs_are_recognised(
    package_copy: Path, tmp_path: Path
) -> None:
    for i, name in enumerate(identity.JUDGE_PROMPTS):
        (package_copy / name).write_text(f"judge template {i}\n", encoding="utf-8")
    # grades made before reading 2 (which read "isn't correct" as correct) are graded again
    assert identity.grade_id("mock:gold", 3) == "mock:gold|prompt:b0d650982489bb87|x3|read2"
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "generation_config.json").write_text('{"temperature": 0.7}')
    (folder / "model.safetensors").write_bytes(b"\0" * 100)
    assert identity.hf_fingerprint(str(folder)) == "hf-local:ckpt:337df1691f90a8d59883a2ff4c20d0a0"
