"""OnPolicyRunner: collect a batch, optimize on it, repeat."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from parllel.runners.runner import Runner

__all__ = ["OnPolicyAlgorithm", "OnPolicyRunner"]


class OnPolicyAlgorithm(Protocol):
    """What :class:`OnPolicyRunner` calls on its algorithm (e.g. PPO)."""

    def optimize(
        self, batch: Mapping[str, Any], progress: float | None = None
    ) -> Mapping[str, float]:
        """Optimize on one batch; ``progress`` is the fraction of training done."""
        ...


class OnPolicyRunner(Runner[OnPolicyAlgorithm]):
    """On-policy training: each iteration collects one batch and optimizes on it.

    ``algorithm.optimize(batch, progress=...)`` receives the sampler's
    transformed sample tree (zero-copy) and the fraction of ``total_steps``
    done (for learning-rate and clip-range schedules). Everything else —
    logging, evaluation, checkpoints, resume, callbacks — is
    :class:`~parllel.runners.Runner`'s; see there for the arguments.

    Example:
        >>> runner = OnPolicyRunner(sampler, ppo, total_steps=100_000,
        ...                         eval_sampler=evaluator, eval_interval_steps=5_000,
        ...                         logger=logger, checkpoint_dir=run.checkpoints_dir,
        ...                         checkpoint_objects={"model": model, "ppo": ppo})
        >>> summary = runner.run()
    """

    def _iterate(self) -> Mapping[str, float]:
        batch = self._collect()
        metrics = self.algorithm.optimize(batch, progress=self.progress)
        self.updates += 1
        return metrics
