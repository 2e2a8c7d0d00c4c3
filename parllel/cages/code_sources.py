"""Source lines of code sent by value to worker processes, for their tracebacks.

A function cloudpickle sends from the main script or a notebook keeps a file
name the worker may not be able to read, so its traceback would show no
source. :func:`collect_sources` gathers the lines from the parent's
:mod:`linecache` and :meth:`CodeSources.install` registers them in the
worker's, restoring the parent's file names (see docs/cages.md, "Faults").
"""

from __future__ import annotations

import dataclasses
import functools
import linecache
import os
import re
import types
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["CodeSources", "collect_sources"]

#: Objects whose code is walked: the user's, sent by value.
_BY_VALUE_MODULE = "__main__"


@dataclasses.dataclass(frozen=True)
class CodeSources:
    """Source lines a worker registers in :mod:`linecache`, and renamed files.

    Args:
        lines: file name (as the worker's code objects will have it) -> its
            lines, each ending in a newline.
        files: a code object's (name, first line) -> the file name its
            traceback shows (the parent's file name, or the main script's
            path for code compiled under a pseudo-file name).
    """

    lines: Mapping[str, list[str]] = dataclasses.field(default_factory=dict)
    files: Mapping[tuple[str, int], str] = dataclasses.field(default_factory=dict)

    def install(self, *objects: Any) -> None:
        """Register the lines in this process's :mod:`linecache` and rename
        the code of the functions reachable from ``objects`` (the worker's
        unpickled copies)."""
        for name, lines in self.lines.items():
            # mtime None: linecache.checkcache keeps the entry as it is
            linecache.cache[name] = (sum(map(len, lines)), None, list(lines), name)
        if not self.files:
            return
        for function in _functions(objects):
            function.__code__ = _renamed(function.__code__, self.files)


def collect_sources(*objects: Any) -> CodeSources:
    """The sources a worker needs to show, in its tracebacks, the code of
    ``objects`` that is defined in the main script (sent by value).

    Lines are sent for files a worker may not read (pseudo-files such as a
    notebook's cells) and for the script itself (it may move or be deleted
    while the run goes on). Code compiled under a pseudo-file name (a tool
    that ran the script with ``exec``) is renamed to the script's path (its
    globals' ``__file__``) where each of its functions is found at its line
    there.
    """
    codes: dict[tuple[str, str | None], list[types.CodeType]] = {}
    for function in _functions(objects):
        script = function.__globals__.get("__file__")
        if not (isinstance(script, str) and os.path.isfile(script)):
            script = None
        for code in _codes(function.__code__):
            codes.setdefault((code.co_filename, script), []).append(code)
    lines: dict[str, list[str]] = {}
    files: dict[tuple[str, int], str] = {}
    for (filename, script), found in codes.items():
        if script is not None and filename.startswith("<"):
            script_lines = linecache.getlines(script)
            if script_lines and all(_defined_at(script_lines, c) for c in found):
                filename = script
        files.update({(c.co_name, c.co_firstlineno): filename for c in found})
        if filename == script or not os.path.isfile(filename):
            source = linecache.getlines(filename)
            if source:
                lines[filename] = source
    return CodeSources(lines, files)


def _defined_at(lines: list[str], code: types.CodeType) -> bool:
    """Whether ``code``'s function is defined at its first line in ``lines``
    (or a few lines below, after decorators)."""
    name = code.co_name
    if name.startswith("<") and name != "<lambda>":
        return True  # a comprehension or class body: its function was checked
    pattern = r"\blambda\b" if name == "<lambda>" else rf"\bdef\s+{re.escape(name)}\b"
    first = code.co_firstlineno - 1
    return any(re.search(pattern, line) for line in lines[max(first, 0) : first + 8])


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code objects nested in it."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _codes(constant)


def _renamed(
    code: types.CodeType, files: Mapping[tuple[str, int], str]
) -> types.CodeType:
    """``code`` with its and its nested code objects' file names set to the
    names ``files`` records for them."""
    consts = tuple(
        _renamed(c, files) if isinstance(c, types.CodeType) else c
        for c in code.co_consts
    )
    filename = files.get((code.co_name, code.co_firstlineno), code.co_filename)
    return code.replace(co_filename=filename, co_consts=consts)


def _functions(objects: tuple[Any, ...]) -> Iterator[types.FunctionType]:
    """The main script's functions reachable from ``objects``: themselves,
    the methods of its classes, what partials wrap, the globals they name,
    container items."""
    seen: set[int] = set()
    stack = list(objects)
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            stack += [obj.func, *obj.args, *obj.keywords.values()]
        elif isinstance(obj, types.MethodType):
            stack.append(obj.__func__)
        elif isinstance(obj, (staticmethod, classmethod)):
            stack.append(obj.__func__)
        elif isinstance(obj, property):
            stack += [obj.fget, obj.fset, obj.fdel]
        elif isinstance(obj, Mapping):
            stack += list(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack += list(obj)
        elif isinstance(obj, type):
            if obj.__module__ == _BY_VALUE_MODULE:
                stack += [*vars(obj).values(), *obj.__bases__]
        elif isinstance(obj, types.FunctionType):
            if obj.__module__ != _BY_VALUE_MODULE:
                continue
            yield obj
            for code in _codes(obj.__code__):
                stack += [
                    obj.__globals__[n] for n in code.co_names if n in obj.__globals__
                ]
            for cell in obj.__closure__ or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
