"""``python -m bcas.harness.gate write RUN_DIR OUT.json``: the former name of
``python -m bcas.gating write`` (:mod:`bcas.gating.baseline`), kept so scripts that use it work."""

from __future__ import annotations

from bcas.gating.baseline import main as write_main


def main(argv: list[str] | None = None) -> int:
    return write_main(argv, prog="python -m bcas.harness.gate")


if __name__ == "__main__":
    raise SystemExit(main())
