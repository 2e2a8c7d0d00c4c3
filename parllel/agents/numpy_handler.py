"""NumpyHandler: runs a numpy agent on sample-tree slots (no framework needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.agents.base import Agent, AgentExample
from parllel.agents.state import ALL, AgentHandler, EnvStates, as_index
from parllel.errors import DtypeError, ShapeError
from parllel.tree import tree_items, tree_map
from parllel.tree.writing import WriteRules, write_nested

#: Agent outputs may hold more than the slots keep; a tuple fills keys "0", "1", ...
OUTPUT_RULES = WriteRules(what="the agent's output", extra_ok=True)


def write_outputs(out: Any, value: Any) -> None:
    """Copy ``value`` (array or tree) into the slot views ``out`` (ndarrays or tensors).

    A slot node keyed ``"0"``, ``"1"``, ... (e.g. a gymnasium ``Tuple``
    action) takes a tuple as well as a dict with those keys; keys the slots
    lack are ignored. See :func:`~parllel.tree.writing.write_nested`.

    Raises:
        TreeStructureError: ``value`` lacks a leaf of ``out`` (naming its path).
        DtypeError, ShapeError: a leaf does not fit its slot.
    """
    write_nested(out, value, _copy_output, OUTPUT_RULES)


def _copy_output(out: Any, value: Any, path: str) -> None:
    """Copy one leaf of the agent's output into its slot view: an ndarray or a tensor.

    ndarrays take values that cast with numpy's ``same_kind`` rule and
    broadcast to their shape; tensors (the torch handler's views) copy with
    ``Tensor.copy_``.
    """
    if not isinstance(out, np.ndarray):
        out.copy_(value)
        return
    try:
        np.copyto(out, value, casting="same_kind")
    except (TypeError, ValueError) as exc:
        where = f" at {path!r}" if path else ""
        error = DtypeError if isinstance(exc, TypeError) else ShapeError
        raise error(f"cannot write the agent's output{where}: {exc}") from None


def batch_of_one(example: Any) -> Any:
    """``example`` with a leading dim of 1 on every leaf (numpy)."""
    return tree_map(lambda leaf: np.asarray(leaf)[None], example)


def first_row(tree: Any) -> Any:
    """Row 0 of every leaf of ``tree``, as numpy values."""
    return tree_map(lambda leaf: np.asarray(leaf)[0], tree)


def zero_batch_of_one(example: Any) -> Any:
    """Zeros shaped like ``example`` with a leading dim of 1 (None stays None)."""
    if example is None:
        return None
    return tree_map(lambda leaf: np.zeros_like(np.asarray(leaf))[None], example)


class NumpyHandler(AgentHandler):
    """:class:`~parllel.agents.Handler` for agents that compute with numpy.

    Passes the sample tree's numpy views straight to the agent, copies the
    returned actions and agent info into the ``out`` slots, and keeps the
    agent's per-env recurrent state (numpy, ``[n_envs, ...]``).

    Args:
        agent: an :class:`~parllel.agents.Agent` working on numpy arrays.
        n_envs: number of envs whose state this handler keeps.

    Example:
        >>> handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), n_envs=8)
        >>> example = handler.example_outputs(cage.example[fields.OBSERVATION])
    """

    def __init__(self, agent: Agent, n_envs: int) -> None:
        states = EnvStates(agent.initial_state(int(n_envs)), agent.initial_state(1))
        super().__init__(agent, n_envs, states)

    def example_outputs(
        self, observation: Any, action: Any = None, reward: Any = None
    ) -> AgentExample:
        """One env's action, agent info and state for ``observation`` (for allocation).

        ``action`` and ``reward`` are examples used to build zero previous
        action/reward inputs (None: the agent gets None).
        """
        step = self.agent.step(
            batch_of_one(observation),
            zero_batch_of_one(action),
            zero_batch_of_one(reward),
            self.agent.initial_state(1),
        )
        state = None if step.state is None else first_row(step.state)
        return AgentExample(first_row(step.action), first_row(step.agent_info), state)

    def step(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        *,
        out_action: Any,
        out_agent_info: Any,
        env_indices: Any = ALL,
    ) -> None:
        """Run the agent for ``env_indices`` and write its outputs into the slots."""
        index = as_index(env_indices)
        step = self.agent.step(
            observation, prev_action, prev_reward, self._states.gather(index)
        )
        write_outputs(out_action, step.action)
        if len(out_agent_info):
            write_outputs(out_agent_info, step.agent_info)
        self._states.scatter(index, step.state)

    def value(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        env_indices: Any = ALL,
    ) -> np.ndarray:
        """Values of ``observation`` given the current state of ``env_indices``."""
        state = self._states.gather(as_index(env_indices))
        return np.asarray(
            self.agent.value(observation, prev_action, prev_reward, state)
        )

    def reset(self, env_indices: Any = None) -> None:
        """Reset the state of ``env_indices`` (all envs if None)."""
        self._states.reset(as_index(env_indices))

    def reset_one(self, env_index: int) -> None:
        """Reset the state of one env."""
        self._states.reset(int(env_index))

    def write_state(self, out: Any) -> None:
        """Copy the current state ``[n_envs, ...]`` into ``out`` (e.g. INITIAL_STATE)."""
        if self._states.empty:
            return
        outs = [np.asarray(leaf) for _, leaf in tree_items(_ndarrays(out))]
        for target, leaf in zip(outs, [v for _, v in tree_items(self._states.state)]):
            np.copyto(target, leaf)


def _ndarrays(tree: Any) -> Any:
    """Numpy views of Array leaves (other leaves unchanged)."""
    return tree_map(
        lambda leaf: leaf.to_ndarray() if hasattr(leaf, "to_ndarray") else leaf, tree
    )
