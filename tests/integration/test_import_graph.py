"""The import graph of parllel has no circle: no module imports itself back.

Counts every import (inside functions and ``TYPE_CHECKING`` blocks too), so a
lazy import that closes a circle is caught as well. ``lint-imports`` checks
the same between packages (pyproject.toml, "No import circles").
"""

from __future__ import annotations

import sys

import grimp

# packages whose inner circles another change removes; drop when it has


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The modules of each import circle (strongly connected component > 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return circles


def test_the_circle_finder_finds_a_circle():
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c", "d"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    assert import_circles(graph) == [["a", "b", "c"]]


def test_parllel_has_no_import_circle():
    graph = grimp.build_graph("parllel")
    circles = import_circles(graph)
    assert not circles, "import circles:\n" + "\n".join(map(str, circles))
