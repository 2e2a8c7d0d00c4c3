"""ActorCriticAgent: an actor-critic network, its distribution and parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import gymnasium as gym
import jax
import numpy as np

from parllel import fields
from parllel.agents.base import check_mode
from parllel.errors import ConfigError
from parllel.jax.agents.base import PolicyEvaluation
from parllel.jax.inputs import jax_input
from parllel.jax.models.actor_critic import (
    ActorCriticNetwork,
    ActorCriticOutput,
    build_actor_critic,
)
from parllel.jax.models.params import init_params, load_params, params_to_numpy
from parllel.seeding import check_seed
from parllel.tree import tree_map

__all__ = ["ACTION_MASK", "ActorCriticAgent", "build_actor_critic_agent"]

ACTION_MASK = "action_mask"
"""Key of the legal-action mask in a dict observation (PettingZoo's name)."""


class ActorCriticAgent:
    """:class:`~parllel.jax.agents.base.JaxAgent` for an :class:`ActorCriticNetwork`.

    ``policy_step`` samples actions (the mode when ``deterministic``) and
    records ``agent_info = {log_prob, value}``, as the torch
    ``ActorCriticAgent``; :meth:`evaluate` is what PPO differentiates.
    A dict observation with an ``action_mask_key`` leaf masks a
    :class:`~parllel.jax.distributions.Categorical`'s illegal actions.

    Example:
        >>> network, distribution = build_actor_critic(obs_space, action_space)
        >>> agent = ActorCriticAgent(network, distribution,
        ...     example_observation=obs_space.sample()[None], key=jax.random.key(seeds.torch))
        >>> handler = JaxHandler(agent, n_envs=8, seed=seeds.actions)

    Args:
        network: the actor-critic network.
        distribution: the action distribution matching its policy head.
        params: initial parameters (e.g. :func:`params_from_torch`); or give
            ``example_observation`` and ``key`` to initialize them.
        example_observation: one batch of observations (leading dim) for
            initialization.
        key: PRNG key of the initialization.
        action_mask_key: key of the mask in dict observations (None: never).
    """

    def __init__(
        self,
        network: ActorCriticNetwork,
        distribution: Any,
        params: Any = None,
        *,
        example_observation: Any = None,
        key: jax.Array | None = None,
        action_mask_key: str | None = ACTION_MASK,
    ) -> None:
        if params is None:
            if example_observation is None or key is None:
                raise ConfigError(
                    "ActorCriticAgent needs params, or example_observation and key "
                    "to initialize them"
                )
            params = init_params(network, example_observation, key)
        self.network = network
        self.distribution = distribution
        self.params = params
        self.action_mask_key = action_mask_key
        self.mode = "sample"

    def _dist_params(self, dist_params: Any, observation: Any) -> Any:
        key = self.action_mask_key
        if (
            key is None
            or not isinstance(observation, Mapping)
            or key not in observation
        ):
            return dist_params
        return self.distribution.masked(dist_params, observation[key])

    def _apply(self, params: Any, observation: Any) -> ActorCriticOutput:
        return cast(
            ActorCriticOutput, self.network.apply({"params": params}, observation)
        )

    def policy_step(
        self, params: Any, observation: Any, key: jax.Array, deterministic: bool
    ) -> tuple[Any, dict[str, Any]]:
        """Actions and ``{log_prob, value}`` for observations ``[N, ...]``."""
        out = self._apply(params, observation)
        dist_params = self._dist_params(out.dist_params, observation)
        if deterministic:
            action = self.distribution.deterministic(dist_params)
        else:
            action = self.distribution.sample(dist_params, key)
        info = {
            fields.LOG_PROB: self.distribution.log_likelihood(action, dist_params),
            fields.VALUE: out.value,
        }
        return action, info

    def policy_value(self, params: Any, observation: Any) -> Any:
        """State values ``[N]``."""
        return self._apply(params, observation).value

    def evaluate(self, params: Any, observation: Any, action: Any) -> PolicyEvaluation:
        """Log-probabilities of ``action``, entropies and values, each ``[N]``."""
        out = self._apply(params, observation)
        dist_params = self._dist_params(out.dist_params, observation)
        return PolicyEvaluation(
            self.distribution.log_likelihood(action, dist_params),
            self.distribution.entropy(dist_params),
            out.value,
        )

    def initial_state(self, n_envs: int) -> None:
        """None: feed-forward."""
        return None

    def set_mode(self, mode: str) -> None:
        """Record the mode (the handler acts deterministically in ``"eval"``)."""
        self.mode = check_mode(mode)

    def state_dict(self) -> dict[str, Any]:
        """``{"params": ...}`` with numpy leaves (for checkpoints)."""
        return {"params": params_to_numpy(self.params)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.params = load_params(self.params, state["params"])


def build_actor_critic_agent(
    observation_space: gym.Space,
    action_space: gym.Space,
    *,
    seed: int,
    **network_options: Any,
) -> ActorCriticAgent:
    """An :class:`ActorCriticAgent` with fresh parameters, in one call.

    Args:
        observation_space: the env's observation space.
        action_space: its action space.
        seed: seed of the initialization key (e.g. ``seeds.torch``, the
            learner's stream).
        **network_options: options of
            :func:`~parllel.jax.models.build_actor_critic` (``hidden_sizes``,
            ``shared_trunk``, ``orthogonal_init``, ...).

    Example:
        >>> agent = build_actor_critic_agent(obs_space, action_space, seed=0)
    """
    network, distribution = build_actor_critic(
        observation_space, action_space, **network_options
    )
    example = tree_map(lambda leaf: np.asarray(leaf)[None], observation_space.sample())
    return ActorCriticAgent(
        network,
        distribution,
        example_observation=jax_input(example),
        key=jax.random.key(check_seed("seed", seed)),
    )
