"""Detect worker processes started from unguarded top-level code of the main script.

Under the ``spawn`` and ``forkserver`` start methods every new process first
re-runs the main script (as module ``__mp_main__``) to find the functions it
was given. A script that builds its cages at top level, without
``if __name__ == "__main__":``, would then build cages again inside each
worker, which multiprocessing refuses: the worker dies during start-up and the
cause is buried in its error output. :func:`check_main_guard` sees this
before any process starts, from the line of the main script that is running.
It also refuses a main script that new processes cannot re-run because it has
no file: one read from standard input (``python - < script.py``, a heredoc).
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
from multiprocessing import process
from types import FrameType, ModuleType

from parllel.errors import ConfigError

GUARD = 'if __name__ == "__main__":'


def check_main_guard(
    start_method: str,
    what: str = "ProcessCage workers are",
    instead: str = (
        "or step the envs in this process (a SerialCage; "
        'parallel="serial" / False in build_cage and parllel.interop)'
    ),
) -> None:
    """Raise ConfigError if starting workers now would re-run this call in them
    (see :func:`unguarded_main_line`).

    ``what`` names the processes in the message (``"... started from
    top-level code"``), ``instead`` the way out other than the guard.
    """
    found = unguarded_main_line(start_method)
    if found is None:
        return
    filename, line = found
    raise ConfigError(
        f"{what} started from top-level code of your main "
        f"script ({filename}, {_quote_statement(filename, line)}), outside an "
        f"`{GUARD}` block. With the {start_method!r} start method every new "
        f"process first re-runs the main script, so each would start processes "
        f"again and die. Put the script's top-level code (or a call to main()) "
        f"under `{GUARD}`, {instead}."
    )


def unguarded_main_line(start_method: str) -> tuple[str, int] | None:
    """The main script's file and line that new processes would re-run, or None.

    That is the case when ``start_method`` re-imports the main script in
    children (``spawn``, ``forkserver``) and the caller runs, directly or
    through functions it called, at a line of the main script's top-level
    code that is not inside an ``if __name__ == "__main__":`` block.

    Raises:
        ConfigError: the main script has no file new processes can re-run.
    """
    if start_method not in ("spawn", "forkserver"):
        return None
    main = sys.modules.get("__main__")
    if main is None:
        return None
    source = _rerun_source(main)
    if source is None:
        return None
    _check_rerunnable(source, start_method)
    frame = _main_module_frame(main)
    if frame is None or not _same_file(frame.f_code.co_filename, source):
        return None
    filename, line = frame.f_code.co_filename, frame.f_lineno
    guarded = guarded_lines(filename)
    if guarded is None or line in guarded:
        return None
    return filename, line


STDIN = "<stdin>"


def _check_rerunnable(source: str, start_method: str) -> None:
    """Raise ConfigError if new processes cannot re-run the main script's file.

    ``multiprocessing`` re-runs the main module from its ``__file__`` (made
    absolute against the directory the program started in); a script read
    from standard input has ``__file__ == "<stdin>"``, which names no file,
    and every worker would die with ``FileNotFoundError``.
    """
    if os.path.basename(source) == STDIN:
        raise ConfigError(
            f"ProcessCage cannot start workers with the {start_method!r} start "
            f"method from a script read from standard input (python - < "
            f"script.py, or a heredoc): every worker first re-runs the main "
            f"script from its file, and {STDIN} is not one. Save the script to "
            f"a file and run it as `python script.py`, or pass "
            f'start_method="fork" to the cage.'
        )
    if getattr(sys, "frozen", False):  # a bundled executable brings its own
        return
    path = source
    # where the program started: spawn resolves a relative main path from here
    original_dir = getattr(process, "ORIGINAL_DIR", None)
    if not os.path.isabs(path) and original_dir is not None:
        path = os.path.join(original_dir, path)
    if not os.path.isfile(path):
        raise ConfigError(
            f"ProcessCage cannot start workers with the {start_method!r} start "
            f"method: every worker first re-runs the main script from its file, "
            f"and {os.path.normpath(path)} does not exist (moved or deleted "
            f"since the program started?). Run the script from a file that "
            f'exists, or pass start_method="fork" to the cage.'
        )


def _quote_statement(filename: str, line: int) -> str:
    """``line N: <code>`` for the statement running at ``line``, all of its lines.

    A statement spread over several lines (a ``with ProcessCage(...) as
    cage:`` whose arguments take three lines) is quoted whole, its lines
    joined (``lines N-M: ...``); of a compound statement only its header,
    down to the nested statement that holds ``line``.
    """
    first, last = _statement_lines(filename, line)
    code = " ".join(
        linecache.getline(filename, number).strip() for number in range(first, last + 1)
    )
    code = code.replace("( ", "(").replace(" )", ")").replace("[ ", "[")
    code = code.replace(" ]", "]").replace("{ ", "{").replace(" }", "}")
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    return f"{where}: {code}"


def _statement_lines(filename: str, line: int) -> tuple[int, int]:
    """First and last line of the innermost statement at ``line`` (its header)."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)), filename)
    except (SyntaxError, ValueError):
        return line, line
    statements: list[ast.stmt] = list(tree.body)
    while statements:
        node = next(
            (s for s in statements if s.lineno <= line <= (s.end_lineno or s.lineno)),
            None,
        )
        if node is None:
            break
        nested = _nested_statements(node)
        last = _header_end(node) if nested else node.end_lineno or node.lineno
        if line <= last:
            return node.lineno, last
        statements = nested
    return line, line


def _header_end(node: ast.stmt) -> int:
    """The last line of a compound statement's header (``with ...(...) as x:``)."""
    last = node.lineno
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            continue
        for part in ast.walk(child):
            last = max(last, getattr(part, "end_lineno", None) or last)
    return last


def _nested_statements(node: ast.stmt) -> list[ast.stmt]:
    """The statements nested in a compound statement (bodies, else, handlers)."""
    nested: list[ast.stmt] = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list):
            nested.extend(s for s in block if isinstance(s, ast.stmt))
    for handler in getattr(node, "handlers", None) or []:
        nested.extend(handler.body)
    for case in getattr(node, "cases", None) or []:
        nested.extend(case.body)
    return nested


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
