"""``RunConfig.config_id`` (part of every answer's identity) against its documented formula,
computed independently for several configurations: sha256 of the canonical JSON (sorted keys, no
spaces), first 16 hex; an agent option that is on adds its templates' hash.  A change of the form
would make every stored run's answers unreachable on resume."""

from __future__ import annotations

import hashlib
import json

from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.identity import option_prompt_hash

CONFIGS = [
    RunConfig(),
    RunConfig(budget=Budget(max_searches=1, max_total_tokens=2000)),
    RunConfig(budget=Budget(max_searches=None, max_total_tokens=16000), retrieval=RetrievalConfig(mode="bm25", k=5)),
    RunConfig(agent=AgentConfig(planning=True, reflection=True), seed=3),
    RunConfig(agent=AgentConfig(cite=True)),
    RunConfig(agent=AgentConfig(cite=True, abstain=True), method="x"),
]


def _documented(config: RunConfig) -> str:
    data = config.to_dict()
    options = {o: option_prompt_hash(o) for o in ("cite", "abstain") if getattr(config.agent, o)}
    if options:
        data["option_prompts"] = options
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def test_config_ids_follow_the_documented_formula_and_tell_configurations_apart() -> None:
    ids = [c.config_id for c in CONFIGS]
    assert ids == [_documented(c) for c in CONFIGS]
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) == len(ids)
    # the id is the configuration's, not the object's: a round trip keeps it
    assert [RunConfig.from_dict(c.to_dict()).config_id for c in CONFIGS] == ids
