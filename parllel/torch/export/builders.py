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

from parllel.errors import ConfigError, PolicyFileError
from parllel.torch.agents import (
    ActorCriticAgent,
    build_dqn_agent,
    build_sac_agent,
)
from parllel.torch.models import build_actor_critic
from parllel.tree import tree_items, tree_map
from parllel.tree.utils import tree_to_builtin

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


def _is_nn_class(value: Any) -> bool:
    """Whether ``value`` is a torch.nn class (an activation such as ``nn.Tanh``)."""
    name = value.__name__ if isinstance(value, type) else ""
    return bool(name) and getattr(nn, name, None) is value


def _leaf_to_data(value: Any) -> Any:
    return {_TORCH_NN: value.__name__} if _is_nn_class(value) else value


def kwargs_to_data(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Builder arguments as plain values (``nn.Tanh`` becomes ``{"torch.nn": "Tanh"}``).

    Walked as every tree (:func:`~parllel.tree.tree_items`): mappings
    become dicts, tuples and lists become lists.

    Raises:
        ConfigError: for a value that has no plain form (a custom
            activation function, a tensor, an object), naming its path.
    """
    for path, value in tree_items(kwargs):
        plain = value is None or isinstance(value, (bool, int, float, str))
        if not plain and not _is_nn_class(value):
            raise ConfigError(
                f"argument {path}={value!r} cannot be stored in a policy file: only "
                "numbers, strings, lists, dicts and torch.nn classes (activations) "
                "can; rebuild the agent with such arguments or register a builder "
                "that takes them"
            )
    data = tree_to_builtin(dict(kwargs), _leaf_to_data, sequence=list)
    return {str(k): v for k, v in data.items()}


def _is_nn_reference(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {_TORCH_NN}


def _leaf_from_data(value: Any) -> Any:
    if not _is_nn_reference(value):
        return value
    found = getattr(nn, str(value[_TORCH_NN]), None)
    if not isinstance(found, type):
        raise PolicyFileError(f"torch.nn has no class {value[_TORCH_NN]!r}")
    return found


def kwargs_from_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`kwargs_to_data`."""
    plain = tree_map(_leaf_from_data, dict(data), is_leaf=_is_nn_reference)
    return {str(k): v for k, v in plain.items()}


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
