"""JAX agents: the :class:`JaxAgent` protocol and :class:`ActorCriticAgent`."""

from parllel.jax.agents.actor_critic import ActorCriticAgent, build_actor_critic_agent
from parllel.jax.agents.base import JaxAgent, PolicyEvaluation

__all__ = [
    "ActorCriticAgent",
    "JaxAgent",
    "PolicyEvaluation",
    "build_actor_critic_agent",
]
