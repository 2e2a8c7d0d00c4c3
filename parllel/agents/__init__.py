"""Agent and Handler protocols and numpy agents (no torch needed).

- :class:`Agent`: RL logic, a pure function of observations, previous
  action/reward and recurrent state.
- :class:`Handler`: runs an agent on sample-tree slots, writes its outputs in
  place and keeps per-env recurrent state. :class:`NumpyHandler` is the
  framework-free one; ``parllel.torch.handler.TorchHandler`` the torch one.
- :class:`RandomAgent`, :class:`ScriptedAgent`: numpy agents.
"""

from parllel.agents.base import Agent, AgentStep, Handler
from parllel.agents.numpy_handler import NumpyHandler
from parllel.agents.scripted import RandomAgent, ScriptedAgent

__all__ = [
    "Agent",
    "AgentStep",
    "Handler",
    "NumpyHandler",
    "RandomAgent",
    "ScriptedAgent",
]
