"""Envs whose replies to the main process are larger than a pipe's buffer.

A reply over ~250 KB used to hang a worker and the main process for good
(issue 26); these envs make every kind of reply big.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np

from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, PerEnvFactories, ProcessCage, ProcessLayout
from parllel.samplers import FeedForwardSampler

TEN_MB = 10_000_000
FRAME_SHAPE = (1000, 3334, 3)  # ~10 MB rgb frame
N_BACKGROUND_ENVS, BACKGROUND_T = 3, 6  # two 3-step episodes per env and batch


def pattern(n_bytes: int, tag: int = 0) -> np.ndarray:
    """``n_bytes`` uint8 values that tell a wrong or truncated array apart."""
    start = tag % 251
    period = np.arange(251, dtype=np.uint8)
    return np.tile(period, (start + n_bytes) // 251 + 1)[start : start + n_bytes]


class BigReplyEnv(gym.Env):
    """Box(1) observation ``[tag]``, Discrete(2) actions, episodes of 3 steps.

    ``big`` holds ``state_bytes`` bytes (pickled with the env when envs
    move); :meth:`blob` and :meth:`render` return big arrays; with
    ``info_bytes`` every step's info holds an array of that many bytes under
    ``"blob"`` and every reset's info one under ``"reset_blob"``; with
    ``final_info_bytes`` the last step of an episode holds one of that many
    bytes under ``"final_blob"`` (a key the probe step lacks: it ends in the
    episode's TrajInfo.extra).
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        tag: int = 0,
        state_bytes: int = 0,
        info_bytes: int = 0,
        final_info_bytes: int = 0,
    ) -> None:
        self.tag = tag
        self.big = pattern(state_bytes, tag)
        self.info_bytes = info_bytes
        self.final_info_bytes = final_info_bytes
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def _observation(self) -> np.ndarray:
        return np.array([self.tag], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        info = (
            {"reset_blob": pattern(self.info_bytes, self.tag)}
            if self.info_bytes
            else {}
        )
        return self._observation(), info

    def step(self, action):
        self.t += 1
        done = self.t >= 3
        info = {}
        if self.info_bytes:
            info["blob"] = pattern(self.info_bytes, self.t)
        if done and self.final_info_bytes:
            info["final_blob"] = pattern(self.final_info_bytes, self.tag)
        return self._observation(), 1.0, done, False, info

    def blob(self, n_bytes: int) -> np.ndarray:
        """A big reply to ``call``."""
        return pattern(n_bytes, self.tag)

    def render(self) -> np.ndarray:
        """A ~10 MB rgb frame."""
        return pattern(int(np.prod(FRAME_SHAPE)), self.tag).reshape(FRAME_SHAPE)


def tagged_envs(n_envs: int, **kwargs) -> PerEnvFactories:
    """Factories of ``n_envs`` BigReplyEnvs, env ``i`` tagged ``i``."""
    return PerEnvFactories(
        [partial(BigReplyEnv, tag=i, **kwargs) for i in range(n_envs)]
    )


def build_big_episode_sampler(seed: int, final_info_bytes: int, main_share: bool):
    """A sampler (for a BackgroundSampler) over a ProcessCage of 3 BigReplyEnvs
    whose finished episodes carry ``final_info_bytes`` in TrajInfo.extra."""
    cage = ProcessCage(
        tagged_envs(N_BACKGROUND_ENVS, final_info_bytes=final_info_bytes),
        N_BACKGROUND_ENVS,
        options=CageOptions(seed=seed),
        layout=ProcessLayout(
            n_workers=2 if main_share else 3, main_process_envs=int(main_share)
        ),
        start_method="fork",
    )
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=seed), cage.n_envs)
    tree = build_sample_tree(cage, handler, BACKGROUND_T)
    return FeedForwardSampler(cage, handler, tree, seed=seed)
