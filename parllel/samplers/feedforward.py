"""FeedForwardSampler: batches for agents without recurrent state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter as clock
from typing import Any

from parllel.agents import Handler
from parllel.cages import Cage, TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.base import BatchSampler
from parllel.samplers.steps import (
    ObservationNormalizer,
    act,
    as_cages,
    bootstrap_values,
    final_values_batched,
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
    frame per step (:mod:`parllel.samplers.frame_stacks`) and values the
    final observations at the step where their episodes end.

    A handler with an ``episodes_ended(traj_infos)`` method (e.g. a self-play
    handler that picks a new opponent per episode) is told, after each step,
    which episodes ended in it (the TrajInfos, with their ``env_index``),
    before it acts on the first observation of the envs' next episodes.

    Args:
        cages: one cage or several (their envs are the tree's columns, in order).
        handler: a non-recurrent :class:`~parllel.agents.Handler` for all envs.
        sample_tree: from :func:`~parllel.samplers.sample_tree_from_examples`.
        transform: batch transform (e.g. a :class:`~parllel.transforms.Compose`).
        observation_normalizer: optional
            :class:`~parllel.transforms.NormalizeObservations`, applied to each
            fresh observation (so the agent acts on normalized observations).
        decorrelation_steps: random steps before the first batch, so that
            envs are out of phase.
        seed: seed of the decorrelation's random actions (e.g.
            ``seeds.decorrelation``).
        check_finite: check every finished batch for NaN/inf rewards and
            observations (:class:`~parllel.errors.NonFiniteSampleError` names
            the env and step): ``"auto"`` checks float observations of at
            most 1024 values per step, True every float observation, False
            nothing (docs/samplers.md).

    Example:
        >>> sampler = FeedForwardSampler(cage, handler, sample_tree, transform=gae)
        >>> batch, trajs = sampler.collect_batch()
        >>> batch.advantage.shape     # [T, B]
    """

    def __init__(
        self,
        cages: Cage | Sequence[Cage],
        handler: Handler,
        sample_tree: ArrayDict,
        *,
        transform: Callable[[ArrayDict], Any] | None = None,
        observation_normalizer: ObservationNormalizer | None = None,
        decorrelation_steps: int = 0,
        seed: int | None = None,
        check_finite: bool | str = "auto",
    ) -> None:
        if handler.recurrent:
            raise ConfigError(
                "the agent has recurrent state: use RecurrentSampler (or "
                "AlternatingSampler), which reset it when episodes end"
            )
        for cage in as_cages(cages):
            if cage.reset_mode != "auto":
                raise ConfigError(
                    "FeedForwardSampler needs auto-reset cages (reset_mode='auto'); "
                    "use RecurrentSampler(wait_reset=True) for wait-reset"
                )
        super().__init__(
            cages,
            handler,
            sample_tree,
            transform,
            observation_normalizer,
            decorrelation_steps,
            seed,
            check_finite,
        )
        self._episodes_ended = getattr(handler, "episodes_ended", None)

    def collect_batch(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Collect one batch; return the sample tree and the finished episodes."""
        start, local = clock(), self._local_step_seconds()
        self._begin_batch()
        tree, handler = self.sample_tree, self.handler
        everyone = self.all_envs
        completed: list[TrajInfo] = []
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
                if self._episodes_ended is not None:
                    self._episodes_ended(ended)
            inference += t1 - t0
            envs += clock() - t1
            ended_at = finish_step(everyone, t, self.observation_normalizer)
            if ended_at is not None and everyone.frames is not None:
                t0 = clock()  # final observations are staged one step at a time
                final_values_now(handler, everyone, t, ended_at)
                inference += clock() - t0
        self._check_batch()
        t0 = clock()
        bootstrap_values(handler, tree)
        final_values_batched(handler, tree)
        t1 = clock()
        if self.transform is not None:
            self.transform(tree)
        self._record_times(start, local, envs, inference + t1 - t0, t1)
        return tree, completed
