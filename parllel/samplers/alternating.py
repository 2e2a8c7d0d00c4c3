"""AlternatingSampler: inference for one half of the envs while the other half steps."""

from __future__ import annotations

from time import perf_counter as clock

from parllel.agents import Handler
from parllel.cages import Cage, TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.base import BatchSampler
from parllel.samplers.recorded import RecordedFields
from parllel.samplers.steps import (
    GroupViews,
    act,
    final_values_now,
    finish_step,
)
from parllel.tree import ArrayDict


class AlternatingSampler(BatchSampler):
    """Overlaps agent inference with env stepping, using two groups of envs.

    The envs are split into two cages, ``A`` (the tree's first columns) and
    ``B``. While A's envs step in their worker processes, the handler
    computes B's actions; then B steps while the handler computes A's next
    actions::

        act(A, 0); A.step_async(0)
        for t in range(T):
            act(B, t); B.step_async(t)
            A.await_step(); finish(A, t)
            act(A, t + 1); A.step_async(t + 1)     # (if t + 1 < T)
            B.await_step(); finish(B, t)

    This pays when inference costs about as much as stepping (see
    docs/samplers.md); use process cages whose envs all live in workers
    (``main_process_envs=0``), since a cage's main-process share steps
    inside ``await_step`` and does not overlap. The buffer layout and the
    per-step semantics (previous action/reward, state resets, bootstrap and
    final values, transforms) are those of the other samplers; recurrent
    agents work too (the handler keeps each half's state rows).

    Arguments as for :class:`~parllel.samplers.base.BatchSampler`, with
    exactly two auto-reset cages.

    Example:
        >>> halves = build_alternating_cages(make_env, 8, options=CageOptions(seed=0))
        >>> sampler = AlternatingSampler(halves, handler, sample_tree)
    """

    def _check_setup(
        self, cages: list[Cage], handler: Handler, recorded: RecordedFields
    ) -> None:
        """Refuse other than two cages, then the shared checks."""
        if len(cages) != 2:
            raise ConfigError(f"AlternatingSampler needs two cages, got {len(cages)}")
        super()._check_setup(cages, handler, recorded)

    def _finish(self, group: GroupViews, t: int) -> None:
        ended = finish_step(group, t, self.observation_normalizer)
        if ended is None:
            return
        if self.final_values_per_step:
            final_values_now(self.handler, group, t, ended)
        if self.handler.recurrent:
            self.handler.reset(group.lo + ended)

    def collect_batch(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Collect one batch; return the sample tree and the finished episodes."""
        begun = self._begin_batch()
        tree, handler, T = self.sample_tree, self.handler, self.batch_T
        (cage_a, cage_b), (a, b) = self.cages, self.views
        completed: list[TrajInfo] = []
        t0 = clock()
        act(handler, a, 0)
        t1 = clock()
        cage_a.step_async(a.action[0], a.step_slots[0])
        inference, envs = t1 - t0, clock() - t1
        for t in range(T):
            t0 = clock()
            act(handler, b, t)  # overlaps with A stepping
            t1 = clock()
            cage_b.step_async(b.action[t], b.step_slots[t])
            completed += cage_a.await_step()
            t2 = clock()
            self._finish(a, t)
            inference += t1 - t0
            envs += t2 - t1
            if t + 1 < T:
                t0 = clock()
                act(handler, a, t + 1)  # overlaps with B stepping
                t1 = clock()
                cage_a.step_async(a.action[t + 1], a.step_slots[t + 1])
                inference += t1 - t0
                envs += clock() - t1
            t0 = clock()
            completed += cage_b.await_step()
            envs += clock() - t0
            self._finish(b, t)
        final_values = not self.final_values_per_step
        self._end_batch(begun, envs, inference, final_values=final_values)
        return tree, completed
