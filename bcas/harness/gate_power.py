"""``python -m bcas.harness.gate_power``: the former name of ``python -m bcas.gating.power``
(:mod:`bcas.gating.power`), kept so scripts that use it work."""

from __future__ import annotations

from bcas.gating.power import main as power_main


def main(argv: list[str] | None = None) -> int:
    return power_main(argv, prog="python -m bcas.harness.gate_power")


if __name__ == "__main__":
    raise SystemExit(main())
