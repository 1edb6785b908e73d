"""Reasoning-Score Coupling probe (MADARA §3, Appendix F, Appendix G.2).

On a label-free calibration set the agents score every document with CoT
reasoning (the *normal* scores).  Each reasoning chain is then perturbed at three
levels of increasing severity (§3.1, Appendix F.1) and the agent re-scores the
same document given the perturbed reasoning:

1. *Shuffled*: the chain's sentences permuted with a fixed seed
   (``shuffle_sentences``);
2. *Contradicted*: antonym substitution of the listed polarity words, both
   directions, and inverted numeric quality phrases ("high quality" ->
   "low quality", "score of 4" -> "score of 1") (``contradict``);
3. *Random*: the chain replaced by the chain of a different (query, document)
   pair drawn uniformly (``random_chain``).

rho_hat_k = Spearman(s_normal, s_Pk) pooled over all calibration (query,
document, agent) triples (Eq. 1, Appendix F.2); rho* = Spearman([1, 2, 3],
[rho_hat_1, rho_hat_2, rho_hat_3]) (Eq. 2, ``trend_coefficient``); the pair is
*quality-ordered* iff rho* = -1, else *stochastic*; a quality-ordered pair is
*weakly* coupled if rho_hat_1 < 0.5 and *strongly* coupled otherwise (§3.2);
rho_bar = mean of the three rho_hat_k (Eq. 4, Appendix F.4).  Stability: 1,000
bootstrap resamples over queries (Appendix G.2) and the split-half check
(Appendix F.3).  The No-Filter EM of the calibration set (Algorithm 2, line 6,
the only step that uses labels) completes the router's inputs.

Conventions (defined here because the paper leaves them open):

- ``spearman`` ranks ties by their average rank (scipy's ``spearmanr``); when
  either side is constant or fewer than two pairs exist the correlation is
  undefined and ``spearman`` returns 0.0 (no evidence of coupling), never NaN.
- ``trend_coefficient`` breaks ties between the three rho_hat_k by level order
  (the earlier level gets the lower rank), so a tie never counts as degradation
  and rho* always lies in {-1, -0.5, 0, 0.5, 1} (average ranks would give
  +/-0.866 for a two-way tie, outside the paper's five values); e.g. rho_hat_2 ==
  rho_hat_3 < rho_hat_1 gives -0.5, the paper's Gemma-2 x CONFLICTS case
  (Table 13).  Three equal values carry no trend information and give 0.0.
- The normal score is the score of the CoT call itself; a triple enters rho_hat_k
  only if both its normal and its level-k score were parsed (missing scores are
  counted in the profile, never imputed).

Modules: :mod:`~bcas.assess.rsc.stats` (Spearman, rho*, classes),
:mod:`~bcas.assess.rsc.perturb` (the three levels), :mod:`~bcas.assess.rsc.profile`
(the profile, its statistics and its JSON file) and :mod:`~bcas.assess.rsc.probe`
(the model calls).
"""

from bcas.assess.rsc.perturb import (
    ANTONYMS,
    POLARITY_PAIRS,
    contradict,
    contradict_steps,
    random_chain,
    shuffle_sentences,
    split_sentences,
)
from bcas.assess.rsc.probe import ProbeRun, probe, probe_run, profile_id_for
from bcas.assess.rsc.profile import (
    RSCProfile,
    Triple,
    bootstrap_stability,
    pooled_rhos,
    profile_from_triples,
    split_half,
)
from bcas.assess.rsc.stats import (
    LEVEL_NAMES,
    QUALITY_ORDERED,
    STOCHASTIC,
    TREND_VALUES,
    classify,
    coupling_state,
    spearman,
    trend_coefficient,
)

__all__ = [
    "ANTONYMS",
    "LEVEL_NAMES",
    "POLARITY_PAIRS",
    "QUALITY_ORDERED",
    "STOCHASTIC",
    "TREND_VALUES",
    "ProbeRun",
    "RSCProfile",
    "Triple",
    "bootstrap_stability",
    "classify",
    "contradict",
    "contradict_steps",
    "coupling_state",
    "pooled_rhos",
    "probe",
    "probe_run",
    "profile_from_triples",
    "profile_id_for",
    "random_chain",
    "shuffle_sentences",
    "spearman",
    "split_half",
    "split_sentences",
    "trend_coefficient",
]
