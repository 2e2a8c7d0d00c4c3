"""JAX agents: :class:`ActorCriticAgent` and the builders of the SAC and DQN
agents; the :class:`~parllel.jax.agents.base.JaxAgent` protocol is in ``base``."""

from parllel.jax.agents.actor_critic import ActorCriticAgent, build_actor_critic_agent
from parllel.jax.agents.dqn_agent import build_dqn_agent
from parllel.jax.agents.sac_agent import build_sac_agent

__all__ = [
    "ActorCriticAgent",
    "build_actor_critic_agent",
    "build_dqn_agent",
    "build_sac_agent",
]
