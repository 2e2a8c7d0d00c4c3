"""ParallelEnvAdapter: a PettingZoo ``ParallelEnv`` as one gymnasium env for cages.

The adapter stacks the agents (``possible_agents`` order) into one more
dimension, so SerialCage and ProcessCage step it like any env (see
docs/multiagent.md). PettingZoo is not imported: any object with the
``ParallelEnv`` API works.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parllel import fields
from parllel.errors import ConfigError, MismatchedAgentsError
from parllel.multiagent.aec_cycle import aec_cycle_of, step_aec_cycle
from parllel.multiagent.agent_steps import (
    AdapterFactory,
    StackedAgentsEnv,
    add_agent_infos,
)
from parllel.multiagent.spaces import action_mask_of, copy_value, write_row


class ParallelEnvAdapter(StackedAgentsEnv):
    """A PettingZoo ``ParallelEnv`` as one gymnasium env with agents stacked.

    Observations and actions are stacked ``[A, ...]`` (an absent agent keeps
    its last observation; rows of agents that do not act are ignored); the
    reward is the team's sum; the episode ends when no agent is left. Each
    step's info holds ``agent_reward``, ``agent_terminated``,
    ``agent_truncated`` and ``agent_mask``. ``aec_to_parallel`` conversions are
    stepped directly through their AEC cycle. Layout: docs/multiagent.md.

    Raises:
        ConfigError: ``env`` is an ``AECEnv``, or the agents do not share one
            observation and one action space.

    Example:
        >>> from mpe2 import simple_spread_v3
        >>> env = ParallelEnvAdapter(simple_spread_v3.parallel_env(N=3))
        >>> env.observation_space.shape, env.action_space
        ((3, 18), MultiDiscrete([5 5 5]))
    """

    api = "parallel"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._aec_cycle = aec_cycle_of(env)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; return the stacked observation and the reset info."""
        super().reset(seed=seed)
        observations, infos = self.env.reset(seed=seed, options=options)
        table = self.table
        table.check_known(observations, "reset observations")
        self._observation = table.zero_observation()
        self._took_part[:] = False
        self._any_truncated = False
        for agent in self.env.agents:
            self._took_part[table.index[agent]] = True
        self._write_observations(observations)
        info: dict[str, Any] = {}
        add_agent_infos(info, infos or {})
        return copy_value(self._observation), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the acting agents (``env.agents``); see the class docstring."""
        env, table = self.env, self.table
        acting = list(env.agents)
        if not acting:
            raise ConfigError(
                "step() after the episode ended (no agent left): reset the env"
            )
        actions = table.read_actions(action, acting)
        if self._aec_cycle is not None:
            stepped = step_aec_cycle(env, self._aec_cycle, actions)
        else:
            stepped = env.step(actions)
        observations, rewards, terminations, truncations, infos = stepped
        for what, values in (
            ("observations", observations),
            ("rewards", rewards),
            ("terminations", terminations),
            ("truncations", truncations),
        ):
            table.check_known(values, what)
        alive = list(env.agents)
        table.check_known(alive, "agents (env.agents)")
        for what, flags in (
            ("terminations", terminations),
            ("truncations", truncations),
        ):
            missing = [agent for agent in acting if agent not in flags]
            if missing:
                raise MismatchedAgentsError(
                    f"the env's step returned no {what} entry for acting agent(s) "
                    f"{missing}: a ParallelEnv reports every agent that acted"
                )
        info = table.new_info()
        index = table.index
        agent_reward = info[fields.AGENT_REWARD]
        mask = info[fields.AGENT_MASK]
        team_reward = 0.0
        for agent, reward in rewards.items():
            agent_reward[index[agent]] = reward
            team_reward += float(reward)
        alive_set = set(alive)
        for agent in acting:
            i = index[agent]
            mask[i] = True
            terminated = bool(terminations[agent])
            truncated = bool(truncations[agent])
            if agent not in alive_set and not terminated and not truncated:
                truncated = True  # left without a flag: its episode was cut
            info[fields.AGENT_TERMINATED][i] = terminated
            info[fields.AGENT_TRUNCATED][i] = truncated and not terminated
            self._any_truncated |= truncated and not terminated
        for agent in alive:
            self._took_part[index[agent]] = True
        self._write_observations(observations)
        add_agent_infos(info, infos or {})
        over = not alive
        terminated = over and not self._any_truncated
        truncated = over and self._any_truncated
        return copy_value(self._observation), team_reward, terminated, truncated, info

    def _write_observations(self, observations: dict[str, Any]) -> None:
        index, stacked = self.table.index, self._observation
        for agent, observation in observations.items():
            write_row(stacked, index[agent], observation, agent)
        mask = action_mask_of(stacked)
        if mask is not None:
            alive = set(self.env.agents)
            for agent, i in index.items():
                if agent not in alive:
                    mask[i] = 0


class ParallelEnvFactory(AdapterFactory):
    """A picklable factory of :class:`ParallelEnvAdapter` envs, for cages
    (``env_fn`` builds a PettingZoo ``ParallelEnv``, e.g.
    ``simple_spread_v3.parallel_env``)."""

    adapter = ParallelEnvAdapter
    api = "parallel"


def make_parallel_env_factory(
    env_fn: Callable[..., Any], **kwargs: Any
) -> ParallelEnvFactory:
    """A picklable env factory for cages that builds ``ParallelEnvAdapter(env_fn(**kwargs))``.

    Example:
        >>> from mpe2 import simple_spread_v3
        >>> factory = make_parallel_env_factory(simple_spread_v3.parallel_env, N=3)
        >>> cage = ProcessCage(factory, 4, layout=ProcessLayout(n_workers=2))
    """
    return ParallelEnvFactory(env_fn, **kwargs)
