"""Sampler builders for the RaySampler tests (run inside the Ray actors).

Each takes the actor index first; actor ``i`` steps the envs ``offset_i ..
offset_i + widths[i] - 1`` of the master seed, so the actors' columns are
the columns of one local sampler over ``sum(widths)`` envs.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import torch

from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.samplers import FeedForwardSampler
from parllel.seeding import derive_seed
from parllel.torch import TorchHandler
from parllel.transforms import EstimateAdvantage, NormalizeObservations
from tests.helpers.background_helpers import ENV_KWARGS, LinearAgent, T
from tests.helpers.envs import CountingEnv


def env_offset(actor_index: int, widths: tuple[int, ...]) -> int:
    return int(sum(widths[:actor_index]))


def build_linear_sampler(
    actor_index: int,
    seed: int,
    widths: tuple[int, ...],
    env_factory=CountingEnv,
    **env_kwargs,
) -> FeedForwardSampler:
    """CountingEnvs, the deterministic LinearAgent on CPU, GAE."""
    n_envs = widths[actor_index]
    cage = SerialCage(
        env_factory,
        n_envs,
        {**ENV_KWARGS, **env_kwargs},
        options=CageOptions(seed=seed, env_offset=env_offset(actor_index, widths)),
    )
    torch.manual_seed(seed)
    handler = TorchHandler(LinearAgent(), n_envs)
    tree = build_sample_tree(cage, handler, T)
    gae = EstimateAdvantage(tree, 0.99, 0.95)
    return FeedForwardSampler(cage, handler, tree, transform=gae, seed=seed)


def build_normalizing_sampler(
    actor_index: int, seed: int, widths: tuple[int, ...]
) -> FeedForwardSampler:
    """:func:`build_linear_sampler` with running observation normalization."""
    sampler = build_linear_sampler(actor_index, seed, widths)
    return FeedForwardSampler(
        sampler.cages,
        sampler.handler,
        sampler.sample_tree,
        transform=sampler.transform,
        observation_normalizer=NormalizeObservations(sampler.sample_tree),
        seed=seed,
    )


def build_local_linear_sampler(
    seed: int, widths: tuple[int, ...]
) -> FeedForwardSampler:
    """The same envs in this process: one local sampler over one cage per actor
    (each cage builds its first env once more for its example, so a cage per
    actor keeps every env's history the same)."""
    cages = [
        SerialCage(
            CountingEnv,
            width,
            ENV_KWARGS,
            options=CageOptions(seed=seed, env_offset=env_offset(index, widths)),
        )
        for index, width in enumerate(widths)
    ]
    torch.manual_seed(seed)
    handler = TorchHandler(LinearAgent(), sum(widths))
    tree = build_sample_tree(cages, handler, T)
    gae = EstimateAdvantage(tree, 0.99, 0.95)
    return FeedForwardSampler(cages, handler, tree, transform=gae, seed=seed)


def build_dict_sampler(
    actor_index: int, seed: int, widths: tuple[int, ...], process: bool = False
) -> FeedForwardSampler:
    """Dict observations and Dict actions (float32, int64, bool leaves, padded
    rows), a seeded RandomAgent; with ``process``, a ProcessCage."""
    n_envs = widths[actor_index]
    kwargs = {**ENV_KWARGS, "observation": "dict", "action": "dict"}
    offset = env_offset(actor_index, widths)
    if process:
        cage = ProcessCage(
            CountingEnv,
            n_envs,
            kwargs,
            layout=ProcessLayout(n_workers=1),
            options=CageOptions(seed=seed, env_offset=offset),
        )
    else:
        cage = SerialCage(
            CountingEnv,
            n_envs,
            kwargs,
            options=CageOptions(seed=seed, env_offset=offset),
        )
    agent = RandomAgent(cage.spaces.action, seed=derive_seed(seed, 99, actor_index))
    handler = NumpyHandler(agent, n_envs)
    tree = build_sample_tree(cage, handler, T, previous=True)
    return FeedForwardSampler(cage, handler, tree, seed=seed)


def build_failing_sampler(actor_index: int, seed: int, widths: tuple[int, ...]):
    """Actor 1's envs raise at their 8th step (its second batch)."""
    fail = 8 if actor_index == 1 else None
    return build_linear_sampler(actor_index, seed, widths, fail_at_step=fail)


def build_raising(actor_index: int, seed: int, widths: tuple[int, ...]):
    raise ValueError(f"cannot build sampler {actor_index}")


class GatedEnv(CountingEnv):
    """A CountingEnv whose steps from its ``block_from``-th on block until the
    file ``gate`` exists."""

    def __init__(self, gate: str, block_from: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gate, self.block_from = Path(gate), block_from

    def step(self, action):
        while self.total_steps + 1 >= self.block_from and not self.gate.exists():
            threading.Event().wait(0.01)
        return super().step(action)


def build_gated_sampler(
    actor_index: int, seed: int, widths: tuple[int, ...], gate: str, block_from: int
):
    """Actor 1 steps GatedEnvs, the other actors CountingEnvs (else as
    :func:`build_linear_sampler`)."""
    if actor_index != 1:
        return build_linear_sampler(actor_index, seed, widths)
    return build_linear_sampler(
        actor_index,
        seed,
        widths,
        env_factory=GatedEnv,
        gate=gate,
        block_from=block_from,
    )


def columns_equal(
    expected: dict[str, np.ndarray], got: dict[str, np.ndarray]
) -> list[str]:
    """Paths whose arrays differ (bitwise) between two snapshots."""
    assert expected.keys() == got.keys()
    return [
        path
        for path in expected
        if expected[path].dtype != got[path].dtype
        or not np.array_equal(expected[path], got[path], equal_nan=True)
    ]


def hang() -> None:
    """Never return (until the process is killed)."""
    while True:
        threading.Event().wait(0.05)


class StuckOnceEnv(CountingEnv):
    """A CountingEnv that hangs for good at its ``stuck_from``-th step, once per
    ``marker`` file: the first env to get there creates the file and hangs (its
    actor must be killed, and only then: a kill before the file exists leaves
    the restarted actor's envs to hang there); envs of a restarted actor find
    it and never hang."""

    def __init__(self, marker: str, stuck_from: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.marker, self.stuck_from = Path(marker), stuck_from

    def step(self, action):
        if self.total_steps + 1 >= self.stuck_from and not self.marker.exists():
            self.marker.touch()
            hang()
        return super().step(action)


def build_stuck_once_sampler(
    actor_index: int, seed: int, widths: tuple[int, ...], marker: str, stuck_from: int
):
    """Actor 1 steps StuckOnceEnvs, the other actors CountingEnvs."""
    if actor_index != 1:
        return build_linear_sampler(actor_index, seed, widths)
    return build_linear_sampler(
        actor_index,
        seed,
        widths,
        env_factory=StuckOnceEnv,
        marker=marker,
        stuck_from=stuck_from,
    )


def build_hanging_sampler(actor_index: int, seed: int, widths: tuple[int, ...]):
    """Never builds a sampler."""
    hang()


def build_hanging_restart_sampler(
    actor_index: int, seed: int, widths: tuple[int, ...], marker: str
):
    """As :func:`build_linear_sampler`, but actor 1 builds its sampler only
    once per ``marker`` file: restarted, it hangs in its builder."""
    if actor_index == 1:
        if Path(marker).exists():
            hang()
        Path(marker).touch()
    return build_linear_sampler(actor_index, seed, widths)
