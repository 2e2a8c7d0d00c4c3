"""What both adapters share: the agent table, reading actions, the step info,
the check that an env has the adapter's PettingZoo API, the adapters' base
class (:class:`StackedAgentsEnv`) and their factories' (:class:`AdapterFactory`).

Every step's info has the same four ``[A]`` arrays (so the cage gives them
preallocated ``env_info`` slots), plus ``"agent_infos"`` (the env's per-agent
info dicts, by agent name) when any of them is not empty.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from parllel import fields
from parllel.cages.spaces import zero_example
from parllel.errors import (
    ConfigError,
    MismatchedAgentsError,
    ShapeError,
)
from parllel.multiagent.spaces import shared_space, stack_space

#: the info key holding the env's per-agent info dicts (only when not empty)
AGENT_INFOS = "agent_infos"


ADAPTERS = {
    "aec": "AECEnvAdapter / make_aec_env_factory",
    "parallel": "ParallelEnvAdapter / make_parallel_env_factory",
}
"""The adapter (and factory) of each PettingZoo API."""

API_NAMES = {"aec": "AECEnv", "parallel": "ParallelEnv"}
"""PettingZoo's class of each API."""


def pettingzoo_api(env: Any) -> str | None:
    """``"aec"`` or ``"parallel"``: the PettingZoo API of ``env``, or None if unclear.

    PettingZoo's own base classes decide when PettingZoo is loaded (it is, if
    ``env`` is one of its envs); otherwise an object with ``agent_iter`` and
    ``last`` is an AECEnv, and one with ``possible_agents`` but no
    ``observe`` a ParallelEnv. PettingZoo is never imported here.
    """
    module = sys.modules.get("pettingzoo.utils.env")
    if module is not None:
        if isinstance(env, module.AECEnv):
            return "aec"
        if isinstance(env, module.ParallelEnv):
            return "parallel"
    if hasattr(env, "agent_iter") and hasattr(env, "last"):
        return "aec"
    if hasattr(env, "possible_agents") and not hasattr(env, "observe"):
        return "parallel"
    return None


def check_pettingzoo_api(env: Any, expected: str) -> None:
    """Raise ConfigError if ``env`` has the other PettingZoo API than ``expected``."""
    api = pettingzoo_api(env)
    if api is None or api == expected:
        return
    metadata = getattr(env, "metadata", None)
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    raise ConfigError(
        f"{name or type(env).__name__} is a PettingZoo {API_NAMES[api]}; use "
        f"{ADAPTERS[api]} for it; {ADAPTERS[expected]} are for "
        f"{API_NAMES[expected]}s"
    )


class AgentTable:
    """The agents of an env (``possible_agents`` order) and its stacked spaces.

    Args:
        env: a PettingZoo-like env: ``possible_agents`` and the per-agent
            ``observation_space(agent)`` / ``action_space(agent)``.

    Raises:
        ConfigError: the agents do not share one space, or it cannot be
            stacked.
    """

    def __init__(self, env: Any) -> None:
        self.agents: tuple[str, ...] = tuple(env.possible_agents)
        self.index: dict[str, int] = {agent: i for i, agent in enumerate(self.agents)}
        self.n_agents = len(self.agents)
        self.agent_observation_space = shared_space(
            self.agents, env.observation_space, "observation"
        )
        self.agent_action_space = shared_space(self.agents, env.action_space, "action")
        self.observation_space = stack_space(
            self.agent_observation_space, self.n_agents
        )
        self.action_space = stack_space(self.agent_action_space, self.n_agents)

    def zero_observation(self) -> Any:
        """Zeros of the stacked observation (an agent's row before it appears)."""
        return zero_example(self.observation_space)

    def check_known(self, names: Iterable[Any], what: str) -> None:
        """Raise MismatchedAgentsError if any of ``names`` is not a possible agent.

        ``what`` names what the env returned (e.g. ``"rewards"``), or is
        ``"an action"`` for a user's dict action.
        """
        unknown = [name for name in names if name not in self.index]
        if not unknown:
            return
        if what == "an action":
            reason = (
                f"the action names agent(s) {unknown} outside the env's "
                f"possible_agents {list(self.agents)}: a dict action "
                "{agent: action} takes the env's own agent names"
            )
        else:
            reason = (
                f"the env returned {what} for {unknown}, which are not in its "
                f"possible_agents {list(self.agents)}: every agent an env "
                "reports must be one of its possible_agents"
            )
        raise MismatchedAgentsError(reason)

    def read_actions(self, action: Any, acting: Sequence[str]) -> dict[str, Any]:
        """The actions of the ``acting`` agents, by name.

        ``action`` is either stacked over all agents (``[A, ...]``; the rows of
        agents that do not act are padding) or a dict ``{agent: action}``
        holding exactly the acting agents.

        Raises:
            MismatchedAgentsError: a dict action names an agent outside
                ``possible_agents``.
            MismatchedAgentsError: a dict action names an agent that does not act
                now, or lacks one that does.
            ShapeError: a stacked action has not ``A`` rows.
        """
        if isinstance(action, Mapping):
            self.check_known(action, "an action")
            extra = [agent for agent in action if agent not in acting]
            if extra:
                raise MismatchedAgentsError(
                    f"actions were given for agent(s) {extra}, which do not act at "
                    f"this step (acting: {list(acting)})"
                )
            missing = [agent for agent in acting if agent not in action]
            if missing:
                raise MismatchedAgentsError(
                    f"no action was given for acting agent(s) {missing}"
                )
            return dict(action)
        rows = np.array(action)  # a copy: the env may keep what it is given
        if rows.ndim == 0 or rows.shape[0] != self.n_agents:
            raise ShapeError(
                f"a stacked action needs one row per agent ({self.n_agents}, in "
                f"possible_agents order {list(self.agents)}), got shape {rows.shape}"
            )
        index = self.index
        return {agent: rows[index[agent]] for agent in acting}

    def new_info(self) -> dict[str, np.ndarray]:
        """A step info with zero ``[A]`` arrays under the four agent keys."""
        n = self.n_agents
        return {
            fields.AGENT_REWARD: np.zeros(n, np.float32),
            fields.AGENT_TERMINATED: np.zeros(n, np.bool_),
            fields.AGENT_TRUNCATED: np.zeros(n, np.bool_),
            fields.AGENT_MASK: np.zeros(n, np.bool_),
        }


