"""Run kinds (bcas.run.pipelines): per-item kinds and whole-case kinds are different
types, so asking one for the other's work is a clear error, and a kind missing its
work cannot be made at all."""

from __future__ import annotations

import pytest

from bcas.registry import RUN_KINDS, RegistryError, per_item
from bcas.run.pipelines import BCAS, RSC, ItemKind, WholeCaseKind, item_kind, whole_case_kind


def test_built_in_kinds_are_the_type_their_metadata_says() -> None:
    for name in RUN_KINDS:
        kind = RUN_KINDS.get(name)
        assert isinstance(kind, ItemKind if per_item(name) else WholeCaseKind), name
    assert item_kind("bcas") is BCAS and whole_case_kind("rsc") is RSC


def test_asking_a_kind_for_the_other_kinds_work_names_it() -> None:
    with pytest.raises(RegistryError, match="run kind 'rsc' answers no single items"):
        item_kind("rsc")
    with pytest.raises(RegistryError, match="run kind 'bcas' runs item by item"):
        whole_case_kind("bcas")


def test_a_kind_without_its_work_cannot_be_made() -> None:
    class Empty(ItemKind):
        pass

    class Half(WholeCaseKind):
        def whole_items(self, session: object, case: object, config: object) -> int:
            return 0

    with pytest.raises(TypeError, match="answer"):
        Empty()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="run_whole"):
        Half()  # type: ignore[abstract]


def test_calibration_n_reaches_only_the_cases_that_draw_calibration_items() -> None:
    """``--bcas-calibration-n``: the RSC probe and the routed pipeline probe N items, under a
    configuration id of their own; a treatment that reads no calibration keeps its id."""
    from types import SimpleNamespace

    from bcas.grids import GRIDS
    from bcas.run.plan import expand_cases

    def cases(n: int | None) -> dict[str, object]:
        settings = SimpleNamespace(
            grids=["madara", "rsc"],
            datasets=None,
            models=[SimpleNamespace(label="m")],
            embedder=None,
            reranker=None,
            rerank_candidates=None,
        )
        settings.calibration_n = n
        return {f"{c.grid}/{c.dataset}/{c.entry.label}": c.entry.config for c in expand_cases(settings)}  # type: ignore[arg-type]

    full, quick = cases(None), cases(3)
    assert GRIDS.get("madara").entries[-1].config.assess.calibration_n == 100
    # A case that probes 3 instead of the grid's 100 says so in its label (/cal3); the others keep theirs.
    changed = {key for key in full if key not in quick}
    assert changed == {
        "madara/conflictqa/madara/madara",
        "madara/fever/madara/madara",
        "rsc/conflictqa/rsc",
        "rsc/fever/rsc",
    }
    assert all(full[key].config_id == quick[key].config_id for key in full if key in quick)  # type: ignore[attr-defined]
    for key in changed:
        assert quick[f"{key}/cal3"].assess.calibration_n == 3  # type: ignore[attr-defined]
        assert quick[f"{key}/cal3"].config_id != full[key].config_id  # type: ignore[attr-defined]
