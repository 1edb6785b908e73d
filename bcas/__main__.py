"""``python -m bcas``: the ``bcas`` command (:mod:`bcas.cli`)."""

from bcas.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
