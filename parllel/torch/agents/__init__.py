"""Torch agents implementing the :class:`parllel.agents.Agent` protocol."""

from parllel.torch.agents.actor_critic import ActorCriticAgent

__all__ = ["ActorCriticAgent"]
