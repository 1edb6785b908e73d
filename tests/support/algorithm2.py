"""MADARA's routing rule read from the paper's own text (Algorithm 2, lines 7-15; §5).

The router tests derive their expected route from this text, not from
``bcas.assess.router``: ``ALGORITHM_2`` is lines 7-15 of Algorithm 2 as they stand in
the paper's text (``shared/papers/madara-isolate-or-score.txt``, Appendix E) and
``THRESHOLDS`` the sentence of §5 that fixes tau_NF.  ``paper_route`` interprets those
lines: each ``if``/``else if`` compares one diagnostic with a number (or with tau_NF)
and the first true branch's ``mode <- X`` is the route.  ``quotes_match_the_paper``
checks that both quotes are still verbatim in the paper.
"""

from __future__ import annotations

import operator
import re
from pathlib import Path

ALGORITHM_2 = r"""7:if\text{EM}_{\text{NF}}<\tau_{\text{NF}}then
8:\textit{mode}\leftarrow\text{PDE}
9:else if\rho^{*}>-1.0 then
10:\textit{mode}\leftarrow\text{SDA}
11:else if\hat{\rho}_{1}<0.5 then
12:\textit{mode}\leftarrow\text{CoT}
13:else
14:\textit{mode}\leftarrow\text{ATF}
15:end if"""

THRESHOLDS = r"routing thresholds (\rho^{*}=-1.0, \hat{\rho}_{1}=0.5, \tau_{\text{NF}}=30\%)"

# The paper's symbols for the three diagnostics, and the argument each one names.
SYMBOLS = {r"\text{EM}_{\text{NF}}": "em_nf", r"\rho^{*}": "rho_star", r"\hat{\rho}_{1}": "rho_1"}
_TAU = r"\tau_{\text{NF}}"
_OPS = {"<": operator.lt, ">": operator.gt}
_IF = re.compile(r"^\d+:(?:else )?if(?P<lhs>.+?)(?P<op>[<>])(?P<rhs>.+?)\s*then$")
_MODE = re.compile(r"^\d+:\\textit\{mode\}\\leftarrow\\text\{(?P<mode>\w+)\}$")


def tau_nf() -> float:
    """tau_NF as §5 states it (a percentage in the text, a fraction here)."""
    match = re.search(re.escape(_TAU) + r"=(?P<pct>[\d.]+)\\%", THRESHOLDS)
    assert match, THRESHOLDS
    return float(match.group("pct")) / 100


def _branches() -> list[tuple[str | None, str | None, float | None, str]]:
    """(argument, operator, threshold, mode) per branch; the final ``else`` has ``None``s."""
    branches: list[tuple[str | None, str | None, float | None, str]] = []
    condition: tuple[str | None, str | None, float | None] | None = None
    for line in ALGORITHM_2.splitlines():
        if m := _IF.match(line):
            rhs = m.group("rhs").strip()
            condition = (SYMBOLS[m.group("lhs").strip()], m.group("op"), tau_nf() if rhs == _TAU else float(rhs))
        elif re.match(r"^\d+:else$", line):
            condition = (None, None, None)
        elif m := _MODE.match(line):
            assert condition is not None, line
            branches.append((*condition, m.group("mode")))
            condition = None
        else:
            assert re.match(r"^\d+:end if$", line), f"unreadable line of Algorithm 2: {line!r}"
    return branches


def paper_threshold(name: str) -> float:
    """The number Algorithm 2 compares argument ``name`` with (tau_NF read from §5)."""
    for arg, _, threshold, _ in _branches():
        if arg == name and threshold is not None:
            return threshold
    raise KeyError(name)


def paper_route(em_nf: float, rho_star: float, rho_1: float) -> str:
    """The mode Algorithm 2 (lines 7-15) assigns to these diagnostics."""
    values = {"em_nf": em_nf, "rho_star": rho_star, "rho_1": rho_1}
    for name, op, threshold, mode in _branches():
        if name is None or _OPS[op](values[name], threshold):  # type: ignore[index]
            return mode
    raise AssertionError("Algorithm 2 has no final else")


def paper_text() -> Path | None:
    """The paper's text beside the repository (``shared/papers``), if present."""
    root = Path(__file__).resolve().parents[2]
    for folder in (root / "shared" / "papers", root.parent / "shared" / "papers"):
        path = folder / "madara-isolate-or-score.txt"
        if path.is_file():
            return path
    return None


def quotes_match_the_paper(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    quoted = ALGORITHM_2.splitlines()
    start = lines.index(quoted[0])
    assert lines[start : start + len(quoted)] == quoted, "Algorithm 2 lines 7-15 changed in the paper"
    assert THRESHOLDS in text, "the thresholds sentence of §5 changed in the paper"
