"""Agent builders a policy file names, and their arguments as plain data.

A policy file stores no pickled class: it names a registered builder
(``"actor_critic"``, ``"sac"``, ``"dqn"``) and the builder's keyword
arguments as plain values. Loading calls the builder again and loads the
weights of the modules it says make the policy. Register a builder for an
agent of your own (and record its :class:`~parllel.torch.architecture.Architecture`
when you build it)::

    register_agent_builder(
        "my_agent",
        build=lambda obs_space, action_space, kwargs: build_my_agent(
            obs_space, action_space, **kwargs),
        modules=lambda agent: {"model": agent.model},
    )
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
from torch import nn

from parllel.errors import PolicyExportError, PolicyFileError
from parllel.torch.agents import (
    ActorCriticAgent,
    build_dqn_agent,
    build_sac_agent,
)
from parllel.torch.models import build_actor_critic

__all__ = [
    "AgentBuilder",
    "agent_builder",
    "kwargs_from_data",
    "kwargs_to_data",
    "register_agent_builder",
]

_TORCH_NN = "torch.nn"


@dataclasses.dataclass(frozen=True)
class AgentBuilder:
    """How to rebuild an agent and which of its modules hold the policy.

    Attributes:
        build: ``(observation_space, action_space, kwargs) -> agent``.
        modules: ``agent -> {name: nn.Module}``, the modules whose weights
            make the policy (acting needs nothing else).
        current_kwargs: ``agent -> {name: value}``, arguments read from the
            trained agent at export, over the recorded ones (e.g. DQN's
            current ``epsilon``, used by stochastic actions).
    """

    build: Callable[[gym.Space, gym.Space, dict[str, Any]], Any]
    modules: Callable[[Any], dict[str, nn.Module]]
    current_kwargs: Callable[[Any], dict[str, Any]] | None = None


_BUILDERS: dict[str, AgentBuilder] = {}


def register_agent_builder(
    name: str,
    build: Callable[[gym.Space, gym.Space, dict[str, Any]], Any],
    modules: Callable[[Any], dict[str, nn.Module]],
    current_kwargs: Callable[[Any], dict[str, Any]] | None = None,
) -> None:
    """Register (or replace) the builder that policy files name ``name``."""
    _BUILDERS[name] = AgentBuilder(build, modules, current_kwargs)


def agent_builder(name: str) -> AgentBuilder:
    """The builder registered as ``name``.

    Raises:
        PolicyFileError: if no builder has that name.
    """
    try:
        return _BUILDERS[name]
    except KeyError:
        raise PolicyFileError(
            f"the policy needs agent builder {name!r}, which is not registered "
            f"(registered: {sorted(_BUILDERS)}); import the module that calls "
            "register_agent_builder for it first"
        ) from None


def _value_to_data(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_value_to_data(name, item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _value_to_data(name, v) for k, v in value.items()}
    class_name = value.__name__ if isinstance(value, type) else ""
    if class_name and getattr(nn, class_name, None) is value:
        return {_TORCH_NN: class_name}  # an activation such as nn.Tanh
    raise PolicyExportError(
        f"argument {name}={value!r} cannot be stored in a policy file: only "
        "numbers, strings, lists, dicts and torch.nn classes (activations) can; "
        "rebuild the agent with such arguments or register a builder that takes them"
    )


def kwargs_to_data(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Builder arguments as plain values (``nn.Tanh`` becomes ``{"torch.nn": "Tanh"}``).

    Raises:
        PolicyExportError: for a value that has no plain form (a custom
            activation function, a tensor, an object).
    """
    return {str(k): _value_to_data(str(k), v) for k, v in kwargs.items()}


def _value_from_data(value: Any) -> Any:
    if isinstance(value, list):
        return [_value_from_data(item) for item in value]
    if isinstance(value, Mapping):
        if set(value) == {_TORCH_NN}:
            found = getattr(nn, str(value[_TORCH_NN]), None)
            if not isinstance(found, type):
                raise PolicyFileError(f"torch.nn has no class {value[_TORCH_NN]!r}")
            return found
        return {k: _value_from_data(v) for k, v in value.items()}
    return value


def kwargs_from_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`kwargs_to_data`."""
    return {str(k): _value_from_data(v) for k, v in data.items()}


def _build_actor_critic(obs: Any, action: Any, kwargs: dict[str, Any]) -> Any:
    return ActorCriticAgent(*build_actor_critic(obs, action, **kwargs))


def _build_sac(obs: Any, action: Any, kwargs: dict[str, Any]) -> Any:
    return build_sac_agent(obs, action, **kwargs)


def _build_dqn(obs: Any, action: Any, kwargs: dict[str, Any]) -> Any:
    return build_dqn_agent(obs, action, **kwargs)


register_agent_builder(
    "actor_critic",
    build=_build_actor_critic,
    modules=lambda agent: {"model": agent.model},
)
register_agent_builder(
    "sac",
    build=_build_sac,
    modules=lambda agent: {"actor": agent.actor},
)
register_agent_builder(
    "dqn",
    build=_build_dqn,
    modules=lambda agent: {"q_network": agent.q_network},
    current_kwargs=lambda agent: {"epsilon": float(agent.epsilon)},
)
