"""The layout policy of a process cage: which process steps which envs.

- :mod:`~parllel.cages.layout.process_layout`: :class:`ProcessLayout`, what a
  :class:`~parllel.cages.ProcessCage` is given: how the envs split between
  the main process and the workers, and whether they move while stepping.
- :mod:`~parllel.cages.layout.balance`: :class:`LoadBalancer`, the moves that
  rebalance a split when the cores' speeds drift apart.
- :mod:`~parllel.cages.layout.cost_model`: :func:`suggest_layout`, the cost model
  that picks serial stepping or a layout from an env step's time (measured
  here) and a worker step's overhead (measured by
  :mod:`parllel.cages.process.step_overhead`, with a real process cage);
  :func:`~parllel.cages.building.suggest_layout_for` measures both and asks it.

Users import the names from :mod:`parllel.cages`.
"""

__all__: list[str] = []
