"""What a torch training run exports, bundled for :func:`parllel.runners.run_training`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from parllel.export.run_export import PolicyExporter
from parllel.torch.export.artifact import export_policy
from parllel.torch.export.spec import write_policy_spec

__all__ = ["PolicyExport"]


@dataclasses.dataclass
class PolicyExport(PolicyExporter):
    """The torch policy a run exports and what it was trained with.

    :func:`~parllel.runners.run_training` writes the run's
    ``policy_spec.json`` before training (so its checkpoints load as a
    policy) and ``policy.pt`` when training ends. Fields: see
    :class:`~parllel.export.run_export.PolicyExporter`; ``agent`` is one
    :func:`~parllel.torch.export_policy` takes.

    Example:
        >>> export = PolicyExport(agent, env_id="CartPole-v1")
        >>> run_training(runner, run, policy=export)
    """

    spec_writer: ClassVar[Callable[..., Path]] = write_policy_spec
    exporter: ClassVar[Callable[..., Path]] = export_policy
