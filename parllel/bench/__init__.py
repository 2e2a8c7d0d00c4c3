"""Measure which layout steps your env fastest: ``python -m parllel.bench MODULE:FACTORY``.

Times ``collect_batch()`` of a real sampler on every layout parllel offers,
for each env count, with random actions or a small torch MLP; prints a table
and recommends a layout (with the call that builds it) next to what
``build_cage(parallel="auto")`` predicts. torch and matplotlib are imported
only for the ``mlp`` policy or a PNG. docs/logging.md shows a run.

Example:
    >>> report = run_bench("mypkg.envs:make_env", envs=[8, 64], seconds=1.0)
    >>> print(format_table(report))
"""

from parllel.bench.run import run_bench

__all__ = [
    "run_bench",
]
