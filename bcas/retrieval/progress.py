"""When the retrieval layer draws tqdm progress bars: only when asked and only on a terminal.

A bar redraws itself with carriage returns; in a CI log, a file or a pipe every redraw
stays as text, so a standard error that is not a terminal gets no bar.
"""

from __future__ import annotations

import sys


def bars_off(progress: bool) -> bool:
    """tqdm's ``disable``: true unless ``progress`` is asked for and standard error is a terminal."""
    return not progress or not sys.stderr.isatty()
