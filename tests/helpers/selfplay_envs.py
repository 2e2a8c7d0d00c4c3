"""A tiny two-player turn-based game in the stacked multi-agent layout, and a
plain driver loop that plays it with a self-play handler.

``TurnSumGame``: players move in turn (player 0 first), each picks a number
in ``{0, 1, 2, 3}``; after ``rounds`` moves each, the larger sum wins (+1 /
-1 in ``agent_reward`` at the last move; equal sums draw). Observation
``[2, 3]`` float32 per player: ``[my turn, my sum, the other's sum]``;
action ``MultiDiscrete([4, 4])``, only the mover's entry is used.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

from parllel import fields
from parllel.cages import TrajInfo
from parllel.timing import PhaseTimes

A = 2


class TurnSumGame(gym.Env):
    """Two players add numbers in turn; the larger sum wins."""

    def __init__(self, rounds: int = 2) -> None:
        self.rounds = rounds
        self.observation_space = gym.spaces.Box(0, 100, (A, 3), np.float32)
        self.action_space = gym.spaces.MultiDiscrete([4] * A)
        self.sums = np.zeros(A)
        self.moves = 0

    def _observation(self) -> np.ndarray:
        to_move = self.moves % A
        return np.array(
            [[a == to_move, self.sums[a], self.sums[1 - a]] for a in range(A)],
            np.float32,
        )

    def reset(self, *, seed: int | None = None, options: Any = None):
        super().reset(seed=seed)
        self.sums[:] = 0
        self.moves = 0
        return self._observation(), {}

    def step(self, action: np.ndarray):
        mover = self.moves % A
        self.sums[mover] += int(action[mover])
        self.moves += 1
        reward = np.zeros(A, np.float32)
        terminated = self.moves == A * self.rounds
        if terminated and self.sums[0] != self.sums[1]:
            winner = int(self.sums[1] > self.sums[0])
            reward[winner], reward[1 - winner] = 1.0, -1.0
        mask = np.zeros(A, bool)
        mask[mover] = True
        info = {
            fields.AGENT_REWARD: reward,
            fields.AGENT_TERMINATED: np.full(A, terminated),
            fields.AGENT_TRUNCATED: np.zeros(A, bool),
            fields.AGENT_MASK: mask,
        }
        return self._observation(), float(reward.sum()), terminated, False, info


@dataclasses.dataclass
class GameInfo(TrajInfo):
    """A TrajInfo with the per-seat returns self-play reads."""

    agent_returns: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(A))


class SelfPlayDriver:
    """Plays ``n_envs`` games with a handler, as a multi-agent sampler would:
    ``step`` on ``[B, A]`` rows, then ``episodes_ended`` with finished games.

    ``collect_batch`` runs ``T`` steps and returns a ``[T, B]`` reward tree
    and the finished games (enough for a runner). Every step's assignment,
    seats, opponents and ``agent_info`` are appended to ``log``.
    """

    def __init__(self, handler: Any, n_envs: int, T: int = 8) -> None:
        self.handler, self.n_envs, self.T = handler, n_envs, T
        self.envs = [TurnSumGame() for _ in range(n_envs)]
        self.sample_tree = {fields.REWARD: np.zeros((T, n_envs), np.float32)}
        self.phase_times = PhaseTimes()  # what a runner reads of a sampler
        self.action_generator = None
        self.action = np.zeros((n_envs, A), np.int64)
        self.agent_info = {
            fields.VALUE: np.zeros((n_envs, A), np.float32),
            fields.POLICY_INDEX: np.zeros((n_envs, A), np.int16),
        }
        self.log: list[dict] = []
        self.reset()

    def reset(self) -> None:
        self.observation = np.stack(
            [env.reset(seed=i)[0] for i, env in enumerate(self.envs)]
        )
        self.returns = np.zeros((self.n_envs, A))
        self.handler.reset()

    def step(self) -> list[GameInfo]:
        self.handler.step(
            self.observation,
            None,
            None,
            out_action=self.action,
            out_agent_info=self.agent_info,
        )
        self.log.append(
            {
                "action": self.action.copy(),
                "policy_index": self.agent_info[fields.POLICY_INDEX].copy(),
                "seat": self.handler.seat.copy(),
                "opponent": self.handler.opponent.copy(),
                "mover": self.observation[:, :, 0].argmax(1),
            }
        )
        ended = []
        for b, env in enumerate(self.envs):
            observation, _, terminated, truncated, info = env.step(self.action[b])
            self.returns[b] += info[fields.AGENT_REWARD]
            if terminated or truncated:
                ended.append(
                    GameInfo(
                        env_index=b,
                        length=env.moves,
                        return_=float(self.returns[b].sum()),
                        terminated=bool(terminated),
                        agent_returns=self.returns[b].copy(),
                    )
                )
                self.returns[b] = 0
                observation, _ = env.reset()
            self.observation[b] = observation
        self.handler.episodes_ended(ended)
        return ended

    def collect_batch(self) -> tuple[dict, list[GameInfo]]:
        games = []
        for _ in range(self.T):
            games += self.step()
        return self.sample_tree, games
