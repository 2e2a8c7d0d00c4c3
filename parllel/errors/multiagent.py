"""Errors of multi-agent envs, opponent pools and self-play (:mod:`parllel.multiagent`)."""

from __future__ import annotations

from parllel.errors.base import ConfigError, ParllelError

__all__ = [
    "AgentSpaceError",
    "EmptyPoolError",
    "MismatchedAgentsError",
    "NonActingAgentError",
    "UnknownSnapshotError",
    "WrongAdapterError",
]


class AgentSpaceError(ConfigError):
    """The agents of a multi-agent env do not share one observation or action
    space, or a space cannot be stacked over agents; the message names the
    agents and their spaces."""


class MismatchedAgentsError(ParllelError, ValueError):
    """A multi-agent env returned values for agents it does not declare in
    ``possible_agents``, or not for the agents that acted, or a dict action
    names an agent outside ``possible_agents``; the message names them."""


class NonActingAgentError(ParllelError, ValueError):
    """An action was given for an agent that does not act at this step (or
    none for one that does); the message names the agent."""


class WrongAdapterError(ConfigError):
    """A PettingZoo env was given to the adapter of the other API: an
    ``AECEnv`` to :class:`~parllel.multiagent.ParallelEnvAdapter`, or a
    ``ParallelEnv`` to :class:`~parllel.multiagent.AECEnvAdapter`; the
    message names the env and the adapter to use."""


class EmptyPoolError(ParllelError, RuntimeError):
    """An opponent was asked of an :class:`~parllel.multiagent.OpponentPool`
    that holds no snapshot yet (add the learner's first snapshot)."""


class UnknownSnapshotError(ParllelError, KeyError):
    """An opponent id names no snapshot the pool holds (never added, or evicted)."""