def add_agent_infos(info: dict[str, Any], agent_infos: Mapping[str, Any]) -> None:
    """Put the env's per-agent infos under ``"agent_infos"`` if any is not empty."""
    if any(agent_infos.values()):
        info[AGENT_INFOS] = dict(agent_infos)


class StackedAgentsEnv(gym.Env):
    """A PettingZoo env of the API ``api`` as one gymnasium env, agents stacked.

    The base of :class:`~parllel.multiagent.aec_env.AECEnvAdapter` and
    :class:`~parllel.multiagent.parallel_env.ParallelEnvAdapter`: the agent table, the
    stacked spaces and observation, and what passes straight to the env.
    """

    metadata = {"render_modes": []}
    api: ClassVar[str]  # "aec" or "parallel"

    def __init__(self, env: Any) -> None:
        check_pettingzoo_api(env, self.api)
        self.env = env
        self.table = AgentTable(env)
        self.observation_space = self.table.observation_space
        self.action_space = self.table.action_space
        self._observation = self.table.zero_observation()
        self._took_part = np.zeros(self.table.n_agents, np.bool_)
        self._any_truncated = False

    @property
    def possible_agents(self) -> tuple[str, ...]:
        """The agents, in the order of the stacked dimension."""
        return self.table.agents

    @property
    def n_agents(self) -> int:
        """``A``, the number of possible agents."""
        return self.table.n_agents

    def render(self) -> Any:
        """The env's ``render()``."""
        return self.env.render()

    def close(self) -> None:
        """Close the env."""
        self.env.close()


class AdapterFactory:
    """A picklable factory of adapted envs, for cages: ``adapter(env_fn(**kwargs))``.

    Calls ``env_fn(**kwargs, **env_kwargs)`` in the process that builds the
    env (a ProcessCage's worker; cloudpickle must pickle ``env_fn``) and wraps
    the result.

    Args:
        env_fn: builds the PettingZoo env (e.g. ``tictactoe_v3.env``).
        kwargs: keyword arguments for ``env_fn``.
    """

    adapter: ClassVar[type[StackedAgentsEnv]]
    api: ClassVar[str]

    def __init__(self, env_fn: Callable[..., Any], **kwargs: Any) -> None:
        if not callable(env_fn):
            raise ConfigError(
                f"env_fn must build a PettingZoo {API_NAMES[self.api]}, got {env_fn!r}"
            )
        self.env_fn = env_fn
        self.kwargs = kwargs

    def __call__(self, **env_kwargs: Any) -> Any:
        """Build one adapted env (``env_kwargs`` override the stored kwargs)."""
        return type(self).adapter(self.env_fn(**{**self.kwargs, **env_kwargs}))

    def __repr__(self) -> str:
        name = getattr(self.env_fn, "__qualname__", repr(self.env_fn))
        return f"{type(self).__name__}({name}, **{self.kwargs!r})"
