"""Detect worker processes started from unguarded top-level code of the main script.

Under the ``spawn`` and ``forkserver`` start methods every new process first
re-runs the main script (as module ``__mp_main__``) to find the functions it
was given. A script that builds its cages at top level, without
``if __name__ == "__main__":``, would then build cages again inside each
worker, which multiprocessing refuses: the worker dies during start-up and the
cause is buried in its error output. :func:`check_main_guard` sees this
before any process starts, from the line of the main script that is running.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
from types import FrameType, ModuleType

from parllel.errors import ConfigError

GUARD = 'if __name__ == "__main__":'


def check_main_guard(start_method: str) -> None:
    """Raise ConfigError if starting workers now would re-run this call in them.

    That is the case when ``start_method`` re-imports the main script in
    children (``spawn``, ``forkserver``) and the caller runs, directly or
    through functions it called, at a line of the main script's top-level
    code that is not inside an ``if __name__ == "__main__":`` block.
    """
    if start_method not in ("spawn", "forkserver"):
        return
    main = sys.modules.get("__main__")
    if main is None:
        return
    source = _rerun_source(main)
    if source is None:
        return
    frame = _main_module_frame(main)
    if frame is None or not _same_file(frame.f_code.co_filename, source):
        return
    filename, line = frame.f_code.co_filename, frame.f_lineno
    guarded = guarded_lines(filename)
    if guarded is None or line in guarded:
        return
    code = linecache.getline(filename, line).strip()
    raise ConfigError(
        f"ProcessCage workers are started from top-level code of your main "
        f"script ({filename}, line {line}: {code}), outside an `{GUARD}` block. "
        f"With the {start_method!r} start method every worker first re-runs the "
        f"main script, so each would start workers again and die. Put the "
        f"script's top-level code (or a call to main()) under `{GUARD}`."
    )


def _rerun_source(main: ModuleType) -> str | None:
    """The file that new processes re-run as the main module, or None.

    Mirrors ``multiprocessing.spawn.get_preparation_data`` and its
    ``_fixup_main_from_name`` / ``_fixup_main_from_path``.
    """
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if name is not None:
        if name == "__main__" or name.endswith(".__main__"):
            return None
        return getattr(spec, "origin", None)
    path = getattr(main, "__file__", None)
    if path is None or os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    return path


def _same_file(a: str, b: str) -> bool:
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _main_module_frame(main: ModuleType) -> FrameType | None:
    """The frame running the main script's top-level code, if it is on the stack."""
    namespace = vars(main)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is namespace:
            return frame
        frame = frame.f_back
    return None


def guarded_lines(filename: str) -> set[int] | None:
    """Line numbers of ``filename`` inside ``if __name__ == "__main__":`` blocks.

    Also the ``else`` block of ``if __name__ != "__main__":``. None if the
    source cannot be read or parsed (then nothing is reported).
    """
    source = "".join(linecache.getlines(filename))
    if not source:
        return None
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return None
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        sense = _main_test(node.test)
        block = node.body if sense == "==" else node.orelse if sense == "!=" else []
        for statement in block:
            end = statement.end_lineno or statement.lineno  # always set by parse()
            lines.update(range(statement.lineno, end + 1))
    return lines


def _main_test(test: ast.expr) -> str | None:
    """``"=="`` or ``"!="`` if ``test`` compares ``__name__`` with ``"__main__"``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    sides = (test.left, test.comparators[0])
    names = [isinstance(s, ast.Name) and s.id == "__name__" for s in sides]
    mains = [isinstance(s, ast.Constant) and s.value == "__main__" for s in sides]
    if not (names[0] and mains[1] or names[1] and mains[0]):
        return None
    if isinstance(test.ops[0], ast.Eq):
        return "=="
    if isinstance(test.ops[0], ast.NotEq):
        return "!="
    return None
