"""The table of bcas options: (name, kind, default, help).

Each is ``--bcas-NAME`` on the command line and ``bcas_NAME`` as an ini option (the pytest
front door, :mod:`bcas.harness.settings`), and the keyword argument ``NAME`` with ``_`` for
``-`` of :func:`bcas.evaluate` (the Python front door).  Both hand the raw values to
:func:`bcas.run.settings.build_settings`, which checks them once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

OptionKind = Literal["append", "str", "int", "float", "bool"]
# A raw option value: a command-line string, an ini value, a keyword argument or a default.
RawValue = str | int | float | bool | list[str] | None
Option = tuple[str, OptionKind, RawValue, str]


class OptionError(ValueError):
    """A bad option value; ``option`` is its name (``limit``), ``None`` when the message names it itself.

    ``str()`` spells the option as on the command line (``--bcas-limit: ...``);
    :meth:`for_argument` as the keyword argument of :func:`bcas.evaluate` (``limit: ...``).
    """

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.option = option

    def __str__(self) -> str:
        return f"--bcas-{self.option}: {self.message}" if self.option else self.message

    def for_argument(self) -> str:
        return f"{self.option.replace('-', '_')}: {self.message}" if self.option else self.message


OPTIONS: list[Option] = [
    # (name, kind, default, help)
    (
        "model",
        "append",
        None,
        "model to evaluate (repeatable): BACKEND:MODEL (embedded:path.gguf, openai:qwen3-8b, "
        "vllm:Qwen/Qwen3-8B, mock:gold|verbose|random), a bare backend name for its default "
        "model, or a plain GGUF path / served name / HF id of --bcas-backend; default: the "
        "backend's default (embedded: SmolLM2-135M-Instruct)",
    ),
    (
        "backend",
        "str",
        "embedded",
        "model backend for a plain --bcas-model: a registered backend (embedded, openai, "
        "vllm, mock, or one a plugin registers)",
    ),
    (
        "base-url",
        "append",
        None,
        "base URL of an OpenAI-compatible server (openai backend); repeat it or give a "
        "comma list for several servers of one model (requests go to the least busy, a "
        "failing one is left for a while)",
    ),
    ("api-key-env", "str", None, "name of the environment variable holding the server's API key"),
    (
        "datasets",
        "str",
        None,
        "comma-separated dataset names, file paths (layout detected) or FORMAT:PATH, e.g. "
        "flashrag:nq/dev.jsonl, hotpotqa:hotpot_dev_distractor_v1.json (bcas data check "
        "--formats lists them; default: each grid's datasets)",
    ),
    (
        "corpus",
        "str",
        None,
        "passage corpus searched by every item instead of its own documents: a FlashRAG corpus "
        "JSONL, BEIR corpus.jsonl, our documents JSONL or FEVER wiki-pages/ (PATH or FORMAT:PATH)",
    ),
    (
        "embedder",
        "str",
        None,
        "embedder of the dense and hybrid retrieval cases: minilm (CPU default), bge-m3 "
        "(BCAS §3.5; gpu extra), bge-m3:PATH or sentence-transformers:PATH (a local folder)",
    ),
    (
        "reranker",
        "str",
        None,
        "reranker of the hybrid + re-ranking cases: llm (the model under test, CPU default), "
        "bge-reranker-v2-m3 (BCAS §3.5; gpu extra), bge-reranker-v2-m3:PATH or "
        "cross-encoder:PATH (a sentence-transformers CrossEncoder saved in a local folder)",
    ),
    (
        "rerank-candidates",
        "int",
        None,
        "candidates the reranker re-scores in the hybrid + re-ranking cases (default: each "
        "grid's, BCAS §3.5's 100): fewer for a CPU run whose reranker is the model under test "
        "(llm: one model call per candidate); part of those configurations, so of their ids",
    ),
    (
        "shard",
        "str",
        None,
        "run only shard K of N (K/N, e.g. 1/4): the items whose id hashes to K, so N machines or "
        "CI jobs each run a share; join the shard folders with bcas merge. auto "
        "(or auto/N): K and N from a Slurm array (SLURM_ARRAY_TASK_ID, _COUNT, _MIN), a Kubernetes "
        "Indexed Job (JOB_COMPLETION_INDEX, N from BCAS_SHARD_COUNT) or BCAS_SHARD_INDEX/"
        "BCAS_SHARD_COUNT (0-based index; Ray), writing into REPORT/shard-K-of-N/",
    ),
    (
        "retriever",
        "str",
        None,
        "search engine for the BM25 cases: a Milvus server's URL (http://HOST:19530; a "
        "cluster, or bcas index milvus), shared by every worker; its token, "
        "if any, in $BCAS_RETRIEVER_TOKEN",
    ),
    (
        "grid",
        "str",
        "smoke",
        "comma-separated grids: smoke, search_scaling, context_scaling, ablation, madara, madara_heldout, "
        "rsc, musique, sda_vs_rrf, retrieval_robustness, cross_encoder, formats (or one a plugin registers)",
    ),
    (
        "limit",
        "str",
        None,
        "items per dataset: a whole number >= 1 (a seeded subset, the same on every machine) or "
        "all (every item); default: the grid's limit (smoke: 2), else 20",
    ),
    ("seed", "int", 0, "seed of the item subset and of sampling"),
    (
        "epochs",
        "int",
        1,
        "run each item this many times with distinct recorded sampling seeds (for sampled "
        "decoding); accuracy is the mean of per-item means, intervals clustered by item",
    ),
    (
        "calibration-n",
        "int",
        None,
        "calibration items of the RSC probe and of the routed MADARA pipeline (MADARA "
        "Algorithm 2's C; default: each grid's AssessConfig.calibration_n, 100): a smaller N "
        "for a quick run; part of those configurations, so of their ids",
    ),
    (
        "concurrency",
        "int",
        None,
        "items of one case in flight at once (default: 1 for the embedded backend, whose "
        "single in-process model then reuses each conversation's cached prefix; 8 otherwise)",
    ),
    ("judge", "str", "none", "LLM judge: none | same | BACKEND[:MODEL] (e.g. openai:gpt-4o-mini)"),
    (
        "judge-base-url",
        "str",
        None,
        "base URL of the judge's OpenAI-compatible server (default: the first served model's servers)",
    ),
    ("judge-repeats", "int", 1, "ask the judge this many times per item and record agreement"),
    (
        "judge-three-way",
        "bool",
        False,
        "the judge grades correct / incorrect / not attempted (SimpleQA) under its own prompt (another grade id)",
    ),
    (
        "require-judge",
        "bool",
        False,
        "usage error at start when a paper grid graded by an LLM judge (BCAS §3.6) runs without "
        "--bcas-judge (default: it runs and its summary says the primary metric is SQuAD EM, a proxy)",
    ),
    (
        "holm-scope",
        "str",
        None,
        "Holm families of the summaries' paired comparisons: grid (each family pooled over the "
        "run's models x datasets, MADARA Table 14) | cell (per model x dataset); default: each "
        "grid's own (grid for every built-in grid)",
    ),
    (
        "prices",
        "str",
        None,
        "price sheet: a TOML path, PATH:SHEET, a sheet name of the sheet installed with bcas "
        "(list, batch), or none (no pricing: cost_usd null); default: the installed sheet "
        "bcas/resources/prices.toml, its default sheet",
    ),
    ("baseline", "str", None, "baseline for the regression gate: a run directory, records.jsonl or baseline JSON"),
    ("min-accuracy", "float", None, "fail a case whose accuracy in its grid's primary metric is below this floor"),
    (
        "gate-metric",
        "str",
        None,
        "pass/fail metric the regression gate (and --bcas-min-accuracy) uses instead of each grid's "
        "primary metric: a name registered in bcas.grading.outcomes.METRICS (correct_em, strict_em, "
        "judge_verdict, attempted, em_given_attempted, evidence_complete, gold_found, ...)",
    ),
    ("alpha", "float", 0.05, "significance level of the regression gate"),
    (
        "gate-family",
        "str",
        "session",
        "cases one Holm correction of the gate covers: session (default: a CI run is "
        "one decision, its false-alarm rate stays at alpha however many cases run) | "
        "grid | case",
    ),
    (
        "max-drop",
        "float",
        0.0,
        "regression gate tolerance in accuracy points: fail a case only when its drop is "
        "significantly larger (Tango score test)",
    ),
    (
        "gate-strict",
        "bool",
        False,
        "usage error before anything runs when a gated case cannot fail at --bcas-alpha "
        "(too few paired items for its Holm threshold)",
    ),
    (
        "gate-sequential",
        "bool",
        False,
        "sequential regression gate: items in a seeded random order, an anytime-valid test after "
        "every item, a case's remaining items stopped once it is decided (docs/gating.md)",
    ),
    (
        "gate-fallback-share",
        "float",
        None,
        "with --bcas-gate-sequential: the share of --bcas-alpha the fixed-n test at N keeps for a "
        "case the e-process leaves undecided, the e-process spending the rest; in [0, 1) "
        "(default 0.2; 0: no fixed-n test at N; docs/gating.md)",
    ),
    ("report", "str", None, "run directory for records and reports (default reports/<grids>)"),
    ("allow-errors", "bool", False, "do not fail a case whose items end with stop_reason=error"),
    ("no-cache", "bool", False, "disable the generation cache"),
    (
        "allow-mismatch",
        "bool",
        False,
        "let the regression gate compare answers whose model fingerprint or prompt "
        "hash differ from the baseline's (the override is written into the report)",
    ),
    (
        "gate-new-model",
        "bool",
        False,
        "gate a new model against the baseline's model: the model fingerprints may differ, "
        "while dataset items, configuration and prompt hash must still match",
    ),
    ("no-preflight", "bool", False, "skip the session-start check of every server endpoint (models and judge)"),
    (
        "require-prices",
        "bool",
        False,
        "stop at session start when the price sheet has no price for a model "
        "(default: such a model's records get cost_usd null and a warning)",
    ),
    (
        "max-cost",
        "float",
        None,
        "stop starting new items once the session's priced spend (US dollars, under the "
        "price sheet) would pass this cap; the stop is in the report, rerunning resumes",
    ),
    (
        "estimate",
        "bool",
        False,
        "print the expected calls, tokens and cost of the selected cases (price sheet and "
        "generation cache) without running them",
    ),
]


KINDS: dict[str, OptionKind] = {name: kind for name, kind, _, _ in OPTIONS}
DEFAULTS: dict[str, RawValue] = {name: default for name, _, default, _ in OPTIONS}


def coerce(name: str, value: RawValue) -> RawValue:
    """``value`` of option ``name`` as its kind (``int``, ``float``, ``bool``); a bad one raises OptionError."""
    kind = KINDS[name]
    if value is None or isinstance(value, list):
        return value
    try:
        if kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if kind == "bool":
            return bool(value) if not isinstance(value, str) else value.lower() in ("1", "true", "yes")
    except ValueError:
        expected = {"int": "a whole number", "float": "a number"}.get(kind, kind)
        raise OptionError(f"expected {expected}, got {value!r}", name) from None
    return value


def mistyped_option(args: Sequence[str], known: Iterable[str], prefix: str = "--bcas-") -> str | None:
    """The first ``--bcas-*`` argument of ``args`` that is no option in ``known``, with the closest
    known one (``--bcas-gird``: did you mean ``--bcas-grid``?); ``None`` when all are known.

    The value after ``=`` is never shown: it may be a key pasted in the wrong place.
    """
    from bcas.registry import did_you_mean

    names = sorted({name for name in known if name.startswith(prefix)})
    for arg in args:
        if arg == "--":
            break
        flag = arg.split("=", 1)[0]
        if flag.startswith(prefix) and flag not in names:
            return f"unknown option {flag}{did_you_mean(flag, names)}; pytest --help lists the {prefix}* options"
    return None
