"""What a training run exports, bundled for :func:`parllel.patterns.run_training`."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from parllel.torch.export.artifact import export_policy
from parllel.torch.export.spec import write_policy_spec

__all__ = ["PolicyExport"]


@dataclasses.dataclass
class PolicyExport:
    """The policy a run exports and what it was trained with.

    :func:`~parllel.patterns.run_training` writes the run's
    ``policy_spec.json`` before training (so its checkpoints load as a
    policy) and ``policy.pt`` when training ends.

    Example:
        >>> export = PolicyExport(agent, env_id="CartPole-v1")
        >>> run_training(runner, run, policy=export)

    Attributes:
        agent: the trained agent (see :func:`~parllel.torch.export_policy`).
        observation_normalizer: the run's
            :class:`~parllel.transforms.NormalizeObservations`, if any.
        algorithm: what trains it (default: the runner's algorithm's class name).
        env_id: the gymnasium id of the env.
        env_factory: the function building the env, when an id is not
            enough: the function itself, ``"module:function"`` or
            ``"path/to/file.py:function"`` (recorded by importable name or
            relative to the run directory).
        metadata: more plain values to store.
    """

    agent: Any
    observation_normalizer: Any = None
    algorithm: str | None = None
    env_id: str | None = None
    env_factory: str | Callable[..., Any] | None = None
    metadata: Mapping[str, Any] | None = None

    def _describe(self, algorithm: str | None) -> dict[str, Any]:
        return dict(
            algorithm=self.algorithm or algorithm,
            env_id=self.env_id,
            env_factory=self.env_factory,
            metadata=self.metadata,
        )

    def write_spec(
        self,
        run_dir: str | os.PathLike[str],
        checkpoint_objects: Mapping[str, Any],
        *,
        algorithm: str | None = None,
    ) -> Path:
        """Write ``policy_spec.json`` (see :func:`~parllel.torch.export.spec.write_policy_spec`)."""
        return write_policy_spec(
            run_dir,
            self.agent,
            checkpoint_objects=checkpoint_objects,
            observation_normalizer=self.observation_normalizer,
            **self._describe(algorithm),
        )

    def export(
        self,
        run_dir: str | os.PathLike[str],
        *,
        env_steps: int | None = None,
        algorithm: str | None = None,
    ) -> Path:
        """Write ``policy.pt`` (see :func:`~parllel.torch.export_policy`)."""
        return export_policy(
            run_dir,
            self.agent,
            observation_normalizer=self.observation_normalizer,
            env_steps=env_steps,
            **self._describe(algorithm),
        )
