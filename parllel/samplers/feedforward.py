"""FeedForwardSampler: batches for agents without recurrent state."""

from __future__ import annotations

from time import perf_counter as clock

from parllel.agents import Handler
from parllel.cages import Cage, TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.base import BatchSampler
from parllel.samplers.recorded import RecordedFields
from parllel.samplers.steps import (
    act,
    final_values_now,
    finish_step,
)
from parllel.tree import ArrayDict


class FeedForwardSampler(BatchSampler):
    """Fills ``[T, B]`` batches with auto-reset cages and a stateless agent.

    Each :meth:`collect_batch`: rotate the tree (``observation[0]`` is the
    previous batch's ``observation[T]``); for each step ask the handler for
    actions of all envs, step every cage (all cages step at once), record
    ``done`` and the previous action/reward (zero at the first step of an
    episode); then, in one call each, the values of ``observation[T]`` and of
    the final observations of truncated episodes (if the tree has
    ``bootstrap_value`` / ``final_value``, i.e. a transform needs them); then
    run the transform pipeline. A tree built with ``frame_stack=k`` stores one
    frame per step (:mod:`parllel.frame_stacks.sample_tree`) and values the
    final observations at the step where their episodes end.

    A handler with an ``episodes_ended(traj_infos)`` method (e.g. a self-play
    handler that picks a new opponent per episode) is told, after each step,
    which episodes ended in it (the TrajInfos, with their ``env_index``),
    before it acts on the first observation of the envs' next episodes.

    Arguments as for :class:`~parllel.samplers.base.BatchSampler`; the
    handler's agent must have no recurrent state and the cages must reset
    automatically (``reset_mode="auto"``).

    Example:
        >>> sampler = FeedForwardSampler(cage, handler, sample_tree, transform=gae)
        >>> batch, trajs = sampler.collect_batch()
        >>> batch.advantage.shape     # [T, B]
    """

    def _check_setup(
        self, cages: list[Cage], handler: Handler, recorded: RecordedFields
    ) -> None:
        """Refuse a recurrent agent, then the shared checks."""
        if handler.recurrent:
            raise ConfigError(
                "the agent has recurrent state: use RecurrentSampler (or "
                "AlternatingSampler), which reset it when episodes end"
            )
        super()._check_setup(cages, handler, recorded)

    def collect_batch(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Collect one batch; return the sample tree and the finished episodes."""
        begun = self._begin_batch()
        tree, handler = self.sample_tree, self.handler
        everyone = self.all_envs
        completed: list[TrajInfo] = []
        episodes_ended = getattr(handler, "episodes_ended", None)
        inference = envs = 0.0
        for t in range(self.batch_T):
            t0 = clock()
            act(handler, everyone, t)
            t1 = clock()
            for cage, group in zip(self.cages, self.views):
                cage.step_async(group.action[t], group.step_slots[t])
            ended: list[TrajInfo] = []
            for cage in self.cages:
                ended += cage.await_step()
            if ended:
                completed += ended
                if episodes_ended is not None:
                    episodes_ended(ended)
            inference += t1 - t0
            envs += clock() - t1
            ended_at = finish_step(everyone, t, self.observation_normalizer)
            if ended_at is not None and self.final_values_per_step:
                t0 = clock()
                final_values_now(handler, everyone, t, ended_at)
                inference += clock() - t0
        final_values = not self.final_values_per_step
        self._end_batch(begun, envs, inference, final_values=final_values)
        return tree, completed
