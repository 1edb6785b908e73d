"""Frozen run configurations with stable ids and short human labels.

Every field has a default, so ``RunConfig(budget=Budget(max_searches=2,
max_total_tokens=2000))`` is a complete configuration.  ``config_id`` is a hash of
the canonical JSON form, so two equal configurations share an id on every machine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from bcas.identity import agent_code_id, option_prompt_hash
from bcas.registry import RETRIEVAL_MODES, agent_tool_methods, assess_methods

ACTION_FORMATS = ("json", "text", "tools")  # bcas.agent.protocol


class ConfigError(ValueError):
    """A configuration value is out of its documented domain."""


@dataclass(frozen=True)
class Budget:
    """Search and completion-token allowances of one trajectory (BCAS §3.3).

    The paper fixes two caps, and they are the only ones on by default:

    * ``max_searches``: search calls of the trajectory (``None`` = unlimited);
    * ``max_total_tokens``: cumulative completion tokens of every model call of the
      trajectory (plan, action turns, reflections, answer), reasoning tokens included.

    Each call may request what remains of ``max_total_tokens``
    (:meth:`bcas.agent.budget.BudgetLedger.turn_max_tokens`).
    ``per_turn_max_tokens`` is an extra per-call cap, not in the paper: ``None`` (the
    default, and the paper grids) leaves it off; the smoke grid sets it so that a
    135M model on a CPU cannot ramble for thousands of tokens in one call.

    ``forced_answer_tokens`` is the forced-answer allowance: the budget counts as
    spent once fewer than this many tokens remain (too few to complete an action),
    and the one final answer taken then may use this many tokens beyond
    ``max_total_tokens`` (flagged ``over_budget``).  The paper does not size it; 48
    fits a short constrained answer (``{"answer": "..."}`` of at most 80 characters)
    with margin.  So a trajectory's completion tokens never exceed
    ``max_total_tokens + forced_answer_tokens``.
    """

    max_searches: int | None = 3
    max_total_tokens: int = 16000
    per_turn_max_tokens: int | None = None
    forced_answer_tokens: int = 48

    def __post_init__(self) -> None:
        if self.max_searches is not None and self.max_searches < 0:
            raise ConfigError(f"max_searches must be >= 0 or None, got {self.max_searches}")
        if self.max_total_tokens <= 0:
            raise ConfigError(f"max_total_tokens must be > 0, got {self.max_total_tokens}")
        if self.per_turn_max_tokens is not None and self.per_turn_max_tokens <= 0:
            raise ConfigError(f"per_turn_max_tokens must be > 0 or None (off), got {self.per_turn_max_tokens}")
        if self.forced_answer_tokens <= 0:
            raise ConfigError(f"forced_answer_tokens must be > 0, got {self.forced_answer_tokens}")


RETRIEVAL_SCOPES = ("collection", "item")


@dataclass(frozen=True)
class RetrievalConfig:
    """Retriever choice and parameters (BCAS §3.5; MADARA §5.5).

    ``mode``: ``bm25`` (phrase-boosted unless ``phrase_boost=False``), ``dense``,
    ``hybrid`` (BM25 + dense fused by ``fusion``) or ``hybrid_rerank`` (hybrid
    retrieves ``candidates``, the reranker keeps the top ``k``).

    ``dense_index``: the faiss index, ``flat`` (exact), ``hnsw``, ``ivf`` or ``ivf-pq``;
    its parameters (``ivf_nlist``, ``ivf_nprobe``, ``pq_m``, ``pq_nbits``, ``hnsw_m``,
    ``hnsw_ef_construction``, ``hnsw_ef_search``; 0 = chosen from the data) are fields
    so that they are part of the configuration id (``bcas.retrieval.ann``).

    ``scope``: what one search covers.  ``collection`` (default) is BCAS §3.5's
    dataset-specific index over every item's documents, built once per dataset, whatever
    ``limit`` a run chooses.  ``item`` indexes each evaluated item's own documents (its
    distractor paragraphs, as MADARA's ``doc_source="item"`` reads them): a run of
    ``limit`` items embeds only those items' chunks, and an item's hits do not depend on
    which other items the run evaluates.  With a ``--bcas-corpus`` the corpus index
    serves both scopes.
    """

    mode: str = "bm25"
    k: int = 5
    candidates: int = 100
    phrase_boost: bool = True
    bigram_boost: float = 20.0
    trigram_boost: float = 60.0
    phrase_slop: int = 1
    fusion: str = "rrf"
    rrf_k: int = 60
    fusion_alpha: float = 0.5
    embedder: str = "minilm"
    reranker: str = "llm"
    chunk_tokens: int = 256
    chunk_overlap: int = 32
    dense_index: str = "flat"
    ivf_nlist: int = 0
    ivf_nprobe: int = 16
    pq_m: int = 0
    pq_nbits: int = 8
    hnsw_m: int = 32
    hnsw_ef_construction: int = 200
    hnsw_ef_search: int = 128
    scope: str = "collection"

    def __post_init__(self) -> None:
        if self.scope not in RETRIEVAL_SCOPES:
            raise ConfigError(f"retrieval scope must be one of {RETRIEVAL_SCOPES}, got {self.scope!r}")
        if self.mode not in RETRIEVAL_MODES:
            raise ConfigError(f"retrieval mode must be one of {tuple(RETRIEVAL_MODES.names())}, got {self.mode!r}")
        if self.k <= 0 or self.candidates <= 0:
            raise ConfigError("k and candidates must be > 0")
        if self.fusion not in ("rrf", "convex"):
            raise ConfigError(f"fusion must be 'rrf' or 'convex', got {self.fusion!r}")
        if self.chunk_overlap >= self.chunk_tokens:
            raise ConfigError("chunk_overlap must be smaller than chunk_tokens")


# The longest maxLength of a constrained string field: llama.cpp expands maxLength into
# nested grammar rules, and its sampler crashes on the grammar of a 1,024-character one.
THOUGHT_CHARS_LIMIT = 512
DEFAULT_THOUGHT_CHARS = 256  # the cap of GUARDED_LOOP
REPEATED_QUERY_RULES = ("search", "invalid")


@dataclass(frozen=True)
class AgentConfig:
    """Agent loop switches (BCAS §3.4): planning, reflection, action format.

    ``max_turns``: the bound on action turns.  ``None`` (default) derives it from the
    budgets (:func:`bcas.agent.budget.turn_bound`): in the paper's loop
    ``max_total_tokens`` (every action turn spends at least one completion token, so
    the token budget ends a trajectory first); with ``max_invalid_turns`` set,
    ``max_searches + max_invalid_turns`` with limited searches, and the safety limit
    ``MAX_TURNS_SAFETY`` (64 action turns) with unlimited ones.  An integer overrides it.

    ``thought_max_chars``: the longest ``thought`` a schema-constrained JSON action may
    write (:mod:`bcas.agent.protocol`).  ``None`` (default) leaves it unbounded: a
    plain string, one constant grammar rule whatever the budget, written under the
    turn's token allowance (what remains of ``max_total_tokens``), so a verbose model
    can spend its whole budget (BCAS §5.1).  A reply cut off by that allowance before
    its action is complete is an invalid turn whose note says so.  An integer caps
    the thought (at most ``THOUGHT_CHARS_LIMIT``: llama.cpp's grammar for a longer
    ``maxLength`` crashes the library; measured: 1,024 crashes, 512 does not).

    The loop rules below are not in the papers (BCAS §3.4: the loop "continues until
    the model calls the ready_to_answer tool or a budget is exhausted").  Their
    defaults are the paper's loop; :data:`GUARDED_LOOP` holds the former rules, which
    the project's own CPU grids (smoke, formats, evidence) keep:

    * ``repeated_query``: ``"search"`` (default) runs a query equal to an earlier one
      (case and spacing aside) like any other, costing a search; ``"invalid"`` does not
      run it and counts the turn as unusable (toward ``max_invalid_turns``).
    * ``max_invalid_turns``: ``None`` (default) never ends the loop for unusable
      turns; an integer ends it after that many (stop reason ``max_invalid_turns``).
    * ``exclude_seen``: ``False`` (default) lets a search return passages already
      shown; ``True`` leaves them out.

    Options beyond the paper, both off by default (an option left off is absent from
    :meth:`RunConfig.to_dict`, so it changes no existing configuration id):

    * ``cite``: the final answer also lists the ids of the passages it rests on
      (``{"answer": ..., "cite": [...]}``, at most ``CITE_MAX_ITEMS`` ids of passages the
      model was shown), scored as citation precision and recall against gold evidence
      (ALCE, Gao et al. 2023, §2.2, at document level: :mod:`bcas.metrics.trajectory`);
    * ``abstain``: action turns also offer an ``abstain`` tool; choosing it ends the
      trajectory with no answer (stop reason ``abstained``), graded *not attempted*
      (SimpleQA, Wei et al. 2024, §2: :mod:`bcas.grading.abstention`).
    """

    planning: bool = False
    reflection: bool = False
    reflect_every: int = 2
    action_format: str = "json"
    max_turns: int | None = None
    max_invalid_turns: int | None = None
    exclude_seen: bool = False
    constrained_answer: bool = True
    search_hints: bool = True
    assess: str = "none"
    thought_max_chars: int | None = None
    repeated_query: str = "search"
    cite: bool = False
    abstain: bool = False

    def __post_init__(self) -> None:
        if self.thought_max_chars is not None and not 8 <= self.thought_max_chars <= THOUGHT_CHARS_LIMIT:
            raise ConfigError(
                f"thought_max_chars must be None (unbounded) or 8..{THOUGHT_CHARS_LIMIT}, got {self.thought_max_chars}"
                " (a longer maxLength becomes a grammar that crashes llama.cpp)"
            )
        if self.action_format not in ACTION_FORMATS:
            raise ConfigError(f"action_format must be one of {ACTION_FORMATS}")
        if self.assess not in agent_tool_methods():
            raise ConfigError(f"agent assess must be one of {agent_tool_methods()}, got {self.assess!r}")
        if self.reflect_every <= 0:
            raise ConfigError("reflect_every must be > 0")
        if self.max_invalid_turns is not None and self.max_invalid_turns <= 0:
            raise ConfigError(f"max_invalid_turns must be > 0 or None (off), got {self.max_invalid_turns}")
        if self.repeated_query not in REPEATED_QUERY_RULES:
            raise ConfigError(f"repeated_query must be one of {REPEATED_QUERY_RULES}, got {self.repeated_query!r}")
        if self.max_turns is not None and self.max_turns <= 0:
            raise ConfigError(f"max_turns must be > 0 or None (derived from the budgets), got {self.max_turns}")


# The loop rules the paper does not state, as the suite had them before the paper's loop
# became the default (AgentConfig): a repeated query is not run and counts as unusable,
# three unusable turns end the loop, a search leaves out passages already shown, and the
# thought is capped.  The project's own CPU grids keep them (bcas.grids.paper).
GUARDED_LOOP: dict[str, Any] = {
    "repeated_query": "invalid",
    "max_invalid_turns": 3,
    "exclude_seen": True,
    "thought_max_chars": DEFAULT_THOUGHT_CHARS,
}


ASSESS_TASKS = ("factoid", "multi-hop", "fact-verification", "yes-no-conflict")
ASSESS_AGENTS = ("relevance", "consistency", "conflict")


@dataclass(frozen=True)
class AssessConfig:
    """MADARA treatment and its parameters (MADARA §4, Algorithms 1-2).

    ``method``: a registered treatment (``bcas.registry.TREATMENTS``) or ``madara``; ``madara`` is the routed pipeline
    (Algorithm 2), which needs a routing decision or RSC profile at run time.
    ``max_tokens`` caps a CoT assessment call (five steps + score),
    ``score_max_tokens`` a base assessment call, ``rescore_max_tokens`` an RSC
    re-scoring call and ``answer_max_tokens`` a generation call;
    ``cot_step_chars`` bounds each reasoning step under constrained decoding.
    ``nf_docs``: how many of the gathered documents No-Filter (and the router's EvalNF)
    gives the generator; ``None`` (default) is all of them, MADARA §5.3 (1): "NF: all
    documents to generator (standard RAG)".  ``pad_docs``: when retrieval returns fewer
    than ``n_docs`` documents (a query sharing few terms with a small collection), fill
    up to ``n_docs`` with other documents of the same collection in a seeded order, so
    every item chooses among ``n_docs`` (§5.5: "top-k=5 from 10 retrieved documents").
    ``temperature`` 0.6 is the paper's sampling temperature (MADARA §5.1); with
    the request seed fixed, a backend that honours seeds stays reproducible.
    ``task``: the generator prompt (factoid / FEVER label / yes-no); ``None``
    takes the dataset's task (``Dataset.task``: registered, the format's, or one
    inference over the whole file), never an item's gold answer.  ``rsc_agents``: the agents whose
    CoT scores the RSC probe perturbs (pooled); ``rsc_bootstrap``: bootstrap
    resamples over queries (MADARA Appendix G.2); ``probe_nf``: the probe also
    measures the No-Filter EM used by the router (Algorithm 2, line 6).
    """

    method: str = "madara"
    weights: tuple[float, float, float] = (0.4, 0.3, 0.3)
    k: int = 5
    n_docs: int = 10
    nf_docs: int | None = None
    pad_docs: bool = False
    doc_source: str = "retrieval"
    atf_kappa: float = 0.5
    rrf_c: int = 60
    tau_nf: float = 0.30
    rho1_threshold: float = 0.5
    calibration_n: int = 100
    max_tokens: int = 256
    excerpt_chars: int = 200
    score_max_tokens: int = 48
    rescore_max_tokens: int = 12
    answer_max_tokens: int = 24
    temperature: float = 0.6
    doc_chars: int = 1500
    json_schema: bool = True
    cot_step_chars: int = 100
    task: str | None = None
    rsc_agents: tuple[str, ...] = ASSESS_AGENTS
    rsc_bootstrap: int = 1000
    probe_nf: bool = True

    def __post_init__(self) -> None:
        if self.doc_source not in ("retrieval", "item"):
            raise ConfigError("doc_source must be 'retrieval' or 'item'")
        if self.k <= 0 or self.n_docs <= 0:
            raise ConfigError("k and n_docs must be > 0")
        if self.nf_docs is not None and self.nf_docs <= 0:
            raise ConfigError(f"nf_docs must be None (every gathered document) or > 0, got {self.nf_docs}")
        method = self.method.lower().replace("_", "-")
        if method not in assess_methods():
            raise ConfigError(f"assess method must be one of {assess_methods()}, got {self.method!r}")
        object.__setattr__(self, "method", method)
        if self.task is not None and self.task not in ASSESS_TASKS:
            raise ConfigError(f"assess task must be None or one of {ASSESS_TASKS}, got {self.task!r}")
        if not isinstance(self.rsc_agents, tuple):
            object.__setattr__(self, "rsc_agents", tuple(self.rsc_agents))
        if not self.rsc_agents or any(a not in ASSESS_AGENTS for a in self.rsc_agents):
            raise ConfigError(f"rsc_agents must be a non-empty subset of {ASSESS_AGENTS}, got {self.rsc_agents!r}")
        if min(self.max_tokens, self.score_max_tokens, self.rescore_max_tokens, self.answer_max_tokens) <= 0:
            raise ConfigError("max_tokens, score_max_tokens, rescore_max_tokens and answer_max_tokens must be > 0")
        if self.cot_step_chars <= 0:
            raise ConfigError("cot_step_chars must be > 0")
        if self.calibration_n <= 0 or self.rsc_bootstrap < 0:
            raise ConfigError("calibration_n must be > 0 and rsc_bootstrap >= 0")


BRIDGE_DIALECTS = ("openai", "mcp", "retriever")
"""The bridge's search-tool dialects (:mod:`bcas.bridge`): an OpenAI function schema, an MCP
server and the Search-R1/FlashRAG retriever API."""


@dataclass(frozen=True)
class BridgedAgent:
    """A user's agent that answers through the bridge (the ``agent`` run kind, :mod:`bcas.run.bridged`).

    Exactly one of ``callable`` (``"module:function"``, or the name of an agent registered in
    :data:`bcas.registry.AGENTS`), called with the question and the bridge's
    :class:`bcas.bridge.Endpoints` and returning the answer, and ``command`` (an argument
    list: the endpoints in environment variables, the question on stdin, the answer on
    stdout).  ``timeout_s``: the agent's wall-clock limit per item (past it, an error record).
    ``code``: files or folders holding the agent's code, hashed into the answer identity
    beside what bcas finds itself (a callable's module file; a command's file arguments, else
    its executable) (:func:`bcas.identity.agent_code_id`).  ``dialects``: the search tool's
    dialects served beside the chat endpoint (``mcp`` needs the ``agents`` extra).
    ``name``: the agent's name in labels (default: the function's or the command's).
    """

    callable: str = ""
    command: tuple[str, ...] = ()
    timeout_s: float = 300.0
    code: tuple[str, ...] = ()
    dialects: tuple[str, ...] = ("openai", "retriever")
    name: str = ""

    def __post_init__(self) -> None:
        for attr in ("command", "code", "dialects"):
            if not isinstance(getattr(self, attr), tuple):
                object.__setattr__(self, attr, tuple(getattr(self, attr)))
        if bool(self.callable) == bool(self.command):
            raise ConfigError("a bridged agent needs exactly one of callable ('module:function') and command")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0, got {self.timeout_s}")
        unknown = [d for d in self.dialects if d not in BRIDGE_DIALECTS]
        if unknown:
            raise ConfigError(f"dialects: unknown {unknown}; choose from {list(BRIDGE_DIALECTS)}")

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.callable:
            return self.callable.rsplit(":", 1)[-1]
        return "".join(c if c.isalnum() or c in "-_." else "-" for c in self.command[-1].rsplit("/", 1)[-1])

    @property
    def code_id(self) -> str:
        """The agent's code identity (:func:`bcas.identity.agent_code_id`)."""
        return agent_code_id(self.callable, self.command, self.code)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BridgedAgent:
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**fields)


