"""What an algorithm needs from an agent: re-evaluating stored actions.

PPO does not know models or distributions. It calls
:meth:`PolicyEvaluator.evaluate` on minibatches of the sample tree and gets
back, for the stored actions, their log-probabilities under the current
policy, the policy's entropy and the current value estimates. Any agent
exposing such a method works; :class:`ActorCriticEvaluator` provides one for
an :class:`~parllel.torch.models.actor_critic.ActorCriticModel` and a distribution.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch

from parllel.torch.distributions.categorical import (
    ACTION_MASK,
    action_mask_of,
    masked_dist_params,
)
from parllel.torch.models.actor_critic import ActorCriticModel

__all__ = ["ActorCriticEvaluator", "PolicyEvaluation", "PolicyEvaluator"]


class PolicyEvaluation(NamedTuple):
    """Current-policy quantities for stored actions, all with the actions' leading dims.

    Attributes:
        log_prob: ``log pi(action | observation)``, e.g. ``[N]`` or ``[T, B]``.
        entropy: policy entropy at each observation.
        value: value estimate at each observation.
    """

    log_prob: torch.Tensor
    entropy: torch.Tensor
    value: torch.Tensor


@runtime_checkable
class PolicyEvaluator(Protocol):
    """The one method PPO calls on an agent.

    ``evaluate(observation, action, initial_state, resets, **extra_inputs)``
    returns a :class:`PolicyEvaluation` (or a 3-tuple in that order) with the
    action's leading dims, carrying gradients. Feed-forward: ``[N, ...]``
    shuffled samples, ``initial_state`` and ``resets`` None. Recurrent:
    ``[T, B_mb, ...]`` env columns, their stored ``INITIAL_STATE`` and
    ``resets`` ``[T, B_mb]`` (zero the state entering those steps). See
    docs/torch.md ("What the agent must provide").
    """

    def evaluate(
        self,
        observation: Any,
        action: torch.Tensor,
        initial_state: Any,
        resets: torch.Tensor | None,
        **extra_inputs: torch.Tensor,
    ) -> PolicyEvaluation:
        """Evaluate stored actions under the current policy."""
        ...


class ActorCriticEvaluator:
    """:class:`PolicyEvaluator` for an :class:`ActorCriticModel` and a distribution.

    A stored recurrent state ``[B, num_states, num_layers, H]`` (see
    :meth:`~parllel.torch.models.recurrent.RecurrentCore.state_to_batch_first`) is
    unpacked for the model's core; ``None`` starts from zeros. A dict
    observation with an ``action_mask_key`` leaf masks the distribution as
    :class:`~parllel.torch.agents.ActorCriticAgent` did while sampling, so
    the recomputed log-probabilities and entropies are those of the masked
    policy.

    Example:
        >>> model, distribution = build_actor_critic(obs_space, action_space)
        >>> ppo = PPO(ActorCriticEvaluator(model, distribution), optimizer)

    Args:
        model: the actor-critic model.
        distribution: the action distribution matching its policy head.
        action_mask_key: key of the mask in dict observations (None: never
            mask); use the agent's.
    """

    def __init__(
        self,
        model: ActorCriticModel,
        distribution: Any,
        *,
        action_mask_key: str | None = ACTION_MASK,
    ) -> None:
        self.model = model
        self.distribution = distribution
        self.action_mask_key = action_mask_key

    def evaluate(
        self,
        observation: Any,
        action: torch.Tensor,
        initial_state: Any,
        resets: torch.Tensor | None,
        **extra_inputs: torch.Tensor,
    ) -> PolicyEvaluation:
        """Run the model and score ``action``; see :class:`PolicyEvaluator`."""
        if extra_inputs:
            raise TypeError(
                "ActorCriticEvaluator takes no extra inputs; got "
                f"{sorted(extra_inputs)} (write an evaluator that uses them)"
            )
        state = initial_state
        core = self.model.core
        if core is not None and isinstance(state, torch.Tensor):
            state = core.state_from_batch_first(state)
        out = self.model(observation, state, resets)
        params = masked_dist_params(
            self.distribution,
            out.dist_params,
            action_mask_of(observation, self.action_mask_key),
        )
        return PolicyEvaluation(
            log_prob=self.distribution.log_likelihood(action, params),
            entropy=self.distribution.entropy(params),
            value=out.value,
        )
