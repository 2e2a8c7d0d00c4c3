"""JAX agents: the :class:`JaxAgent` protocol, :class:`ActorCriticAgent`,
:class:`SacAgent` and :class:`DqnAgent`."""

from parllel.jax.agents.actor_critic import ActorCriticAgent, build_actor_critic_agent
from parllel.jax.agents.base import JaxAgent
from parllel.jax.agents.dqn_agent import DqnAgent, build_dqn_agent
from parllel.jax.agents.sac_agent import SacAgent, build_sac_agent

__all__ = [
    "ActorCriticAgent",
    "DqnAgent",
    "JaxAgent",
    "SacAgent",
    "build_actor_critic_agent",
    "build_dqn_agent",
    "build_sac_agent",
]