# Fields added after records existed, left out of ``RunConfig.to_dict`` (and so of the
# configuration id) while at these values: a configuration that does not use them keeps
# the id it always had.
OPTIONAL_FIELDS: dict[str, dict[str, Any]] = {
    "agent": {"cite": False, "abstain": False},
    "retrieval": {"scope": "collection"},
}


@dataclass(frozen=True)
class RunConfig:
    """One evaluated configuration: budget, retrieval, agent and assessment."""

    budget: Budget = field(default_factory=Budget)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    assess: AssessConfig = field(default_factory=AssessConfig)
    seed: int = 0
    # The method beside the BCAS loop that answers under this configuration (bcas.methods; a grid
    # entry of a method's run kind sets it), "" for the loop and MADARA: part of the id, so two
    # methods at the same budget and retrieval are two configurations.  Left out of the id while "".
    method: str = ""
    # The user's agent that answers through the bridge (the ``agent`` run kind); ``None`` (and left out of
    # the id) otherwise.  Its code's identity joins the configuration id (:attr:`config_id`).
    bridged: BridgedAgent | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field, but the :data:`OPTIONAL_FIELDS` at their default (and an empty ``method``, no
        ``bridged`` agent) left out."""
        data = dataclasses.asdict(self)
        if not data["method"]:
            del data["method"]
        if data["bridged"] is None:
            del data["bridged"]
        for part, defaults in OPTIONAL_FIELDS.items():
            for name, default in defaults.items():
                if data[part].get(name) == default:
                    del data[part][name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        assess = dict(data.get("assess", {}))
        if "weights" in assess:
            assess["weights"] = tuple(assess["weights"])
        return cls(
            budget=Budget(**data.get("budget", {})),
            retrieval=RetrievalConfig(**data.get("retrieval", {})),
            agent=AgentConfig(**data.get("agent", {})),
            assess=AssessConfig(**assess),
            seed=data.get("seed", 0),
            method=str(data.get("method") or ""),
            bridged=BridgedAgent.from_dict(data["bridged"]) if data.get("bridged") else None,
        )

    @property
    def config_id(self) -> str:
        """Hash of the canonical JSON form; an agent option that is on adds its templates' hash
        (:data:`bcas.identity.OPTION_PROMPTS`), so rewording an option's prompt is another configuration."""
        data: dict[str, Any] = self.to_dict()
        options = {o: option_prompt_hash(o) for o in ("cite", "abstain") if getattr(self.agent, o)}
        if options:
            data["option_prompts"] = options
        if self.bridged is not None:  # the agent's code: changing it is another configuration
            data["agent_code"] = self.bridged.code_id
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """Short readable label such as ``hs+r/s3/t16k/plan``."""
        mode = str(RETRIEVAL_MODES.meta(self.retrieval.mode, "label", self.retrieval.mode))
        if self.retrieval.mode == "bm25" and not self.retrieval.phrase_boost:
            mode = "bm25-plain"
        s = self.budget.max_searches
        parts = [mode, "sinf" if s is None else f"s{s}", "t" + _short_tokens(self.budget.max_total_tokens)]
        if self.agent.planning:
            parts.append("plan")
        if self.agent.reflection:
            parts.append("rf")
        if self.agent.action_format != "json":
            parts.append(self.agent.action_format)
        if self.agent.assess != "none":
            parts.append(self.agent.assess)
        parts += [name for name in ("cite", "abstain") if getattr(self.agent, name)]
        return "/".join(parts)


