"""One space for all agents, stacked over agents: the spaces an adapter declares.

A multi-agent env's agents must share one observation space and one action
space (one policy can then serve any agent); the adapters declare the
*stacked* spaces, with the agent dimension first:

============================  ===========================================
agent space                   stacked space (``A`` agents)
============================  ===========================================
``Box(low, high, shape)``     ``Box`` of shape ``(A, *shape)``
``Discrete(n)``               ``MultiDiscrete([n] * A)`` (int64 ``[A]``)
``MultiDiscrete(nvec)``       ``MultiDiscrete`` of shape ``(A, *nvec.shape)``
``MultiBinary(n)``            ``MultiBinary((A, *shape))``
``Dict`` of the above         ``Dict`` of the stacked leaves
============================  ===========================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from parllel.errors import ConfigError
from parllel.tree import tree_map
from parllel.tree.writing import WriteRules, write_nested


def shared_space(
    agents: Sequence[str], space_of: Callable[[str], gym.Space], kind: str
) -> gym.Space:
    """The one space every agent has, or :class:`ConfigError` naming the odd ones.

    Args:
        agents: the env's ``possible_agents``.
        space_of: ``env.observation_space`` or ``env.action_space`` (per agent).
        kind: ``"observation"`` or ``"action"``, for the message.

    Example:
        >>> shared_space(["a", "b"], lambda agent: gym.spaces.Discrete(3), "action")
        Discrete(3)
    """
    if not agents:
        raise ConfigError("the env has no agents (possible_agents is empty)")
    first = space_of(agents[0])
    differing = [(agent, space_of(agent)) for agent in agents[1:]]
    differing = [(agent, space) for agent, space in differing if space != first]
    if differing:
        others = "; ".join(f"{agent!r} has {space}" for agent, space in differing)
        raise ConfigError(
            f"the agents do not share one {kind} space: {agents[0]!r} has {first}, "
            f"but {others}. parllel stacks the agents of an env into one "
            f"[A, ...] {kind}, so every agent needs the same {kind} space; pad "
            "the spaces to one (e.g. SuperSuit's pad_observations_v0 / "
            "pad_action_space_v0) or wrap the env so the agents agree"
        )
    return first


def stack_space(space: gym.Space, n_agents: int, path: str = "") -> gym.Space:
    """``space`` stacked over ``n_agents`` agents (agent dimension first).

    Raises:
        ConfigError: the space (or a leaf of a Dict) is of a kind that
            cannot be stacked; names the leaf.

    Example:
        >>> stack_space(gym.spaces.Discrete(5), 3)
        MultiDiscrete([5 5 5])
    """
    n = int(n_agents)
    if isinstance(space, gym.spaces.Box):
        low = np.stack([space.low] * n)
        high = np.stack([space.high] * n)
        return gym.spaces.Box(low, high, dtype=space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        nvec = np.full(n, int(space.n), dtype=np.int64)
        start = np.full(n, int(space.start), dtype=np.int64)
        return gym.spaces.MultiDiscrete(nvec, dtype=np.int64, start=start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return gym.spaces.MultiDiscrete(
            np.stack([space.nvec] * n),
            dtype=space.dtype,
            start=np.stack([space.start] * n),
        )
    if isinstance(space, gym.spaces.MultiBinary):
        return gym.spaces.MultiBinary((n, *space.shape))
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict(
            {
                key: stack_space(sub, n, f"{path}.{key}" if path else str(key))
                for key, sub in space.spaces.items()
            }
        )
    where = f" (at {path!r})" if path else ""
    raise ConfigError(
        f"cannot stack the agents' space {space}{where} over agents: supported "
        "are Box, Discrete, MultiDiscrete, MultiBinary and Dicts of them"
    )


def unstack_space(space: gym.Space) -> gym.Space:
    """One agent's space from a space stacked over agents (:func:`stack_space`'s inverse).

    A model shared by every agent (parameter sharing) is built from these
    spaces: e.g. ``unstack_space(cage.spaces.observation)``.

    Raises:
        ConfigError: the space has no agent dimension to remove.

    Example:
        >>> unstack_space(gym.spaces.MultiDiscrete([5, 5, 5]))
        Discrete(5)
    """
    if isinstance(space, gym.spaces.Box) and len(space.shape) >= 1:
        return gym.spaces.Box(space.low[0], space.high[0], dtype=space.dtype)
    if isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return gym.spaces.Discrete(int(space.nvec[0]), start=int(space.start[0]))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return gym.spaces.MultiDiscrete(
            space.nvec[0], dtype=space.dtype, start=space.start[0]
        )
    if isinstance(space, gym.spaces.MultiBinary) and len(space.shape) >= 2:
        shape = space.shape[1:]
        return gym.spaces.MultiBinary(shape[0] if len(shape) == 1 else shape)
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict(
            {key: unstack_space(sub) for key, sub in space.spaces.items()}
        )
    raise ConfigError(
        f"{space} has no agent dimension to unstack (expected a space stacked "
        "over agents by a multi-agent adapter)"
    )


def copy_value(value: Any) -> Any:
    """A copy of a stacked value (dicts copied leaf by leaf)."""
    return tree_map(lambda leaf: leaf.copy(), value)


def write_row(stacked: Any, index: int, value: Any, agent: str) -> None:
    """Write one agent's observation into row ``index`` of a stacked value.

    Raises:
        ConfigError: the observation does not fit the agents' space (a
            missing or extra Dict key, a wrong shape or dtype); names the agent
            and the leaf.
    """

    def write(leaf: np.ndarray, item: Any, path: str) -> None:
        try:
            leaf[index] = item
        except (ValueError, TypeError) as exc:
            where = f" at {path!r}" if path else ""
            raise ConfigError(
                f"agent {agent!r}'s observation{where} does not fit its space "
                f"(shape {leaf.shape[1:]}, dtype {leaf.dtype}): {exc}"
            ) from None

    rules = WriteRules(what=f"agent {agent!r}'s observation", error=ConfigError)
    write_nested(stacked, value, write, rules)


def action_mask_of(stacked_observation: Any) -> np.ndarray | None:
    """The ``action_mask`` leaf of a stacked Dict observation (None without one)."""
    if isinstance(stacked_observation, dict):
        return stacked_observation.get("action_mask")
    return None
