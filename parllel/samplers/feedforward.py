"""FeedForwardSampler: batches for agents without recurrent state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from parllel import fields
from parllel.agents import Handler
from parllel.cages import Cage, TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.steps import (
    GroupViews,
    act,
    as_cages,
    bootstrap_values,
    final_values_batched,
    finish_step,
    group_views,
    reset_envs,
    sliding_window,
    start_batch,
)
from parllel.tree import ArrayDict


class FeedForwardSampler:
    """Fills ``[T, B]`` batches with auto-reset cages and a stateless agent.

    Each :meth:`collect_batch`: rotate the tree (``observation[0]`` is the
    previous batch's ``observation[T]``); for each step ask the handler for
    actions of all envs, step every cage (all cages step at once), record
    ``done`` and the previous action/reward (zero at the first step of an
    episode); then, in one call each, the values of ``observation[T]`` and of
    the final observations of truncated episodes (if the tree has
    ``bootstrap_value`` / ``final_value``, i.e. a transform needs them); then
    run the transform pipeline.

    Args:
        cages: one cage or several (their envs are the tree's columns, in order).
        handler: a non-recurrent :class:`~parllel.agents.Handler` for all envs.
        sample_tree: from :func:`~parllel.samplers.build_sample_tree`.
        transform: batch transform (e.g. a :class:`~parllel.transforms.Compose`).
        observation_normalizer: optional
            :class:`~parllel.transforms.NormalizeObservations`, applied to each
            fresh observation (so the agent acts on normalized observations).
        decorrelation_steps: random steps before the first batch, so that
            envs are out of phase.
        seed: seed of the decorrelation's random actions.

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
        observation_normalizer: Any = None,
        decorrelation_steps: int = 0,
        seed: int | None = None,
    ) -> None:
        self.cages = as_cages(cages)
        if handler.recurrent:
            raise ConfigError(
                "the agent has recurrent state: use RecurrentSampler (or "
                "AlternatingSampler), which reset it when episodes end"
            )
        for cage in self.cages:
            if cage.reset_mode != "auto":
                raise ConfigError(
                    "FeedForwardSampler needs auto-reset cages (reset_mode='auto'); "
                    "use RecurrentSampler(wait_reset=True) for wait-reset"
                )
        self.handler = handler
        self.sample_tree = sample_tree
        self.transform = transform
        self.observation_normalizer = observation_normalizer
        self.decorrelation_steps = int(decorrelation_steps)
        self.seed = seed
        self.views = group_views(sample_tree, self.cages, handler)
        B = sample_tree[fields.REWARD].shape[1]
        self.all_envs = GroupViews(sample_tree, 0, B)
        self.batch_T = self.all_envs.T
        self._sliding = sliding_window(sample_tree)
        self._needs_reset = True

    def reset(self) -> None:
        """Reset every env (and decorrelate); the next batch starts from there."""
        reset_envs(
            self.cages,
            self.views,
            self.handler,
            self.observation_normalizer,
            self.decorrelation_steps,
            self.seed,
        )
        self._needs_reset = False

    def collect_batch(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Collect one batch; return the sample tree and the finished episodes."""
        if self._needs_reset:
            self.reset()
        tree, handler = self.sample_tree, self.handler
        start_batch(tree, handler)
        if self._sliding:  # full-size tree: the window moved, so did its views
            self.views = group_views(tree, self.cages, handler)
            self.all_envs = GroupViews(tree, 0, self.all_envs.n_envs)
        everyone = self.all_envs
        completed: list[TrajInfo] = []
        for t in range(self.batch_T):
            act(handler, everyone, t)
            for cage, group in zip(self.cages, self.views):
                cage.step_async(group.action[t], group.step_slots[t])
            for cage in self.cages:
                completed += cage.await_step()
            finish_step(everyone, t, self.observation_normalizer)
        bootstrap_values(handler, tree)
        final_values_batched(handler, tree)
        if self.transform is not None:
            self.transform(tree)
        return tree, completed
