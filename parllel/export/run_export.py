"""What a training run exports, bundled for :func:`parllel.runners.run_training`.

:class:`PolicyExporter` holds what both backends' ``PolicyExport`` share
(the agent, its normalizer and provenance); :class:`parllel.torch.PolicyExport`
writes ``policy.pt``, :class:`parllel.jax.export.PolicyExport` ``policy.npz``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["PolicyExporter"]


@dataclasses.dataclass
class PolicyExporter:
    """The policy a run exports and what it was trained with.

    :func:`~parllel.runners.run_training` calls :meth:`write_spec` before
    training (so the run's checkpoints load as a policy) and :meth:`export`
    when training ends; each backend's subclass names its functions
    (:attr:`spec_writer`, :attr:`exporter`).

    Attributes:
        agent: the trained agent.
        observation_normalizer: the run's
            :class:`~parllel.transforms.NormalizeObservations`, if any.
        algorithm: what trains it (default: the runner's algorithm's class name).
        env_id: the gymnasium id of the env.
        env_factory: the function building the env, when an id is not
            enough: the function itself, ``"module:function"`` or
            ``"path/to/file.py:function"`` (recorded by importable name or
            relative to the run directory).
        metadata: more plain values to store.
        observation_space: the env's observation space (a torch agent
            records its own; a JAX agent needs it).
        action_space: the env's action space (likewise).
    """

    agent: Any
    observation_normalizer: Any = None
    algorithm: str | None = None
    env_id: str | None = None
    env_factory: str | Callable[..., Any] | None = None
    metadata: Mapping[str, Any] | None = None
    observation_space: Any = None
    action_space: Any = None

    def describe(self, algorithm: str | None) -> dict[str, Any]:
        """The spaces and provenance arguments of an export (``algorithm``
        if none was given)."""
        return dict(
            observation_space=self.observation_space,
            action_space=self.action_space,
            algorithm=self.algorithm or algorithm,
            env_id=self.env_id,
            env_factory=self.env_factory,
            metadata=self.metadata,
        )

    spec_writer: ClassVar[Callable[..., Path]]
    """the backend's ``write_policy_spec`` (a subclass sets it)"""
    exporter: ClassVar[Callable[..., Path]]
    """the backend's ``export_policy`` (a subclass sets it)"""

    def write_spec(
        self,
        run_dir: str | os.PathLike[str],
        checkpoint_objects: Mapping[str, Any],
        *,
        algorithm: str | None = None,
    ) -> Path:
        """Write the run's ``policy_spec.json`` (the backend's ``write_policy_spec``)."""
        return type(self).spec_writer(
            run_dir,
            self.agent,
            checkpoint_objects=checkpoint_objects,
            observation_normalizer=self.observation_normalizer,
            **self.describe(algorithm),
        )

    def export(
        self,
        run_dir: str | os.PathLike[str],
        *,
        env_steps: int | None = None,
        algorithm: str | None = None,
    ) -> Path:
        """Write the run's policy file (the backend's ``export_policy``)."""
        return type(self).exporter(
            run_dir,
            self.agent,
            observation_normalizer=self.observation_normalizer,
            env_steps=env_steps,
            **self.describe(algorithm),
        )
