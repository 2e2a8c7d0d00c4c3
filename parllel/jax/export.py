"""Export a JAX run's policy to ``policy.npz``, which plays in plain numpy.

The file (:mod:`parllel.export.npz`) holds the common header, the acting
network's flax modules and distribution described as plain data, the
parameters as numpy arrays and the normalizer's statistics;
:func:`~parllel.export.numpy_policy.load_numpy_policy` (and
``python -m parllel.enjoy``) plays it without JAX. Exportable: the JAX
PPO, SAC and DQN agents, and one run of a seed group. See docs/jax.md
("Exporting the policy and ``parllel.enjoy``").
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
from flax import linen as nn

from parllel.errors import ConfigError
from parllel.export.factory import factory_reference
from parllel.export.header import policy_header
from parllel.export.network import ACTIVATIONS
from parllel.export.normalizer import normalizer_to_data
from parllel.export.npz import NPZ_POLICY_FILE, write_npz_policy
from parllel.export.numpy_policy import WEIGHTS
from parllel.export.run_export import PolicyExporter
from parllel.export.spec import write_spec_file
from parllel.jax.agents import ActorCriticAgent
from parllel.jax.agents.dqn_agent import DqnAgent
from parllel.jax.agents.sac_agent import SacAgent
from parllel.jax.algos.sac_seeds import RunSacAgent
from parllel.jax.distributions import Categorical, Gaussian, SquashedGaussian
from parllel.jax.seeds import RunView

__all__ = [
    "PolicyExport",
    "describe_distribution",
    "describe_module",
    "export_policy",
    "write_policy_spec",
]

_ACTIVATION_NAMES: dict[Any, str] = {
    getattr(nn, name): name for name in ACTIVATIONS if hasattr(nn, name)
}


def _field_to_data(value: Any, path: str) -> Any:
    if isinstance(value, nn.Module):
        return describe_module(value)
    if isinstance(value, Mapping):
        return {str(k): _field_to_data(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_field_to_data(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if path.endswith("dtype"):
        return np.dtype(value).name
    if callable(value) and value in _ACTIVATION_NAMES:
        return _ACTIVATION_NAMES[value]
    raise ConfigError(
        f"{path}={value!r} cannot be stored in a numpy policy file: the "
        f"activations it knows are {sorted(ACTIVATIONS)} (flax.linen's), other "
        "fields must be numbers, strings, lists, dicts or modules"
    )


def describe_module(module: nn.Module) -> dict[str, Any]:
    """A flax module as plain data: its type name and its fields (submodules
    described likewise, activations by name, dtypes by name).

    Raises:
        ConfigError: a field with no plain form (a custom activation).
    """
    data: dict[str, Any] = {"type": type(module).__name__}
    for field in dataclasses.fields(module):
        if field.name in ("parent", "name"):
            continue
        value = getattr(module, field.name)
        data[field.name] = _field_to_data(value, f"{data['type']}.{field.name}")
    return data


def _floats(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, np.float32).reshape(-1)]


def describe_distribution(distribution: Any) -> dict[str, Any]:
    """A JAX action distribution as plain data (what acting needs of it).

    Raises:
        ConfigError: a distribution this version cannot play in numpy.
    """
    if isinstance(distribution, Categorical):
        return {"type": "Categorical", "num_actions": distribution.num_actions}
    if isinstance(distribution, SquashedGaussian):
        gaussian = distribution.gaussian
        center, scale = distribution.center, distribution.scale
        return {
            "type": "SquashedGaussian",
            "action_dim": distribution.action_dim,
            "low": _floats(np.asarray(center) - np.asarray(scale)),
            "high": _floats(np.asarray(center) + np.asarray(scale)),
            "min_log_std": gaussian.min_log_std,
            "max_log_std": gaussian.max_log_std,
        }
    if isinstance(distribution, Gaussian):
        return {
            "type": "Gaussian",
            "action_dim": distribution.action_dim,
            "min_log_std": distribution.min_log_std,
            "max_log_std": distribution.max_log_std,
        }
    raise ConfigError(
        f"cannot export a policy with distribution {type(distribution).__name__}: "
        "Categorical, Gaussian and SquashedGaussian play in numpy"
    )


class _Acting(NamedTuple):
    """What of an agent makes its policy."""

    builder: str
    state_key: str  # the key of the acting parameters in agent.state_dict()
    network: nn.Module
    distribution: dict[str, Any]
    action_mask_key: str | None


def _networks(agent: Any) -> Any:
    """The agent whose networks act for ``agent``: itself, or for one run of a
    seed group (whose ``state_dict()`` holds that run's parameters) the
    group's agent of that architecture."""
    if isinstance(agent, RunView):
        return agent.stack.agent
    if isinstance(agent, RunSacAgent):
        return agent.seeded.sacs[agent.run].agent
    return agent


def _acting(agent: Any) -> _Acting:
    agent = _networks(agent)
    if isinstance(agent, ActorCriticAgent):
        distribution = describe_distribution(agent.distribution)
        return _Acting(
            "actor_critic", "params", agent.network, distribution, agent.action_mask_key
        )
    if isinstance(agent, SacAgent):
        distribution = describe_distribution(agent.distribution)
        return _Acting("sac", "actor", agent.actor, distribution, None)
    if isinstance(agent, DqnAgent):
        epsilon = {"type": "EpsilonGreedy", "epsilon": float(agent.epsilon)}
        return _Acting("dqn", "q_network", agent.q_network, epsilon, None)
    raise ConfigError(
        f"cannot export a {type(agent).__name__}: parllel.jax.export exports "
        "ActorCriticAgent, SacAgent and DqnAgent (and a seed run's RunView or "
        "SeededSAC.run_agent(k))"
    )


def _header(
    agent: Any,
    observation_space: gym.Space | None,
    action_space: gym.Space | None,
    **describe: Any,
) -> tuple[dict[str, Any], _Acting]:
    if observation_space is None or action_space is None:
        raise ConfigError(
            "a JAX agent does not record its spaces: pass observation_space= and "
            "action_space= (the env's)"
        )
    acting = _acting(agent)
    architecture = {
        "builder": acting.builder,
        "state_key": acting.state_key,
        "network": describe_module(acting.network),
        "distribution": acting.distribution,
        "action_mask_key": acting.action_mask_key,
    }
    header = policy_header(
        backend="jax",
        architecture=architecture,
        spaces={
            "observation_space": (observation_space, None),
            "action_space": (action_space, None),
        },
        libraries=["jax", "flax"],
        **describe,
    )
    return header, acting


def export_policy(
    path: str | os.PathLike[str],
    agent: Any,
    *,
    observation_space: gym.Space | None = None,
    action_space: gym.Space | None = None,
    observation_normalizer: Any = None,
    algorithm: str | None = None,
    env_id: str | None = None,
    env_factory: str | Callable[..., Any] | None = None,
    env_steps: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write a JAX agent's policy to ``policy.npz``, which plays in numpy.

    Example:
        >>> export_policy(run.path, agent, observation_space=obs_space,
        ...               action_space=action_space, env_id="CartPole-v1")
        PosixPath('runs/cartpole-ppo-.../policy.npz')

    Args:
        path: the file to write, or a directory (its ``policy.npz``).
        agent: an ``ActorCriticAgent``, ``SacAgent`` or ``DqnAgent``, or one run
            of a seed group (``RunView(stack, k)``, ``SeededSAC.run_agent(k)``).
        observation_space: required (JAX agents do not record theirs); so is
            ``action_space``.
        observation_normalizer: the run's normalizer (its statistics are saved).
        env_factory: the function building the env (as for
            :func:`parllel.torch.export_policy`).
        metadata: more plain values to store.

    Returns:
        The file written (atomically).

    Raises:
        ConfigError: no spaces given, or a part that cannot be exported.
    """
    path = Path(path)
    file = path / NPZ_POLICY_FILE if path.is_dir() else path
    header, acting = _header(
        agent,
        observation_space,
        action_space,
        algorithm=algorithm,
        env_id=env_id,
        env_factory=factory_reference(env_factory, file.parent),
        env_steps=env_steps,
        metadata=metadata,
    )
    weights = {WEIGHTS: agent.state_dict()[acting.state_key]}
    normalizer = (
        None
        if observation_normalizer is None
        else normalizer_to_data(observation_normalizer)
    )
    return write_npz_policy(file, header, weights, normalizer)


def write_policy_spec(
    run_dir: str | os.PathLike[str],
    agent: Any,
    *,
    checkpoint_objects: Mapping[str, Any],
    observation_normalizer: Any = None,
    observation_space: gym.Space | None = None,
    action_space: gym.Space | None = None,
    **describe: Any,
) -> Path:
    """Write ``policy_spec.json``: how to load the policy from the run's checkpoints.

    The agent itself must be one of ``checkpoint_objects`` (its
    ``state_dict()`` holds the parameters), found by identity.

    Args:
        run_dir: the run directory.
        agent: the agent (as for :func:`export_policy`).
        checkpoint_objects: the runner's ``checkpoint_objects``.
        observation_normalizer: the run's observation normalizer, if any.
        observation_space: the env's observation space (required).
        action_space: the env's action space (required).
        **describe: ``algorithm``, ``env_id``, ``env_factory``, ``metadata``.
    """
    describe["env_factory"] = factory_reference(describe.get("env_factory"), run_dir)
    header, _ = _header(agent, observation_space, action_space, **describe)
    return write_spec_file(
        run_dir,
        header,
        {WEIGHTS: agent},
        checkpoint_objects,
        observation_normalizer,
    )


@dataclasses.dataclass
class PolicyExport(PolicyExporter):
    """The JAX policy a run exports (``policy.npz``) and what it was trained with.

    :func:`~parllel.runners.run_training` writes the run's
    ``policy_spec.json`` before training and ``policy.npz`` when training
    ends. Fields: see :class:`~parllel.export.run_export.PolicyExporter`;
    the env's spaces are required (JAX agents do not record theirs).

    Example:
        >>> export = PolicyExport(agent, env_id="CartPole-v1",
        ...     observation_space=spaces.observation, action_space=spaces.action)
        >>> run_training(runner, run, policy=export)
    """

    spec_writer: ClassVar[Callable[..., Path]] = write_policy_spec
    exporter: ClassVar[Callable[..., Path]] = export_policy
