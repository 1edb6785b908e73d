"""``python -m bcas.gating write RUN_DIR OUT.json``: a baseline file from a run (see :mod:`bcas.gating.baseline`)."""

from bcas.gating.baseline import main

if __name__ == "__main__":
    raise SystemExit(main())
