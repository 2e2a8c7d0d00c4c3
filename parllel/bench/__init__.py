"""Measure which layout steps your env fastest: ``python -m parllel.bench MODULE:FACTORY``.

The tool times ``collect_batch()`` of a real sampler on every layout parllel
offers (serial; a process cage with a main-process share; workers only; the
same with load balancing; an alternating sampler over two halves), for each
env count, with random actions or a small torch MLP policy; prints a table
and recommends a layout, with the call that builds it, next to what
:func:`~parllel.cages.building.suggest_layout_for` (``build_cages(parallel="auto")``)
predicts. docs/logging.md shows a run.

Modules, one job each: :mod:`~parllel.bench.factory` (loading the user's
factory), :mod:`~parllel.bench.layouts` (the layouts to try),
:mod:`~parllel.bench.policies` (random or MLP handlers),
:mod:`~parllel.bench.measure` (timing one layout),
:mod:`~parllel.bench.recommend` (choosing, comparing with the prediction),
:mod:`~parllel.bench.run` (one whole run), :mod:`~parllel.bench.report`
(table, JSON, PNG). torch and matplotlib are imported only when the ``mlp``
policy or a PNG is asked for (extras ``torch`` and ``plot``).

Example:
    >>> report = run_bench("mypkg.envs:make_env", envs=[8, 64], seconds=1.0)
    >>> print(format_table(report))
"""

from parllel.bench.run import run_bench

__all__ = [
    "run_bench",
]
