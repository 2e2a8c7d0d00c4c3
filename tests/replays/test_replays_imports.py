"""The replay modules import each other without circles (issue #28)."""

from __future__ import annotations

import itertools

import grimp


def test_no_import_circle_in_replays():
    graph = grimp.build_graph("parllel")
    modules = sorted(graph.find_descendants("parllel.replays") | {"parllel.replays"})
    modules = [m for m in modules if m != "parllel.replays"]  # the package re-exports
    circles = [
        (a, b)
        for a, b in itertools.combinations(modules, 2)
        if graph.find_shortest_chain(a, b) and graph.find_shortest_chain(b, a)
    ]
    assert not circles, circles
