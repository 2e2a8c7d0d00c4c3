"""A trained policy acting on raw gymnasium observations, with no sampler.

:func:`load_policy` rebuilds the agent an export (or a run's checkpoint)
describes and wraps it in a :class:`Policy`, whose ``act(observation)``
normalizes as in training and returns the deterministic action::

    policy = load_policy("runs/cartpole-ppo-20250101-120000")
    observation, info = env.reset(seed=0)
    action = policy.act(observation)
    policy.reset()  # at an episode's end: a recurrent policy forgets it
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from parllel.agents.state import ALL, EnvStates, as_index
from parllel.errors import (
    PolicyFileError,
    ShapeError,
)
from parllel.export.normalizer import FrozenObservationNormalizer
from parllel.export.observations import ObservationAdapter
from parllel.export.spec import checkpoint_source
from parllel.torch.export.artifact import (
    POLICY_FILE,
    PolicyRecord,
    read_policy_file,
)
from parllel.torch.export.builders import agent_builder
from parllel.torch.export.spec import record_from_spec
from parllel.torch.utils import check_device
from parllel.tree import tree_map

__all__ = ["Policy", "load_policy"]


class Policy:
    """An agent, its spaces and observation normalizer, acting on raw observations.

    Build one with :func:`load_policy`. Actions are what the sampler would hand
    the env (an ``int`` for ``Discrete``, an array for ``Box``, clipped only
    with ``clip_actions``); a recurrent policy keeps its state between calls,
    so call :meth:`reset` when an episode ends.

    Args:
        trained_with: algorithm, env id or factory, env steps.
        source: the file the weights came from.
        clip_actions: clip ``Box`` actions into the space's bounds.

    Raises:
        ConfigError: ``clip_actions`` with a ``Box`` space without finite bounds.
    """

    def __init__(
        self,
        agent: Any,
        observation_space: gym.Space,
        action_space: gym.Space,
        *,
        observation_normalizer: FrozenObservationNormalizer | None = None,
        trained_with: dict[str, Any] | None = None,
        source: Path | None = None,
        clip_actions: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        self.agent = agent
        self.observation_space = observation_space
        self.action_space = action_space
        self.observation_normalizer = observation_normalizer
        self.trained_with = dict(trained_with or {})
        self.source = source
        self.clip_actions = bool(clip_actions)
        self._adapter = ObservationAdapter(
            observation_space, action_space, observation_normalizer, clip_actions
        )
        self.device = check_device(device)
        self._states: EnvStates | None = None
        self._n_envs: int | None = None
        self._mode = ""

    @property
    def recurrent(self) -> bool:
        """True if the agent keeps state between steps."""
        with torch.no_grad():
            return self.agent.initial_state(1) is not None

    def _state(self, n_envs: int) -> EnvStates:
        if self._states is None:
            with torch.no_grad():
                self._states = EnvStates(
                    self.agent.initial_state(n_envs), self.agent.initial_state(1)
                )
            self._n_envs = n_envs
        elif self._n_envs != n_envs and not self._states.empty:
            raise ShapeError(
                f"this recurrent policy keeps state for {self._n_envs} envs, got "
                f"{n_envs} observations: call reset() first"
            )
        return self._states

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The action for one observation, or actions for a batch ``[N, ...]``.

        Args:
            observation: as the env returns it (any nesting of its space), or
                N of them stacked on a leading dim.
            deterministic: the distribution's mode (greedy for DQN), as in
                evaluation; False samples as in training (DQN: epsilon-greedy
                with the epsilon at export).

        Returns:
            An action valid for ``env.step`` (an ``int`` for ``Discrete``), or
            an array of N actions.
        """
        batch = self._adapter.batch_size(observation)
        mode = "eval" if deterministic else "sample"
        if mode != self._mode:
            self.agent.set_mode(mode)
            self._mode = mode
        states = self._state(batch or 1)
        with torch.no_grad():
            inputs = self._adapter.inputs(observation, batch is not None)
            step = self.agent.step(
                tree_map(lambda a: torch.from_numpy(a).to(self.device), inputs),
                None,
                None,
                states.gather(ALL),
            )
            states.scatter(ALL, step.state)
        action = tree_map(lambda t: t.detach().cpu().numpy(), step.action)
        return self._adapter.actions(action, batch is not None)

    __call__ = act

    def reset(self, env_indices: Any = None) -> None:
        """Forget the recurrent state (of the envs at ``env_indices``; all if None)."""
        if self._states is None or env_indices is None:
            self._states = None
            return
        index = as_index(env_indices)
        if isinstance(index, np.ndarray):
            index = torch.from_numpy(index)
        with torch.no_grad():
            self._states.reset(index)

    def __repr__(self) -> str:
        trained = ", ".join(f"{k}={v}" for k, v in self.trained_with.items() if v)
        return (
            f"Policy({type(self.agent).__name__}, observation_space="
            f"{self.observation_space}, action_space={self.action_space}"
            f"{', ' + trained if trained else ''})"
        )


