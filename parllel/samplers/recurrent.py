"""RecurrentSampler: batches for agents with recurrent state, optional wait-reset."""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter as clock
from typing import TYPE_CHECKING, Any

import numpy as np

from parllel.agents import Handler
from parllel.cages import Cage, TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.base import BatchSampler, SamplerOptions
from parllel.samplers.recorded import RecordedFields
from parllel.samplers.steps import (
    act,
    final_values_now,
    finish_step,
    normalize_rows,
    zero_previous,
)
from parllel.tree import ArrayDict

if TYPE_CHECKING:
    from typing import Unpack


class RecurrentSampler(BatchSampler):
    """Fills ``[T, B]`` batches for an agent with per-env recurrent state.

    Like :class:`~parllel.samplers.FeedForwardSampler`, plus: the agent's
    state is recorded into ``initial_state`` at every batch start; when an
    episode ends (also mid-batch) the previous action/reward read by the
    env's next step are zero and the agent's state is reset for exactly the
    envs that finished; values of final observations of truncated episodes
    are computed at once, with the state they ended in.

    Wait-reset (``wait_reset=True``, cages built with ``reset_mode="wait"``):
    a finished env idles until the batch ends, and ``valid[t, b]`` is False
    for its idle steps; finished envs are reset between batches, so each
    batch column holds at most one episode end (for full-episode training).

    The other arguments (``cages``, ``handler``, ``sample_tree`` and the
    options ``transform``, ``observation_normalizer``,
    ``decorrelation_steps``, ``seed``, ``check_finite``) are as for
    :class:`~parllel.samplers.base.BatchSampler`, the tree built with
    ``recurrent=True``.

    Args:
        wait_reset: wait-reset mode, as above (the tree built with
            ``wait_reset=True`` too).

    Example:
        >>> tree = sample_tree_from_examples(cage.example, example, 64, 8, recurrent=True)
        >>> sampler = RecurrentSampler(cage, handler, tree, transform=gae)
        >>> batch, trajs = sampler.collect_batch()
    """

    def __init__(
        self,
        cages: Cage | Sequence[Cage],
        handler: Handler,
        sample_tree: ArrayDict,
        *,
        wait_reset: bool = False,
        **options: Unpack[SamplerOptions],
    ) -> None:
        self.wait_reset = bool(wait_reset)
        super().__init__(cages, handler, sample_tree, **options)

    def _check_setup(
        self, cages: list[Cage], handler: Handler, recorded: RecordedFields
    ) -> None:
        """Refuse a frame-stack tree, then the shared checks, then wait-reset's."""
        if recorded.frame_stack is not None:
            raise ConfigError(
                "a sample tree built with frame_stack is for FeedForwardSampler "
                "or AlternatingSampler with a feed-forward agent: build it "
                "without frame_stack for RecurrentSampler"
            )
        super()._check_setup(cages, handler, recorded)
        if self.wait_reset and not recorded.valid:
            raise ConfigError(
                "wait_reset=True needs build_sample_tree(wait_reset=True)"
            )

    def collect_batch(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Collect one batch; return the sample tree and the finished episodes."""
        begun = self._begin_batch()
        tree, handler = self.sample_tree, self.handler
        everyone = self.all_envs
        finished = np.zeros(everyone.n_envs, bool)  # wait-reset: idle envs
        stepped: Any = slice(None)
        completed: list[TrajInfo] = []
        # the valid mask is written in wait-reset mode (its field checked in __init__)
        valid = everyone.valid if self.wait_reset else None
        inference = envs = 0.0
        for t in range(self.batch_T):
            if valid is not None:
                np.logical_not(finished, out=valid[t])
                stepped = np.flatnonzero(valid[t])
            t0 = clock()
            act(handler, everyone, t)
            t1 = clock()
            for cage, group in zip(self.cages, self.views):
                cage.step_async(group.action[t], group.step_slots[t])
            for cage in self.cages:
                completed += cage.await_step()
            inference += t1 - t0
            envs += clock() - t1
            ended = finish_step(everyone, t, self.observation_normalizer, stepped)
            if ended is not None:
                t0 = clock()
                final_values_now(handler, everyone, t, ended)
                inference += clock() - t0
                if self.wait_reset:
                    finished[ended] = True
                else:
                    handler.reset(ended)
        if self.wait_reset and finished.any():
            self._reset_finished(finished)
        self._end_batch(begun, envs, inference, final_values=False)
        return tree, completed

    def _reset_finished(self, finished: np.ndarray) -> None:
        """Wait-reset: reset finished envs into ``observation[T]`` and their state."""
        T = self.batch_T
        for cage, group in zip(self.cages, self.views):
            local = np.flatnonzero(finished[group.columns])
            if not len(local):
                continue
            cage.reset(group.observation[T], env_indices=local.tolist())
            zero_previous(group, T, local)
            self.handler.reset(group.lo + local)
            if self.observation_normalizer is not None:
                normalize_rows(
                    self.observation_normalizer, group.observation[T], local, group.lo
                )
