"""The policy file: weights, architecture, spaces, normalizer and provenance.

One ``torch.save`` file of plain data (no pickled class), so
:func:`read_policy_file` loads it with ``torch.load(weights_only=True)``:
the common header of :mod:`parllel.export.header`, ``architecture``
(builder name and keyword arguments), ``weights``,
``observation_normalizer``, ``trained_with`` and ``metadata``. A run
directory also gets ``policy_spec.json``, so a run interrupted before its
export still loads from its checkpoints (docs/training.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from parllel.errors import ConfigError, PolicyFileError
from parllel.export.factory import factory_reference
from parllel.export.header import FORMAT, check_header, check_policy_path, policy_header
from parllel.export.normalizer import normalizer_to_data
from parllel.export.spaces import space_from_data
from parllel.torch.architecture import Architecture, architecture_of
from parllel.torch.export.builders import (
    agent_builder,
    kwargs_from_data,
    kwargs_to_data,
)
from parllel.torch.files import atomic_save

__all__ = [
    "POLICY_FILE",
    "PolicyRecord",
    "describe_policy",
    "export_policy",
    "read_policy_file",
]

POLICY_FILE = "policy.pt"
"""the export's file name in a run directory"""


@dataclasses.dataclass
class PolicyRecord:
    """What a policy file (or a spec plus a checkpoint) holds, ready to build.

    Attributes:
        architecture: builder, spaces and keyword arguments.
        weights: ``{module name: state dict}``.
        observation_normalizer: the normalizer's data, or None.
        trained_with: algorithm, env id or factory, env steps (None if unknown).
        metadata: the export's free-form metadata.
        source: the file the weights were read from.
    """

    architecture: Architecture
    weights: dict[str, Any]
    observation_normalizer: dict[str, Any] | None
    trained_with: dict[str, Any]
    metadata: dict[str, Any]
    source: Path


