"""Errors of multi-agent envs, opponent pools and self-play (:mod:`parllel.multiagent`)."""

from __future__ import annotations

from parllel.errors.base import ParllelError

__all__ = [
    "MismatchedAgentsError",
]


class MismatchedAgentsError(ParllelError, ValueError):
    """A multi-agent env returned values for agents it does not declare in
    ``possible_agents``, or not for the agents that acted, or a dict action
    names an agent outside ``possible_agents`` or one that does not act at
    this step; the message names them."""
