"""Warnings that point at the user's code, not at the parllel line that issued them.

A warning issued deep inside a training loop (``Runner.run`` -> ``_run`` ->
``_warn_partial_batch``) would otherwise be reported at a line of parllel,
whatever ``stacklevel`` a fixed call depth assumed; callers reach the same
code through different paths (``run()`` directly, or through
``runners.run_training``).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from types import FrameType

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _library_dirs() -> tuple[str, tuple[str, ...]]:
    """The standard library's directory, and the installed packages' ones inside it."""
    paths = sysconfig.get_paths()
    packages = {
        os.path.abspath(paths[key]) + os.sep
        for key in ("purelib", "platlib")
        if key in paths
    }
    return os.path.abspath(paths["stdlib"]) + os.sep, tuple(packages)


_STDLIB_DIR, _PACKAGE_DIRS = _library_dirs()


def _inside_parllel(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def _inside_stdlib(filename: str) -> bool:
    """The standard library's own code: frozen modules (``<frozen runpy>``, the
    import machinery) and its files, not the installed packages beside them."""
    if filename.startswith("<frozen "):
        return True
    path = os.path.abspath(filename)
    return path.startswith(_STDLIB_DIR) and not path.startswith(_PACKAGE_DIRS)


def caller_stacklevel() -> int:
    """The ``stacklevel`` of the user's code that called into parllel, for a
    ``warnings.warn`` made by the function calling this one.

    The nearest frame outside parllel and the standard library (``runpy``,
    ``importlib``, ``copy``, ... only pass calls on); with none (``python -m
    parllel.bench``: parllel's own entry point under ``runpy``) the outermost
    parllel frame, so a warning never points at ``<frozen runpy>``.
    """
    frame: FrameType | None = sys._getframe(1)  # the warning function: level 1
    level, outermost = 1, 1
    while frame is not None:
        filename = frame.f_code.co_filename
        if _inside_parllel(filename):
            outermost = level
        elif not _inside_stdlib(filename):
            return level
        frame = frame.f_back
        level += 1
    return outermost


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the user's code.

    The warning's file and line are those of the user's code that called into
    parllel (e.g. the line calling ``runner.run()`` or ``run_training``), so
    warning filters by module and the printed location both refer to it (see
    :func:`caller_stacklevel`).

    Example:
        >>> warn_at_caller("the replay dropped steps early", UserWarning)
    """
    warnings.warn(message, category, stacklevel=caller_stacklevel())
