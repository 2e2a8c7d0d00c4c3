"""OffPolicyRunner: collect a batch into the replay, then update from samples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parllel.runners.runner import Runner


class OffPolicyRunner(Runner):
    """Off-policy training: collect, record into the replay, optimize from it.

    Each iteration the sampler fills the next window of the replay's
    full-size tree, ``replay.record_batch()`` declares it stored, and, once
    ``replay.ready`` (``learning_starts`` reached), the algorithm updates from
    sampled transitions: ``algorithm.optimize(replay, new_steps=T * B)`` (the
    algorithm's replay ratio decides how many updates). The replay is
    checkpointed with the other objects when listed in ``checkpoint_objects``.
    Everything else is :class:`~parllel.runners.Runner`'s.

    Args:
        sampler: writes into the replay's tree.
        replay: a :class:`~parllel.replays.UniformReplay` or
            :class:`~parllel.replays.PrioritizedReplay` over the same tree.
        algorithm: e.g. :class:`~parllel.torch.algos.sac.SAC` or ``DQN``.
        total_steps: env steps to train for.
        **kwargs: see :class:`~parllel.runners.Runner`.

    Example:
        >>> runner = OffPolicyRunner(sampler, replay, sac, total_steps=20_000,
        ...                          eval_sampler=evaluator, eval_interval_steps=1_000)
    """

    def __init__(
        self, sampler: Any, replay: Any, algorithm: Any, total_steps: int, **kwargs: Any
    ) -> None:
        super().__init__(sampler, algorithm, total_steps, **kwargs)
        self.replay = replay

    def _iterate(self) -> Mapping[str, float]:
        self._collect()
        self.replay.record_batch()
        if not self.replay.ready:
            return {}
        metrics = self.algorithm.optimize(self.replay, new_steps=self.steps_per_batch)
        self.updates += 1
        return metrics
