"""The Agent and Handler protocols, framework-free.

An :class:`Agent` is RL logic: given observations (and the previous action,
reward and recurrent state of each env) it returns actions, extra outputs
(``agent_info``, e.g. value and log-probability) and the next state. It is a
pure function of its inputs; it knows nothing about envs, buffers or devices.

A :class:`Handler` wraps an agent and owns everything else: converting the
numpy buffers of the sample tree into the agent's array type (zero-copy
torch views for :class:`~parllel.torch.handler.TorchHandler`), device moves,
writing outputs into the ``out`` slots, and the per-env recurrent state,
which it resets for the envs the sampler names.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

from parllel.errors import ConfigError

MODES = ("train", "sample", "eval")
"""Agent modes: ``train`` (optimizing), ``sample`` (stochastic actions while
collecting), ``eval`` (deterministic actions for evaluation)."""


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is one of :data:`MODES`, else raise ConfigError."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


class AgentStep(NamedTuple):
    """What :meth:`Agent.step` returns, every leaf with leading dim ``[N]``.

    Attributes:
        action: actions (array or tree of arrays).
        agent_info: dict (possibly empty) of extra outputs, e.g.
            ``{fields.VALUE: ..., fields.LOG_PROB: ...}``.
        state: the recurrent state after the step (``[N, ...]`` leaves), or
            None for a feed-forward agent.
    """

    action: Any
    agent_info: Any
    state: Any = None


class AgentExample(NamedTuple):
    """Example outputs of one env (no leading dim), used to allocate buffers.

    Attributes:
        action: example action.
        agent_info: example ``agent_info`` dict.
        state: example recurrent state of one env, or None.
    """

    action: Any
    agent_info: Any
    state: Any = None


@runtime_checkable
class Agent(Protocol):
    """RL logic: observations in, actions and extras out; no env bookkeeping.

    Arrays are of whatever type the handler gives (numpy for
    :class:`~parllel.agents.NumpyHandler`, torch tensors for the torch
    handler); every leaf has a leading env dim ``[N]``. ``prev_action`` and
    ``prev_reward`` are None when the sample tree does not keep them; they
    are zero at the first step of every episode. Recurrent state is passed
    in and returned, batch-first (``[N, ...]`` leaves), so the handler can
    keep, slice and reset it per env.

    Example:
        >>> class Greedy:
        ...     def initial_state(self, n_envs): return None
        ...     def step(self, observation, prev_action, prev_reward, state):
        ...         return AgentStep(observation.argmax(-1), {})
        ...     def value(self, observation, prev_action, prev_reward, state):
        ...         return observation.max(-1)
        ...     def set_mode(self, mode): pass
    """

    def initial_state(self, n_envs: int) -> Any:
        """State of ``n_envs`` envs at the start of an episode (None: feed-forward)."""
        ...

    def step(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> AgentStep:
        """Actions, agent info and next state for a batch of envs."""
        ...

    def value(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> Any:
        """State values ``[N]`` (for bootstrapping); does not advance the state."""
        ...

    def set_mode(self, mode: str) -> None:
        """Switch to ``"train"``, ``"sample"`` or ``"eval"`` (deterministic)."""
        ...


@runtime_checkable
class Handler(Protocol):
    """Runs an agent on sample-tree slots and keeps the per-env recurrent state.

    Every argument is numpy (views of the sample tree, leading dim = the envs
    addressed by ``env_indices``); outputs are written in place. ``env_indices``
    selects rows of the handler's state: a slice (e.g. one half of the envs in
    the alternating sampler) or an integer array; default all envs.

    Example:
        >>> handler = NumpyHandler(RandomAgent(space, seed=0), n_envs=8)
        >>> example = handler.example_outputs(cage.example[fields.OBSERVATION])
        >>> handler.step(obs[t], None, None, out_action=action[t], out_agent_info={})
    """

    n_envs: int

    @property
    def recurrent(self) -> bool:
        """True if the agent has recurrent state."""
        ...

    @property
    def mode(self) -> str:
        """The current mode (one of :data:`MODES`)."""
        ...

    def set_mode(self, mode: str) -> None:
        """Switch the agent's mode."""
        ...

    def example_outputs(
        self, observation: Any, action: Any = None, reward: Any = None
    ) -> AgentExample:
        """Run the agent on one example observation; return one env's outputs."""
        ...

    def step(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        *,
        out_action: Any,
        out_agent_info: Any,
        env_indices: Any = ...,
    ) -> None:
        """Compute actions for ``env_indices``; write them and agent info into ``out``."""
        ...

    def value(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        env_indices: Any = ...,
    ) -> Any:
        """Values (numpy ``[N]``) of observations, with the current state of those envs."""
        ...

    def reset(self, env_indices: Any = None) -> None:
        """Reset the recurrent state of these envs (all if None)."""
        ...

    def reset_one(self, env_index: int) -> None:
        """Reset the recurrent state of one env."""
        ...

    def write_state(self, out: Any) -> None:
        """Copy the state of every env into ``out`` (``[n_envs, ...]`` numpy/Array)."""
        ...
