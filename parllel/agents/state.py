"""Per-env recurrent state kept by a handler, for any array type.

The state is a tree (or a single array) whose leaves are ``[n_envs, ...]``
arrays supporting ``state[index]`` and ``state[index] = value`` (numpy arrays
and torch tensors both do). Rows are gathered for the envs being stepped,
scattered back afterwards and reset to the agent's initial state.
:class:`AgentHandler` holds such a state with its agent and the agent's mode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.agents.base import Agent, check_mode
from parllel.tree import tree_items, tree_map

ALL = slice(None)
"""``env_indices`` meaning every env."""


def as_index(env_indices: Any) -> Any:
    """A row index for ``env_indices`` (a slice, int array, or sequence of ints)."""
    if env_indices is None or env_indices is Ellipsis:
        return ALL
    if isinstance(env_indices, (slice, np.ndarray)):
        return env_indices
    return np.asarray(env_indices, dtype=np.int64)


class EnvStates:
    """Recurrent state of ``n_envs`` envs, rows addressed by env index.

    Args:
        initial: the agent's ``initial_state(n_envs)`` (None: no state).
        initial_one: the agent's ``initial_state(1)``, copied into reset rows.

    Example:
        >>> states = EnvStates(np.zeros((4, 3)), np.zeros((1, 3)))
        >>> states.scatter(slice(0, 2), np.ones((2, 3))); states.reset([1])
        >>> states.gather(ALL)[:, 0]
        array([1., 0., 0., 0.])
    """

    def __init__(self, initial: Any, initial_one: Any) -> None:
        self.state = initial
        self._initial_one = initial_one

    @property
    def empty(self) -> bool:
        """True for a feed-forward agent (no state)."""
        return self.state is None

    def gather(self, index: Any) -> Any:
        """State rows of the envs at ``index`` (a view for slices, else a copy)."""
        if self.state is None:
            return None
        if isinstance(index, slice) and index == ALL:
            return self.state
        return tree_map(lambda leaf: leaf[index], self.state)

    def scatter(self, index: Any, new_state: Any) -> None:
        """Write the agent's new state rows for the envs at ``index``."""
        if self.state is None:
            return
        pairs = zip(_leaves(self.state), _leaves(new_state))
        for leaf, value in pairs:
            if leaf is not value:
                leaf[index] = value

    def reset(self, index: Any) -> None:
        """Set the rows at ``index`` to the initial state."""
        if self.state is None:
            return
        for leaf, zero in zip(_leaves(self.state), _leaves(self._initial_one)):
            leaf[index] = zero[0]


def _leaves(tree: Any) -> list[Any]:
    return [leaf for _, leaf in tree_items(tree)]


class AgentHandler:
    """What the handlers of one agent share: the agent, its mode, its per-env state.

    :class:`~parllel.agents.NumpyHandler` and
    ``parllel.torch.handler.TorchHandler`` derive from it and add how they
    run the agent; the agent is put in ``"sample"`` mode.

    Args:
        agent: the :class:`~parllel.agents.Agent`.
        n_envs: number of envs whose state the handler keeps.
        states: the agent's per-env state, as the handler keeps it.
    """

    def __init__(self, agent: Agent, n_envs: int, states: EnvStates) -> None:
        self.agent = agent
        self.n_envs = int(n_envs)
        self._states = states
        self._mode = "sample"
        agent.set_mode(self._mode)

    @property
    def recurrent(self) -> bool:
        """True if the agent has recurrent state."""
        return not self._states.empty

    @property
    def mode(self) -> str:
        """The agent's current mode."""
        return self._mode

    def set_mode(self, mode: str) -> None:
        """Switch the agent to ``"train"``, ``"sample"`` or ``"eval"``."""
        self._mode = check_mode(mode)
        self.agent.set_mode(mode)