def describe_policy(
    agent: Any,
    *,
    observation_space: Any = None,
    action_space: Any = None,
    algorithm: str | None = None,
    env_id: str | None = None,
    env_factory: str | None = None,
    env_steps: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The header of a policy file (everything but weights and statistics).

    Arguments as for :func:`export_policy`.

    Raises:
        ConfigError: if the agent has no recorded architecture, or its
            spaces or arguments have no plain form.
    """
    architecture = architecture_of(agent)
    if architecture is None:
        raise ConfigError(
            f"{type(agent).__name__} has no recorded architecture: build it with "
            "build_actor_critic, build_sac_agent or build_dqn_agent (they record "
            "their arguments), or attach an Architecture naming a builder "
            "registered with register_agent_builder"
        )
    builder = agent_builder(architecture.builder)
    kwargs = dict(architecture.kwargs)
    if builder.current_kwargs is not None:
        kwargs.update(builder.current_kwargs(agent))
    return policy_header(
        backend="torch",
        architecture={
            "builder": architecture.builder,
            "kwargs": kwargs_to_data(kwargs),
        },
        spaces={
            "observation_space": (observation_space, architecture.observation_space),
            "action_space": (action_space, architecture.action_space),
        },
        libraries=["torch"],
        algorithm=algorithm,
        env_id=env_id,
        env_factory=env_factory,
        env_steps=env_steps,
        metadata=metadata,
    )


def _as_file(path: str | os.PathLike[str], name: str) -> Path:
    """``path`` itself, or ``path/name`` if ``path`` is a directory."""
    path = Path(path)
    return path / name if path.is_dir() else path


def export_policy(
    path: str | os.PathLike[str],
    agent: Any,
    *,
    observation_normalizer: Any = None,
    observation_space: Any = None,
    action_space: Any = None,
    algorithm: str | None = None,
    env_id: str | None = None,
    env_factory: str | Callable[..., Any] | None = None,
    env_steps: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write a trained policy to one file that :func:`load_policy` reads.

    Example:
        >>> export_policy(run.path, agent, algorithm="PPO", env_id="CartPole-v1")
        PosixPath('runs/cartpole-ppo-.../policy.pt')

    Args:
        path: the file to write, or a directory (its ``policy.pt``).
        agent: an agent from ``build_actor_critic`` (in an ``ActorCriticAgent``),
            ``build_sac_agent`` or ``build_dqn_agent``, or one with an attached
            :class:`~parllel.torch.architecture.Architecture`.
        observation_normalizer: the run's
            :class:`~parllel.transforms.NormalizeObservations` (saved, applied).
        observation_space: needed if the agent was built from an example
            observation; ``action_space`` likewise.
        env_factory: the function building the env, ``"module:function"`` or
            ``"path/to/file.py:function"`` (recorded relative to the file).

    Returns:
        The file written (atomically).

    Raises:
        ConfigError: if the agent cannot be described.
    """
    file = _as_file(path, POLICY_FILE)
    header = describe_policy(
        agent,
        observation_space=observation_space,
        action_space=action_space,
        algorithm=algorithm,
        env_id=env_id,
        env_factory=factory_reference(env_factory, file.parent),
        env_steps=env_steps,
        metadata=metadata,
    )
    modules = agent_builder(header["architecture"]["builder"]).modules(agent)
    weights = {
        name: {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
        for name, module in modules.items()
    }
    normalizer = None
    if observation_normalizer is not None:
        normalizer = normalizer_to_data(observation_normalizer)
        for leaf in normalizer["leaves"].values():  # torch.load(weights_only) reads
            for key in ("count", "mean", "m2"):  # tensors, not numpy arrays
                leaf[key] = torch.from_numpy(leaf[key])
    file.parent.mkdir(parents=True, exist_ok=True)
    atomic_save(
        file, {**header, "weights": weights, "observation_normalizer": normalizer}
    )
    return file


def check_torch_backend(data: Mapping[str, Any], path: Path) -> None:
    """Raise :class:`PolicyFileError` naming the loader to use when the header
    ``data`` (of ``path``) is of another backend's policy (a JAX run's)."""
    backend = data.get("backend", "torch")
    if backend != "torch":
        raise PolicyFileError(
            f"{path} is of a {backend!r} run, which parllel.torch.load_policy "
            "cannot load: load it with parllel.export.load_numpy_policy(RUN_DIR) "
            "(numpy only) or play it with `python -m parllel.enjoy RUN_DIR`"
        )


def build_record(
    data: Mapping[str, Any], weights: dict[str, Any], normalizer: Any, path: Path
) -> PolicyRecord:
    """A :class:`PolicyRecord` from a header, weights and normalizer data.

    Raises:
        PolicyFileError: the header lacks an entry or is another backend's.
    """
    check_torch_backend(data, path)
    try:
        architecture = Architecture(
            str(data["architecture"]["builder"]),
            space_from_data(data["observation_space"]),
            space_from_data(data["action_space"]),
            kwargs_from_data(data["architecture"]["kwargs"]),
        )
        trained_with = dict(data["trained_with"])
    except (KeyError, TypeError) as error:
        raise PolicyFileError(f"{path} lacks {error}") from None
    return PolicyRecord(
        architecture,
        weights,
        normalizer,
        trained_with,
        dict(data.get("metadata") or {}),
        path,
    )


def read_policy_file(path: str | os.PathLike[str]) -> PolicyRecord:
    """Read and check a file written by :func:`export_policy`.

    Raises:
        PolicyFileError: if there is no such file.
        PolicyFileError: if it cannot be read or is not a parllel policy file
            of a format this version reads.
    """
    path = Path(path)
    check_policy_path(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise PolicyFileError(
            f"cannot read policy file {path}: {type(error).__name__}: {error}"
        ) from error
    check_header(data, path, FORMAT)
    weights = data.get("weights")
    if not isinstance(weights, Mapping) or not weights:
        raise PolicyFileError(f"{path} holds no weights")
    return build_record(data, dict(weights), data.get("observation_normalizer"), path)
