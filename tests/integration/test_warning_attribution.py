"""parllel's warnings point at the user's code: never at parllel's own lines,
nor at the standard library's (``<frozen runpy>`` under ``python -m``,
``copy``, ``importlib``) that only passed the call on."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy

import parllel
from parllel._warnings import _inside_stdlib, warn_at_caller

PARLLEL_DIR = Path(parllel.__file__).resolve().parent


def _parllel_code(source: str) -> dict:
    """Functions compiled as if they were parllel's own (a file in its package)."""
    namespace = {"warn_at_caller": warn_at_caller}
    exec(compile(source, str(PARLLEL_DIR / "_attribution_probe.py"), "exec"), namespace)
    return namespace


class Warns:
    """A parllel object whose __deepcopy__ (called by the stdlib's copy) warns."""

    __deepcopy__ = _parllel_code(
        "def deepcopy(self, memo):\n"
        "    warn_at_caller('probe', UserWarning)\n"
        "    return self\n"
    )["deepcopy"]


def test_stdlib_frames_between_parllel_and_the_user_are_skipped():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line_of_next_statement()
        copy.deepcopy(Warns())
    (warning,) = caught
    assert warning.filename == __file__
    assert warning.lineno == line


def _line_of_next_statement() -> int:
    import inspect

    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno + 1


def test_frozen_and_stdlib_files_are_stdlib_but_installed_packages_are_not():
    assert _inside_stdlib("<frozen runpy>")
    assert _inside_stdlib(copy.__file__)
    assert not _inside_stdlib(__file__)
    assert not _inside_stdlib(numpy.__file__)  # installed beside the stdlib
