"""What a user loses when an identity value goes wrong.

An identity that moves when nothing that shapes the answer moved makes a resumed run pay
for every answer again (and a version upgrade orphan every stored run); one that stays
when something did move hands an old answer to a new question.  Each test names the
loss it guards against."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

import bcas.identity as identity
from bcas.identity import (
    answer_key,
    epoch_seed,
    file_sha256,
    grade_id,
    hf_fingerprint,
    judge_prompt_hash,
    name_stem,
    option_prompt_hash,
    prompt_dirs,
    prompt_hash,
    same_model,
    server_fingerprint,
    short,
)
from bcas.records import Record

FIELDS = {
    "model_fingerprint": "gguf:sha256:aa",
    "config_id": "bm25/s1/t2k#1",
    "dataset_hash": "d0",
    "item_id": "q1",
    "prompt_hash": "p0",
    "epoch": 2,
}


# -- the answer key: what resume and the paired comparisons match on --------------------


def test_each_part_of_an_answer_s_identity_tells_two_answers_apart() -> None:
    # a part left out of the key: resume reuses an answer made by another model, config,
    # dataset version, item, prompt or epoch
    base = answer_key(FIELDS)
    assert base == ("gguf:sha256:aa", "bm25/s1/t2k#1", "d0", "q1", "p0", 2)
    for name, other in [("model_fingerprint", "gguf:sha256:bb"), ("config_id", "x"), ("dataset_hash", "d1"),
                        ("item_id", "q2"), ("prompt_hash", "p1"), ("epoch", 3)]:  # fmt: skip
        assert answer_key({**FIELDS, name: other}) != base, name


def test_a_record_object_and_its_dict_have_one_identity() -> None:
    # the store matches records read from disk (dicts) against records in memory (objects):
    # if the two forms disagreed, a resumed run would answer every item again
    as_object = SimpleNamespace(**FIELDS)
    assert answer_key(as_object) == answer_key(FIELDS)
    record = Record(
        **{k: FIELDS[k] for k in ("model_fingerprint", "config_id", "dataset_hash", "item_id", "prompt_hash", "epoch")},
        run_id="r", model="m", dataset="hotpotqa", question="?", answers=["a"], prediction="a", correct_em=True,
        f1=1.0,
    )  # fmt: skip
    assert answer_key(record) == answer_key(record.to_dict()) == answer_key(FIELDS)


def test_missing_parts_of_an_old_record_read_as_empty_and_epoch_zero() -> None:
    # records written before a field existed (no prompt hash, epoch None) must still match
    # each other, in both forms, rather than crash or read as another epoch
    empty = ("", "", "", "", "", 0)
    assert answer_key({}) == empty
    assert answer_key(SimpleNamespace()) == empty
    assert answer_key({"prompt_hash": None, "epoch": None, "model_fingerprint": None}) == empty
    assert answer_key(SimpleNamespace(prompt_hash=None, epoch=None, model_fingerprint=None)) == empty


# -- model fingerprints ---------------------------------------------------------------


def test_a_served_model_s_identity_is_pinned_across_versions() -> None:
    # the fingerprint is stored in every record: a change of its form would make every
    # stored run's answers unreachable after an upgrade
    facts = {"root": "/w/a.gguf", "n_ctx": 8192}
    blob = json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
    assert hashlib.sha256(blob).hexdigest()[:16] == "864816971b51dcba"
    assert server_fingerprint("m") == "served:m"
    assert server_fingerprint("m", "fp_1") == "served:m#fp_1"
    assert server_fingerprint("m", None, facts) == "served:m@864816971b51dcba"
    assert server_fingerprint("m", "fp_1", facts) == "served:m@864816971b51dcba#fp_1"
    # nothing reported is the same model as facts never asked for
    assert server_fingerprint("m", None, {}) == server_fingerprint("m")
    # facts that are not JSON types (a path) still give an identity, and another value another one
    assert server_fingerprint("m", None, {"root": Path("/w/a.gguf")}) == server_fingerprint(
        "m", None, {"root": "/w/a.gguf"}
    )
    assert server_fingerprint("m", None, {**facts, "n_ctx": 4096}) != server_fingerprint("m", None, facts)


def test_a_local_checkpoint_is_identified_by_its_content(tmp_path: Path) -> None:
    # another checkpoint under the same folder name must not reuse the old answers;
    # files that do not shape the weights or the tokens must not invalidate them
    assert hf_fingerprint("org/model@rev") == "hf:org/model@rev"  # a hub id: its name
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(b"\0" * 100)
    first = hf_fingerprint(str(folder))
    assert first.startswith("hf-local:ckpt:") and len(first.rsplit(":", 1)[1]) == 32
    (folder / "README.md").write_text("notes")
    assert hf_fingerprint(str(folder)) == first
    for change in (
        lambda: (folder / "config.json").write_text('{"hidden_size": 16}'),
        lambda: (folder / "generation_config.json").write_text('{"temperature": 0.7}'),
        lambda: (folder / "model.safetensors").write_bytes(b"\0" * 101),
        lambda: (folder / "model-2.safetensors").write_bytes(b"\0"),
        lambda: (folder / "extra.bin").write_bytes(b"\0"),
        lambda: (folder / "w.gguf").write_bytes(b"\0"),
        lambda: (folder / "model.safetensors.index.json").write_text("{}"),
        lambda: (folder / "pytorch_model.bin.index.json").write_text("{}"),
    ):
        before = hf_fingerprint(str(folder))
        change()
        assert hf_fingerprint(str(folder)) != before
    renamed = folder.rename(tmp_path / "other")
    assert hf_fingerprint(str(renamed)).startswith("hf-local:other:")


def test_a_weights_file_is_hashed_once_and_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a multi-GB GGUF hashed at every start costs minutes; a stale hash after the file
    # changed would hand the old model's answers to the new one
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.gguf"
    path.write_bytes(b"weights-1")
    assert file_sha256(path) == hashlib.sha256(b"weights-1").hexdigest()
    cache = tmp_path / "cache" / "fingerprints.json"
    known = json.loads(cache.read_text())
    (key,) = known
    assert key.startswith(str(path.resolve()) + "|")
    assert known[key] == hashlib.sha256(b"weights-1").hexdigest()  # what the next start reads instead of hashing
    known[key] = "remembered"
    cache.write_text(json.dumps(known))
    assert file_sha256(path) == "remembered"  # the remembered value, not a second read
    path.write_bytes(b"weights-2!")  # other size and time: hashed again
    assert file_sha256(path) == hashlib.sha256(b"weights-2!").hexdigest()
    assert len(json.loads(cache.read_text())) == 2
    assert not [p for p in cache.parent.iterdir() if p.name.endswith(".tmp")]
    cache.write_text("{not json")  # a torn cache is only a cache
    assert file_sha256(path) == hashlib.sha256(b"weights-2!").hexdigest()
    cache.write_text("[1, 2]")
    assert file_sha256(path) == hashlib.sha256(b"weights-2!").hexdigest()
    assert isinstance(json.loads(cache.read_text()), dict)
    os.utime(path, ns=(1, 1))  # same bytes, another time: a new key, the same hash
    assert file_sha256(path) == hashlib.sha256(b"weights-2!").hexdigest()


def test_short_fingerprints_in_tables_keep_the_kind_and_the_start_of_the_hash() -> None:
    assert short("gguf:sha256:0123456789abcdef") == "gguf:0123456789"
    assert short("gguf:sha256:0123456789abcdef", 4) == "gguf:0123"
    assert short("served:qwen") == "served:qwen"
    assert short("abcdefghijklmn") == "abcdefghij"


# -- grades ---------------------------------------------------------------------------


def test_a_grade_is_another_grade_for_another_judge_repeat_count_or_judge_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a grade reused across judges, repeat counts or judge prompts reports the old judge's verdict
    base = grade_id("served:judge", 1)
    assert base == f"served:judge|prompt:{judge_prompt_hash()}|x1|read{identity.JUDGE_READING}"
    assert grade_id("served:judge2", 1) != base
    assert grade_id("served:judge", 3) != base
    assert grade_id("served:judge", 1, three_way=True).endswith("|3way")
    assert judge_prompt_hash(True) != judge_prompt_hash(False)
    with monkeypatch.context() as patched:  # the same replies read another way are other grades
        patched.setattr(identity, "JUDGE_READING", identity.JUDGE_READING + 1)
        assert grade_id("served:judge", 1) != base
    fake = tmp_path / "pkg"
    (fake / "grading" / "prompts").mkdir(parents=True)
    for rel in {*identity.JUDGE_PROMPTS, *identity.THREE_WAY_JUDGE_PROMPTS}:
        (fake / rel).write_text((identity.PACKAGE_ROOT / rel).read_text())
    monkeypatch.setattr(identity, "PACKAGE_ROOT", fake)
    assert grade_id("served:judge", 1) == base  # the same templates, the same grade
    (fake / identity.JUDGE_PROMPTS[0]).write_text("Grade strictly.\n" + (fake / identity.JUDGE_PROMPTS[0]).read_text())
    assert grade_id("served:judge", 1) != base


def test_the_hash_of_templates_covers_their_names_and_bytes(tmp_path: Path) -> None:
    # templates that swap texts, move text from one to the next, or are renamed shape other
    # prompts: the hash must see each
    def hashed(**texts: str) -> str:
        for old in tmp_path.glob("*.txt"):
            old.unlink()
        for name, text in texts.items():
            (tmp_path / f"{name}.txt").write_text(text)
        return identity._sha256_files(sorted(tmp_path.glob("*.txt")))

    first = hashed(a="one", b="two")
    assert hashed(a="one", b="two") == first
    assert hashed(a="two", b="one") != first
    assert hashed(a="on", b="etwo") != first
    assert hashed(a="one", c="two") != first


def test_prompt_hashes_of_kinds_and_options() -> None:
    # every registered kind hashes its own prompt folders; an unknown kind has none and a
    # stable hash (never a crash in a listing)
    assert prompt_dirs("no-such-kind") == ()
    assert prompt_hash("no-such-kind") == hashlib.sha256().hexdigest()[:16]
    assert prompt_dirs("bcas") and prompt_hash("bcas") != prompt_hash("no-such-kind")
    assert len(prompt_hash("bcas")) == 16
    assert option_prompt_hash("cite") != option_prompt_hash("abstain")
    assert len(option_prompt_hash("cite")) == 16


def test_a_run_kind_registered_without_prompts_has_none_to_hash() -> None:
    """A user's run kind (docs/extending.md) need not declare prompt folders: its answers'
    identity then hashes none, rather than the run failing to start."""
    from bcas.registry import RUN_KINDS

    RUN_KINDS.register("bare-kind", object(), per_item=True, label="bare")
    try:
        assert prompt_dirs("bare-kind") == ()
        assert prompt_hash("bare-kind") == prompt_hash("no-such-kind")
    finally:
        del RUN_KINDS["bare-kind"]


# -- epochs ---------------------------------------------------------------------------


def test_epoch_seeds_are_the_run_seed_first_then_distinct_and_reproducible() -> None:
    # epoch 0 must equal a single-epoch run (its answers are shared); later epochs must
    # sample differently from it and from each other, the same way on every rerun and version
    assert epoch_seed(7, 0) == 7
    assert epoch_seed(7, 1) == 1365659632 and epoch_seed(7, 2) == 12500377
    seeds = {epoch_seed(s, e) for s in range(20) for e in range(1, 6)}
    assert len(seeds) == 100
    assert all(0 <= v < 2**32 for v in seeds)
    assert not seeds & set(range(20))


# -- names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "stem"),
    [
        ("Qwen/Qwen3-8B", "qwen3-8b"),
        ("/models/SmolLM2-135M-Instruct-Q4_1.gguf", "smollm2-135m-instruct-q4_1"),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m-instruct.q4_1"),
        ("my model (v2)", "my-model-v2-"),
        ("gpt-4o", "gpt-4o"),
    ],
)
def test_model_names_take_one_label_form(model: str, stem: str) -> None:
    # the label form names cases and report rows: two spellings of one model must meet
    assert name_stem(model) == stem


def test_a_served_model_is_the_requested_one_only_by_name_or_a_variant_of_it() -> None:
    # a server of another model must be flagged beside the requested name, never hidden
    assert same_model("qwen3-8b", "Qwen3-8B-Q4_K_M.gguf")
    assert same_model("smollm2-135m", "/m/SmolLM2-135M-Instruct-Q4_1.gguf")
    assert same_model("Qwen/Qwen3-8B", "qwen3-8b")
    assert not same_model("qwen3-8b", "Qwen3-80B.gguf")
    assert not same_model("qwen3-8b", "smollm2-135m")
    assert not same_model("qwen3-8b-instruct", "qwen3-8b")
