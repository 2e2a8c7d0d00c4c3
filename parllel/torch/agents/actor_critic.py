"""ActorCriticAgent: an actor-critic model and its distribution as an Agent."""

from __future__ import annotations

from typing import Any

import torch

from parllel import fields
from parllel.agents.base import AgentStep, check_mode
from parllel.torch.distributions.categorical import (
    ACTION_MASK,
    action_mask_of,
    masked_dist_params,
)
from parllel.torch.models.actor_critic import ActorCriticModel
from parllel.torch.utils import check_device

__all__ = ["ActorCriticAgent"]


class ActorCriticAgent:
    """:class:`~parllel.agents.Agent` for an :class:`ActorCriticModel`.

    ``step`` samples actions (the mode in ``"eval"`` mode) and records
    ``agent_info = {log_prob, value}``; a recurrent state is kept batch-first,
    ``[N, num_states, num_layers, H]``. A dict observation with an
    ``action_mask_key`` leaf masks the distribution, so illegal actions are
    never chosen (build the PPO evaluator with the same key; see
    docs/multiagent.md, "Action masks").

    Args:
        distribution: the action distribution matching the policy head.
        device: move the model there (default: where its parameters are).
        action_mask_key: key of the mask in dict observations (None: never mask).
        generator: the torch generator actions are sampled from (None: torch's
            global RNG); ``TorchHandler(agent, n_envs, seed=seeds.actions)``
            sets one.

    Example:
        >>> agent = ActorCriticAgent(*build_actor_critic(obs_space, action_space))
        >>> handler = TorchHandler(agent, n_envs=8)
    """

    def __init__(
        self,
        model: ActorCriticModel,
        distribution: Any,
        device: Any = None,
        *,
        action_mask_key: str | None = ACTION_MASK,
        generator: torch.Generator | None = None,
    ) -> None:
        if device is not None:
            model = model.to(check_device(device))
        self.model = model
        self.distribution = distribution
        parameter = next(model.parameters(), None)
        self.device = parameter.device if parameter is not None else torch.device("cpu")
        self.deterministic = False
        self.action_mask_key = action_mask_key
        self.generator = generator

    def initial_state(self, n_envs: int) -> torch.Tensor | None:
        """Zero state ``[n_envs, num_states, num_layers, H]`` (None if feed-forward)."""
        core = self.model.core
        state = self.model.initial_state(n_envs, self.device)
        if core is None or state is None:
            return None
        return core.state_to_batch_first(state)

    def _unpack(self, state: torch.Tensor | None) -> Any:
        if state is None or self.model.core is None:
            return None
        return self.model.core.state_from_batch_first(state)

    def step(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> AgentStep:
        """Sample (or, in eval mode, pick the mode of) actions; record log-prob and value."""
        out = self.model(observation, self._unpack(state))
        params = masked_dist_params(
            self.distribution,
            out.dist_params,
            action_mask_of(observation, self.action_mask_key),
        )
        if self.deterministic:
            action = self.distribution.deterministic(params)
        else:
            action = self.distribution.sample(params, self.generator)
        info = {
            fields.LOG_PROB: self.distribution.log_likelihood(action, params),
            fields.VALUE: out.value,
        }
        new_state = None
        if out.state is not None and self.model.core is not None:
            new_state = self.model.core.state_to_batch_first(out.state)
        return AgentStep(action, info, new_state)

    def value(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> torch.Tensor:
        """State values ``[N]`` (the state is not advanced)."""
        return self.model(observation, self._unpack(state)).value

    def set_mode(self, mode: str) -> None:
        """``train``: ``model.train()``; ``sample``/``eval``: ``model.eval()``;
        ``eval`` also makes actions deterministic."""
        check_mode(mode)
        self.model.train(mode == "train")
        self.deterministic = mode == "eval"
