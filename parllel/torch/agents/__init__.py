"""Torch agents implementing the :class:`parllel.agents.Agent` protocol."""

from parllel.torch.agents.actor_critic import ActorCriticAgent
from parllel.torch.agents.dqn_agent import build_dqn_agent
from parllel.torch.agents.sac_agent import build_sac_agent

__all__ = [
    "ActorCriticAgent",
    "build_dqn_agent",
    "build_sac_agent",
]