# Configuration fields a run option sets, named as the option is (``--bcas-rerank-candidates``:
# ``rerank_candidates``), so a refusal names what the user chose rather than the field's path.
OPTION_FIELDS: dict[str, str] = {
    "retrieval.candidates": "rerank_candidates",
    "retrieval.embedder": "embedder",
    "retrieval.reranker": "reranker",
    "assess.calibration_n": "calibration_n",
}


def config_leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration dict flattened to ``part.field`` -> value."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(config_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def field_name(path: str) -> str:
    """A configuration field as a refusal names it: the option that sets it, with its path
    (``rerank_candidates (retrieval.candidates)``), else the path."""
    option = OPTION_FIELDS.get(path)
    return f"{option} ({path})" if option else path


def config_differences(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str] = ("A", "B")) -> list[str]:
    """Every field in which two configurations (``RunConfig.to_dict`` forms, as records carry
    them) differ, in words with both values: ``rerank_candidates (retrieval.candidates)
    differs: A 10 vs B 100`` (``names``: what to call the two sides); a field only one side
    names shows the other as ``(unset)``."""
    la, lb = config_leaves(a), config_leaves(b)
    out = []
    for path in sorted(set(la) | set(lb)):
        va, vb = la.get(path, "(unset)"), lb.get(path, "(unset)")
        if va != vb:
            out.append(f"{field_name(path)} differs: {names[0]} {va} vs {names[1]} {vb}")
    return out


def _short_tokens(n: int) -> str:
    if n % 1000 == 0:
        return f"{n // 1000}k"
    if n >= 1000 and n % 100 == 0:
        return f"{n / 1000:g}k"
    return str(n)
