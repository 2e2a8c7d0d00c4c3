"""AECEnvAdapter: a turn-based PettingZoo ``AECEnv`` as one gymnasium env for cages.

One adapter step is one move: the agent to move (``agent_selection``) acts;
the adapter then takes the dead steps (``step(None)``) of agents whose
episode ended itself. PettingZoo is not imported: any object with the
``AECEnv`` API works.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parllel import fields
from parllel.errors import ConfigError, MismatchedAgentsError
from parllel.multiagent.agent_steps import (
    AdapterFactory,
    StackedAgentsEnv,
    add_agent_infos,
)
from parllel.multiagent.spaces import action_mask_of, copy_value, write_row


class AECEnvAdapter(StackedAgentsEnv):
    """A turn-based PettingZoo ``AECEnv`` as one gymnasium env with agents stacked.

    Observations and actions are stacked ``[A, ...]`` (only the mover's action
    row is used); the reward is the team's sum; the episode ends when every
    agent left. Each step's info holds ``agent_reward`` (a loser's -1 lands at
    the winning move), ``agent_terminated``, ``agent_truncated`` and
    ``agent_mask`` (one-hot: the mover). Layout: docs/multiagent.md.

    Raises:
        ConfigError: ``env`` is a ``ParallelEnv``, or the agents do not share
            one observation and one action space.

    Example:
        >>> from pettingzoo.classic import tictactoe_v3
        >>> env = AECEnvAdapter(tictactoe_v3.env())
        >>> env.observation_space["action_mask"].shape, env.action_space
        ((2, 9), MultiDiscrete([9 9]))
    """

    api = "aec"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        # the state (agents, rewards, flags...) is read from the innermost env:
        # each read through PettingZoo's wrappers costs a chain of __getattr__
        # calls, and so does each observe(); steps still go through the
        # wrappers' checks (an illegal move is still caught by PettingZoo)
        self._state = getattr(env, "unwrapped", env)
        self._ended = np.zeros(self.table.n_agents, np.bool_)
        self._rewards = np.zeros(self.table.n_agents, np.float64)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; return the stacked observation and the reset info."""
        super().reset(seed=seed)
        self.env.reset(seed=seed, options=options)
        self.table.check_known(self._state.agents, "agents (state.agents)")
        self._observation = self.table.zero_observation()
        self._ended[:] = False
        self._took_part[:] = False
        self._any_truncated = False
        info = self.table.new_info()  # the dead steps' rewards are dropped here
        self._rewards[:] = 0.0
        self._mark_ended(info)
        self._dead_steps(info)
        self._observe_alive()
        reset_info: dict[str, Any] = {}
        add_agent_infos(reset_info, getattr(self._state, "infos", {}) or {})
        return copy_value(self._observation), reset_info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """The mover acts, then the dead steps (docs/multiagent.md, "Adapters")."""
        env, state, table = self.env, self._state, self.table
        if not state.agents:
            raise ConfigError(
                "step() after the episode ended (no agent left): reset the env"
            )
        mover = state.agent_selection
        table.check_known([mover], "agent_selection")
        actions = table.read_actions(action, [mover])
        info = table.new_info()
        info[fields.AGENT_MASK][table.index[mover]] = True
        self._rewards[:] = 0.0
        env.step(actions[mover])
        self._add_rewards()
        self._mark_ended(info)
        self._dead_steps(info)
        self._observe_alive()
        add_agent_infos(info, getattr(state, "infos", {}) or {})
        over = not state.agents
        info[fields.AGENT_REWARD][:] = self._rewards
        reward = float(self._rewards.sum())
        terminated = over and not self._any_truncated
        truncated = over and self._any_truncated
        return copy_value(self._observation), reward, terminated, truncated, info

    def _add_rewards(self) -> None:
        """Add the env's ``rewards`` of the last ``env.step`` (summed in float64)."""
        rewards = self._state.rewards
        self.table.check_known(rewards, "rewards")
        summed, index = self._rewards, self.table.index
        for agent, reward in rewards.items():
            summed[index[agent]] += reward

    def _mark_ended(self, info: dict[str, np.ndarray]) -> None:
        """Flag the agents whose episode ended since the last look."""
        state, index = self._state, self.table.index
        alive = set(state.agents)
        for agent in alive:
            self._took_part[index[agent]] = True
        for agent, i in index.items():
            if self._ended[i]:
                continue
            if agent in alive:
                terminated = bool(state.terminations.get(agent, False))
                truncated = bool(state.truncations.get(agent, False)) and not terminated
            elif self._took_part[i]:
                terminated, truncated = False, True  # left without a flag
            else:
                continue
            if terminated or truncated:
                self._ended[i] = True
                info[fields.AGENT_TERMINATED][i] = terminated
                info[fields.AGENT_TRUNCATED][i] = truncated
                self._any_truncated |= truncated

    def _dead_steps(self, info: dict[str, np.ndarray]) -> None:
        """Step ``None`` for every ended agent the env selects, keeping its
        final observation and adding the rewards of those steps."""
        env, state = self.env, self._state
        while state.agents:
            agent = state.agent_selection
            if not (state.terminations.get(agent) or state.truncations.get(agent)):
                break
            index = self.table.index[agent]
            write_row(self._observation, index, state.observe(agent), agent)
            before = len(state.agents)
            env.step(None)
            if len(state.agents) >= before:
                raise MismatchedAgentsError(
                    f"the env's dead step for ended agent {agent!r} did not remove "
                    f"it from state.agents ({list(state.agents)})"
                )
            self._add_rewards()
            self._mark_ended(info)

    def _observe_alive(self) -> None:
        state = self._state
        index, stacked = self.table.index, self._observation
        for agent in state.agents:
            write_row(stacked, index[agent], state.observe(agent), agent)
        mask = action_mask_of(stacked)
        if mask is not None:
            mover = state.agent_selection if state.agents else None
            for agent, i in index.items():
                if agent != mover:
                    mask[i] = 0


class AECEnvFactory(AdapterFactory):
    """A picklable factory of :class:`AECEnvAdapter` envs, for cages
    (``env_fn`` builds a PettingZoo ``AECEnv``, e.g. ``tictactoe_v3.env``)."""

    adapter = AECEnvAdapter
    api = "aec"


def make_aec_env_factory(env_fn: Callable[..., Any], **kwargs: Any) -> AECEnvFactory:
    """A picklable env factory for cages that builds ``AECEnvAdapter(env_fn(**kwargs))``.

    Example:
        >>> from pettingzoo.classic import tictactoe_v3
        >>> factory = make_aec_env_factory(tictactoe_v3.env)
        >>> cage = SerialCage(factory, n_envs=4, options=CageOptions(seed=0))
    """
    return AECEnvFactory(env_fn, **kwargs)
