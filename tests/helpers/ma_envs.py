"""Deterministic toy PettingZoo envs whose observations say where they are.

``DropoutParallelEnv`` (parallel API): three agents that each live a seeded
number of steps, so agents drop out at different times and episodes have
different lengths. ``TurnAECEnv`` (AEC API): three agents move in turn, each
for a seeded number of its own moves; rewards reach agents that do not move,
also in the dead steps. Observations encode ``[tag, episode, t, agent,
last_action]`` so tests can check every field's alignment.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv, ParallelEnv

AGENTS = ["red", "green", "blue"]
N_ACTIONS = 4


def legal_mask(t: int) -> np.ndarray:
    """Legal actions at time ``t``: all but ``t % N_ACTIONS``."""
    mask = np.ones(N_ACTIONS, np.int8)
    mask[t % N_ACTIONS] = 0
    return mask


def agent_reward(action: int, t: int, agent_index: int) -> float:
    """The toy envs' reward of an agent's action at step ``t``."""
    return float(action) + 0.1 * t + 0.01 * agent_index


def ends_terminated(agent_index: int, episode: int) -> bool:
    """Whether an agent's episode ends by termination (else truncation)."""
    return (agent_index + episode) % 2 == 0


class DropoutParallelEnv(ParallelEnv):
    """Parallel toy env; agent ``i`` lives ``lifetimes[i]`` steps (seeded).

    Args:
        dict_obs: observations ``{"observation", "action_mask"}`` instead of
            the Box vector.
        max_life: longest lifetime of an agent.
        bad: misbehave for error tests: ``"unknown_agent"`` (reports a
            reward for an agent outside possible_agents) or
            ``"missing_flags"`` (no termination entry for an acting agent).
    """

    metadata = {"name": "dropout_parallel_v0"}

    def __init__(self, dict_obs: bool = False, max_life: int = 5, bad: str = ""):
        self.possible_agents = list(AGENTS)
        self.dict_obs = dict_obs
        self.max_life = max_life
        self.bad = bad
        box = gym.spaces.Box(-1e6, 1e6, (5,), np.float32)
        if dict_obs:
            self._obs_space = gym.spaces.Dict(
                {
                    "observation": box,
                    "action_mask": gym.spaces.Box(0, 1, (N_ACTIONS,), np.int8),
                }
            )
        else:
            self._obs_space = box
        self.tag, self.episode, self.t = -1.0, -1, 0
        self.rng = np.random.default_rng()
        self.agents: list[str] = []

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return gym.spaces.Discrete(N_ACTIONS)

    def _observe(self, agent, last_action):
        i = AGENTS.index(agent)
        vector = np.array([self.tag, self.episode, self.t, i, last_action], np.float32)
        if self.dict_obs:
            return {"observation": vector, "action_mask": legal_mask(self.t)}
        return vector

    def reset(self, seed=None, options=None):
        if seed is not None:  # a seeded reset starts afresh
            self.rng = np.random.default_rng(seed)
            self.tag = float(seed % 1000)
            self.episode = -1
        self.episode += 1
        self.t = 0
        self.lifetimes = self.rng.integers(1, self.max_life + 1, len(AGENTS))
        self.agents = list(AGENTS)
        observations = {agent: self._observe(agent, 0.0) for agent in self.agents}
        return observations, {agent: {} for agent in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), (actions, self.agents)
        t = self.t
        self.t += 1
        observations, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            i = AGENTS.index(agent)
            action = int(actions[agent])
            observations[agent] = self._observe(agent, float(action))
            rewards[agent] = agent_reward(action, t, i)
            ended = self.t >= self.lifetimes[i]
            terminal = ends_terminated(i, self.episode)
            terminations[agent] = bool(ended and terminal)
            truncations[agent] = bool(ended and not terminal)
            infos[agent] = {"t": t} if i == 0 else {}
        if self.bad == "unknown_agent":
            rewards["purple"] = 0.0
        if self.bad == "missing_flags":
            terminations.pop(self.agents[0])
        self.agents = [
            a for a in self.agents if not (terminations.get(a) or truncations[a])
        ]
        return observations, rewards, terminations, truncations, infos


class TurnAECEnv(AECEnv):
    """AEC toy env: agents move round-robin, agent ``i`` for ``moves[i]`` moves.

    At every move the mover gets :func:`agent_reward` and each other live
    agent ``0.001 * (mover + 1)``; an agent whose last move it was ends
    (terminated or truncated by :func:`ends_terminated`). In each dead step
    every remaining agent gets ``0.0001``.
    """

    metadata = {"name": "turn_aec_v0", "is_parallelizable": False}

    def __init__(self, max_moves: int = 3):
        super().__init__()
        self.possible_agents = list(AGENTS)
        self.max_moves = max_moves
        self._obs_space = gym.spaces.Dict(
            {
                "observation": gym.spaces.Box(-1e6, 1e6, (5,), np.float32),
                "action_mask": gym.spaces.Box(0, 1, (N_ACTIONS,), np.int8),
            }
        )
        self.tag, self.episode, self.t = -1.0, -1, 0
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return gym.spaces.Discrete(N_ACTIONS)

    def observe(self, agent):
        i = AGENTS.index(agent)
        vector = np.array(
            [self.tag, self.episode, self.t, i, self.last_action[agent]], np.float32
        )
        # the mask of every agent, movers or not: the adapter zeroes the others
        return {"observation": vector, "action_mask": legal_mask(self.t)}

    def reset(self, seed=None, options=None):
        if seed is not None:  # a seeded reset starts afresh
            self.rng = np.random.default_rng(seed)
            self.tag = float(seed % 1000)
            self.episode = -1
        self.episode += 1
        self.t = 0
        self.moves = self.rng.integers(1, self.max_moves + 1, len(AGENTS))
        self.moved = dict.fromkeys(AGENTS, 0)
        self.last_action = dict.fromkeys(AGENTS, 0.0)
        self.agents = list(AGENTS)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self.agent_selection = self.agents[0]

    def _next_live(self, after):
        live = [a for a in self.agents if not self._done(a)]
        if not live:
            return after
        order = AGENTS[AGENTS.index(after) + 1 :] + AGENTS[: AGENTS.index(after) + 1]
        return next(a for a in order if a in live)

    def _done(self, agent):
        return self.terminations[agent] or self.truncations[agent]

    def step(self, action):
        agent = self.agent_selection
        if self._done(agent):
            assert action is None, action
            for table in (
                self.terminations, self.truncations, self.rewards,
                self._cumulative_rewards, self.infos,
            ):  # fmt: skip
                del table[agent]
            self.agents.remove(agent)
            self._clear_rewards()
            for other in self.agents:
                self.rewards[other] = 0.0001
            self._accumulate_rewards()
            dead = [a for a in self.agents if self._done(a)]
            self.agent_selection = dead[0] if dead else self._next_live(agent)
            return
        i = AGENTS.index(agent)
        t = self.t
        self.t += 1
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        self.rewards[agent] = agent_reward(int(action), t, i)
        for other in self.agents:
            if other != agent and not self._done(other):
                self.rewards[other] = 0.001 * (i + 1)
        self.last_action[agent] = float(action)
        self.moved[agent] += 1
        if self.moved[agent] >= self.moves[i]:
            terminal = ends_terminated(i, self.episode)
            self.terminations[agent] = terminal
            self.truncations[agent] = not terminal
        self._accumulate_rewards()
        dead = [a for a in self.agents if self._done(a)]
        self.agent_selection = dead[0] if dead else self._next_live(agent)
