"""Methods beside the BCAS loop: the baselines the BCAS paper leaves out (BCAS §6.1, §7).

``closed_book`` (the model alone), ``retrieve_read`` (Lewis et al. 2020), ``iter_retgen``
(Shao et al. 2023), ``ircot`` (Trivedi et al. 2023) and ``self_ask`` (Press et al. 2023),
each one registration (:func:`register_method`: a method and a run kind of the same name)
answering an item on the loop's ledger and budgets (:class:`MethodRun`).
"""

from bcas.methods.base import (
    METHOD_STOP_REASONS,
    MethodError,
    MethodRun,
    TokensSpent,
    answer_of_method,
    register_method,
    run_method,
)

__all__ = [
    "METHOD_STOP_REASONS",
    "MethodError",
    "MethodRun",
    "TokensSpent",
    "answer_of_method",
    "register_method",
    "run_method",
]
