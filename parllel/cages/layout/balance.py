"""Load balancing between the processes that step a ProcessCage's envs.

A synchronous step lasts as long as its slowest stepping process. On a
shared VM the cores do not run at the same speed for long (one core can run
the same code markedly slower than the other for hundreds of milliseconds,
then the roles swap; figures in docs/cages.md), and a fixed split of the
envs then loses much of what independent processes would get.
:class:`LoadBalancer` watches how long each stepping process takes per step
and proposes moving envs from a slower process to its faster neighbour; the
cage carries the move out (:mod:`parllel.cages.process.processes`: each env is pickled
with its episode state and stepped by the other process from then on).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

Move = tuple[int, int, int]  # (giving process, taking process, env count)


class Balancer(Protocol):
    """What a ProcessCage asks after every step (see :class:`LoadBalancer`)."""

    def propose(self, seconds: Sequence[float], counts: Sequence[int]) -> Move | None:
        """Given each stepping process's last step time and env count, a move or None."""
        ...


class LoadBalancer:
    """Proposes env moves between neighbouring processes when they shorten steps.

    Averages each process's step time over ``interval`` steps; when the slower
    of the most unbalanced neighbouring pair is behind by more than ``margin``
    mean per-env costs, proposes moving as many envs as equalise the two
    (docs/cages.md, "Load balancing").

    Args:
        interval: steps averaged per decision.
        margin: required gap, in mean per-env step costs of the pair.
    """

    def __init__(self, interval: int = 32, margin: float = 2.0) -> None:
        if interval < 1 or margin < 1:
            raise ValueError(
                f"LoadBalancer needs interval >= 1 and margin >= 1; got {interval}, "
                f"{margin}"
            )
        self.interval = interval
        self.margin = margin
        self._sums: list[float] = []
        self._steps = 0

    def propose(self, seconds: Sequence[float], counts: Sequence[int]) -> Move | None:
        """Record one step's times; every ``interval`` steps maybe propose a move."""
        sums = self._sums
        if len(sums) != len(seconds):
            self._sums, self._steps = [0.0] * len(seconds), 0
            sums = self._sums
        for p, value in enumerate(seconds):
            sums[p] += value
        self._steps += 1
        if self._steps < self.interval:
            return None
        average = [total / self._steps for total in sums]
        self._sums, self._steps = [0.0] * len(seconds), 0
        best: tuple[float, Move] | None = None
        for p in range(len(counts) - 1):
            q = p + 1
            slow, fast = (p, q) if average[p] > average[q] else (q, p)
            if counts[slow] < 2:
                continue
            slow_cost = average[slow] / counts[slow]
            fast_cost = average[fast] / counts[fast]
            gap = average[slow] - average[fast]
            if gap <= self.margin * 0.5 * (slow_cost + fast_cost):
                continue
            count = min(max(1, round(gap / (slow_cost + fast_cost))), counts[slow] - 1)
            if best is None or gap > best[0]:
                best = (gap, (slow, fast, count))
        return None if best is None else best[1]
