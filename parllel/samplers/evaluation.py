"""EvalSampler: deterministic evaluation episodes on separate cages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from parllel import fields
from parllel.agents import Handler
from parllel.cages import Cage, TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.steps import (
    GroupViews,
    ObservationNormalizer,
    act,
    as_cages,
    finish_step,
    group_views,
    reset_envs,
    start_batch,
)
from parllel.tree import ArrayDict
from parllel.validation import check_at_least


class EvalSampler:
    """Runs evaluation episodes until ``n_episodes`` have completed.

    Uses its own cages, handler and (small) sample tree, so evaluation never
    disturbs the training envs or their recurrent state. For the duration of
    :meth:`collect` the handler is in ``"eval"`` mode (deterministic actions)
    and the observation normalizer, if any, is frozen (its statistics are
    used, not updated); both are restored afterwards. Every env is reset at
    the start, so each evaluation starts fresh episodes.

    Args:
        cages: one cage or several, auto-reset.
        handler: a handler for the evaluation envs (may wrap the training agent).
        sample_tree: from :func:`~parllel.samplers.sample_tree_from_examples`
            (``batch_T=1`` is enough; rows are reused cyclically).
        n_episodes: episodes to complete.
        max_steps: give up after this many steps of every env (None: never).
        observation_normalizer: the training ``NormalizeObservations``, if any.

    Example:
        >>> eval_tree = sample_tree_from_examples(eval_cage.example, example, 1, 4)
        >>> evaluator = EvalSampler(eval_cage, TorchHandler(agent, 4), eval_tree, 10)
        >>> returns = [traj.return_ for traj in evaluator.collect()]
    """

    def __init__(
        self,
        cages: Cage | Sequence[Cage],
        handler: Handler,
        sample_tree: ArrayDict,
        n_episodes: int,
        *,
        max_steps: int | None = None,
        observation_normalizer: ObservationNormalizer | None = None,
    ) -> None:
        self.cages = as_cages(cages)
        check_at_least("n_episodes", int(n_episodes))
        for cage in self.cages:
            if cage.reset_mode != "auto":
                raise ConfigError("EvalSampler needs auto-reset cages")
        self.handler = handler
        self.sample_tree = sample_tree
        self.n_episodes = int(n_episodes)
        self.max_steps = max_steps
        self.observation_normalizer = observation_normalizer
        self.views = group_views(sample_tree, self.cages, handler)
        B = sample_tree[fields.REWARD].shape[1]
        self.all_envs = GroupViews(sample_tree, 0, B)
        # Each env contributes its first episodes, n_episodes split evenly:
        # taking whichever episodes end first would favour short ones.
        self._quota = [
            self.n_episodes // B + (b < self.n_episodes % B) for b in range(B)
        ]
        self._columns = {}
        for lo, cage in zip(
            np.cumsum([0] + [c.n_envs for c in self.cages]), self.cages
        ):
            for i, env_index in enumerate(cage.env_indices):
                self._columns[env_index] = int(lo) + i

    def collect(self) -> list[TrajInfo]:
        """Run until ``n_episodes`` episodes complete; return their TrajInfos.

        If ``max_steps`` runs out first, the episodes completed so far are
        returned (possibly fewer than ``n_episodes``).
        """
        handler, normalizer = self.handler, self.observation_normalizer
        previous_mode = handler.mode
        was_frozen = getattr(normalizer, "frozen", False)
        handler.set_mode("eval")
        if normalizer is not None:
            normalizer.frozen = True
        try:
            return self._run()
        finally:
            handler.set_mode(previous_mode)
            if normalizer is not None:
                normalizer.frozen = was_frozen

    def _run(self) -> list[TrajInfo]:
        everyone, handler = self.all_envs, self.handler
        reset_envs(self.cages, self.views, handler, self.observation_normalizer)
        completed: list[TrajInfo] = []
        taken = [0] * everyone.n_envs
        steps = 0
        while True:
            start_batch(everyone, handler)
            for t in range(everyone.T):
                act(handler, everyone, t)
                for cage, group in zip(self.cages, self.views):
                    cage.step_async(group.action[t], group.step_slots[t])
                for cage in self.cages:
                    for traj in cage.await_step():
                        column = self._columns[traj.env_index]
                        if taken[column] < self._quota[column]:
                            taken[column] += 1
                            completed.append(traj)
                ended = finish_step(everyone, t, self.observation_normalizer)
                if ended is not None:
                    handler.reset(ended)
                steps += 1
                if len(completed) >= self.n_episodes:
                    return completed
                if self.max_steps is not None and steps >= self.max_steps:
                    return completed
