"""Pairs of samplers over the same envs: whole stacks against one frame per step.

Both sides step envs built from the same factory with the same seeds and a
deterministic agent that reads the whole stack (its actions, values and
log-probabilities depend on every frame), so any stack the frame side gets
wrong changes its actions or values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from parllel import fields
from parllel.agents import AgentStep, NumpyHandler
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.samplers import AlternatingSampler, FeedForwardSampler
from parllel.transforms import EstimateAdvantage


class StackAgent:
    """Numpy agent: a weighted sum of every frame picks the action and value;
    records every observation it is given."""

    def __init__(self, n_actions: int = 3) -> None:
        self.n_actions = n_actions
        self.seen: list[np.ndarray] = []

    def initial_state(self, n_envs: int) -> None:
        return None

    def set_mode(self, mode: str) -> None:
        pass

    @staticmethod
    def score(observation: Any) -> np.ndarray:
        obs = np.asarray(observation)
        flat = obs.reshape(len(obs), obs.shape[1], -1).astype(np.int64)
        weights = np.arange(1, obs.shape[1] + 1)
        return (flat * np.arange(1, flat.shape[2] + 1)).sum(-1) @ weights

    def step(self, observation, prev_action, prev_reward, state) -> AgentStep:
        self.seen.append(np.array(observation, copy=True))
        score = self.score(observation)
        info = {
            fields.VALUE: (score % 1009).astype(np.float32) / 100,
            fields.LOG_PROB: -(score % 7).astype(np.float32) / 10 - 0.5,
        }
        return AgentStep(score % self.n_actions, info)

    def value(self, observation, prev_action, prev_reward, state) -> np.ndarray:
        return (self.score(observation) % 1009).astype(np.float32) / 100


def build_side(
    factory: Any,
    B: int,
    T: int,
    *,
    frame_stack: int | None,
    sampler: str = "feedforward",
    process: bool = False,
    decorrelation_steps: int = 0,
    make_cage: Any = None,
) -> tuple[Any, Any, StackAgent, list]:
    """(sampler, tree, agent, cages) for one side of a pair.

    ``make_cage(n_envs, env_offset)``, if given, builds the cages instead of
    ``factory`` in serial or process cages (e.g. an EnvPool cage).
    """
    if sampler == "alternating":
        half = B // 2
        halves = [(half, 0), (B - half, half)]
    else:
        halves = [(B, 0)]
    cages: list = []
    for n, offset in halves:
        if make_cage is not None:
            cage = make_cage(n, offset)
        elif process:
            cage = ProcessCage(
                factory, n, options=CageOptions(seed=7, env_offset=offset), layout=ProcessLayout(envs_per_worker=1),
                start_method="fork",
            )  # fmt: skip
        else:
            cage = SerialCage(
                factory, n, options=CageOptions(seed=7, env_offset=offset)
            )
        cages.append(cage)
    agent = StackAgent()
    handler = NumpyHandler(agent, B)
    options = {} if frame_stack is None else {"frame_stack": frame_stack}
    tree = build_sample_tree(cages, handler, T, **options)
    gae = EstimateAdvantage(tree, 0.9, 0.8)
    kind = AlternatingSampler if sampler == "alternating" else FeedForwardSampler
    built = kind(
        cages if sampler == "alternating" else cages[0],
        handler,
        tree,
        transform=gae,
        decorrelation_steps=decorrelation_steps,
        seed=3,
    )
    return built, tree, agent, cages


def build_pair(factory: Any, B: int, T: int, k: int, **kwargs: Any) -> tuple:
    """Two sides: whole stacks, then ``frame_stack=k``."""
    return (
        build_side(factory, B, T, frame_stack=None, **kwargs),
        build_side(factory, B, T, frame_stack=k, **kwargs),
    )


def close_side(side: tuple) -> None:
    _, tree, _, cages = side
    for cage in cages:
        cage.close()
    tree.close()


class FlatEvaluator(nn.Module):
    """A linear policy and value over the flattened stack (for PPO updates)."""

    def __init__(self, n_in: int, n_actions: int = 3) -> None:
        super().__init__()
        self.net = nn.Linear(n_in, n_actions + 1)

    def evaluate(self, observation, action, initial_state, resets):
        out = self.net(observation.reshape(len(observation), -1).float() / 255)
        distribution = torch.distributions.Categorical(logits=out[:, :-1])
        return distribution.log_prob(action), out[:, -1], distribution.entropy()


def stacks_from_frames(frames: np.ndarray, depth: np.ndarray, k: int) -> np.ndarray:
    """The reference rebuild, one sample at a time: ``[T, B, k, ...]``."""
    T, B = depth.shape
    out = np.empty((T, B, k) + frames.shape[2:], frames.dtype)
    for t in range(T):
        for b in range(B):
            for i in range(k):
                back = min(k - 1 - i, int(depth[t, b]))
                out[t, b, i] = frames[k - 1 + t - back, b]
    return out