def _build(record: PolicyRecord, **policy_kwargs: Any) -> Policy:
    architecture = record.architecture
    builder = agent_builder(architecture.builder)
    agent = builder.build(
        architecture.observation_space,
        architecture.action_space,
        dict(architecture.kwargs),
    )
    modules = builder.modules(agent)
    missing = sorted(set(modules) - set(record.weights))
    if missing:
        raise PolicyFileError(f"{record.source} has no weights for {missing}")
    for name, module in modules.items():
        try:
            module.load_state_dict(record.weights[name])
        except (RuntimeError, TypeError, ValueError) as error:
            raise PolicyFileError(
                f"the {name!r} weights of {record.source} do not fit the "
                f"architecture it describes: {error}"
            ) from error
    device = check_device(policy_kwargs.get("device", "cpu"))
    for module in modules.values():
        module.to(device)
    if hasattr(agent, "device"):
        agent.device = device
    normalizer = record.observation_normalizer
    return Policy(
        agent,
        architecture.observation_space,
        architecture.action_space,
        observation_normalizer=(
            None
            if normalizer is None
            else FrozenObservationNormalizer.from_data(normalizer)
        ),
        trained_with=record.trained_with,
        source=record.source,
        **policy_kwargs,
    )


def _record_of_run(run_dir: Path) -> PolicyRecord:
    """The newer of the run's export and its newest checkpoint (the export on a tie)."""
    export = run_dir / POLICY_FILE
    record = read_policy_file(export) if export.is_file() else None
    exported_at = None if record is None else record.trained_with.get("env_steps")
    source = checkpoint_source(run_dir, POLICY_FILE, exported_at)
    if source is None and record is not None:
        return record
    assert source is not None  # checkpoint_source raises if there is nothing
    record = record_from_spec(source.spec, source.objects, source.checkpoint)
    record.trained_with["env_steps"] = source.step
    return record


def load_policy(
    path: str | os.PathLike[str],
    *,
    clip_actions: bool = False,
    device: str | torch.device = "cpu",
) -> Policy:
    """Load an exported policy, from its file or from a run directory.

    A run directory gives its ``policy.pt``, or its newest checkpoint (read
    with the run's ``policy_spec.json``) when that is newer than the export
    or there is no export.

    Example:
        >>> policy = load_policy("runs/cartpole-ppo-20250101-120000")
        >>> action = policy.act(observation)

    Args:
        path: a file written by :func:`export_policy`, or a run directory.
        clip_actions: clip ``Box`` actions into the space's bounds.
        device: where the agent runs.

    Raises:
        PolicyFileError: nothing to load at ``path``.
        PolicyFileError: the file is damaged, not a policy, of a newer format,
            or its weights do not fit the architecture it describes.
        ConfigError: ``clip_actions`` for a ``Box`` action space without a
            finite bound.
    """
    path = Path(path)
    if path.is_dir():
        record = _record_of_run(path)
    elif path.exists():
        record = read_policy_file(path)
    else:
        raise PolicyFileError(f"{path} does not exist (a policy file or run directory)")
    return _build(record, clip_actions=clip_actions, device=device)
