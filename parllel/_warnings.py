"""Warnings that point at the user's code, not at the parllel line that issued them.

A warning issued deep inside a training loop (``Runner.run`` -> ``_run`` ->
``_warn_partial_batch``) would otherwise be reported at a line of parllel,
whatever ``stacklevel`` a fixed call depth assumed; callers reach the same
code through different paths (``run()`` directly, or through
``patterns.run_training``).
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _inside_parllel(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the nearest frame outside parllel.

    The warning's file and line are those of the user's code that called into
    parllel (e.g. the line calling ``runner.run()`` or ``run_training``), so
    warning filters by module and the printed location both refer to it.

    Example:
        >>> warn_at_caller("the replay dropped steps early", UserWarning)
    """
    frame: FrameType | None = sys._getframe(0)  # this function: stacklevel 1
    level = 1
    while frame is not None and _inside_parllel(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)
