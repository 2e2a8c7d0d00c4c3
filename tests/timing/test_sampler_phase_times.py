"""Samplers attribute each batch's time to env stepping, waiting on workers,
inference and transforms; a simulated clock (moved only by the env, the agent
and the transform) makes the expected figures exact."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.samplers import AlternatingSampler, FeedForwardSampler, RecurrentSampler
from parllel.timing import sampler_metrics
from tests.helpers.envs import CountingEnv
from tests.timing.simulated_clock import SimulatedClock

pytestmark = pytest.mark.timeout(60)

T, ENV_COST, ACT_COST, TRANSFORM_COST = 6, 5.0, 3.0, 7.0
ENV_KWARGS = {"min_length": 2, "max_length": 5, "terminal": False}
CLOCK = SimulatedClock()


class CostlyEnv(CountingEnv):
    def step(self, action):
        CLOCK.advance(ENV_COST)
        return super().step(action)


class CostlyAgent(RandomAgent):
    def step(self, *args, **kwargs):
        CLOCK.advance(ACT_COST)
        return super().step(*args, **kwargs)


def costly_transform(tree):
    CLOCK.advance(TRANSFORM_COST)
    return tree


@pytest.fixture
def clock(monkeypatch):
    for module in ("base", "feedforward", "recurrent", "alternating"):
        monkeypatch.setattr(f"parllel.samplers.{module}.clock", CLOCK)
    monkeypatch.setattr("parllel.cages.serial.perf_counter", CLOCK)
    return CLOCK


def build(sampler_type, cages, n_envs, **kwargs):
    cages = list(cages)
    handler = NumpyHandler(CostlyAgent(cages[0].spaces.action, seed=1), n_envs)
    tree = build_sample_tree(cages, handler, T)
    return sampler_type(cages, handler, tree, transform=costly_transform, **kwargs)


@pytest.mark.parametrize("sampler_type", [FeedForwardSampler, RecurrentSampler])
def test_a_serial_batch_is_split_exactly(clock, sampler_type):
    cage = SerialCage(CostlyEnv, 3, ENV_KWARGS, options=CageOptions(seed=2))
    sampler = build(sampler_type, [cage], 3)
    try:
        for _ in range(2):
            sampler.collect_batch()
        taken = sampler.phase_times.take()
    finally:
        cage.close()
        sampler.sample_tree.close()
    per_batch = T * (3 * ENV_COST + ACT_COST) + TRANSFORM_COST
    assert taken["count"] == 2
    assert taken["seconds"] == {
        "batch": 2 * per_batch,
        "env_step": 2 * T * 3 * ENV_COST,  # a serial cage steps envs here
        "worker_wait": 0.0,
        "inference": 2 * T * ACT_COST,
        "transforms": 2 * TRANSFORM_COST,
    }
    assert sampler_metrics(taken)["time/sampler/other_ms"] == 0.0
    assert sampler.phase_times.take()["count"] == 0  # taken


def test_the_alternating_sampler_splits_its_two_groups(clock):
    cages = [
        SerialCage(CostlyEnv, 2, ENV_KWARGS, options=CageOptions(seed=3)),
        SerialCage(CostlyEnv, 2, ENV_KWARGS, options=CageOptions(seed=4, env_offset=2)),
    ]
    sampler = build(AlternatingSampler, cages, 4)
    try:
        sampler.collect_batch()
        taken = sampler.phase_times.take()
    finally:
        for cage in cages:
            cage.close()
        sampler.sample_tree.close()
    assert taken["seconds"] == {
        "batch": T * (4 * ENV_COST + 2 * ACT_COST) + TRANSFORM_COST,
        "env_step": T * 4 * ENV_COST,
        "worker_wait": 0.0,
        "inference": T * 2 * ACT_COST,  # one call per group and step
        "transforms": TRANSFORM_COST,
    }


def test_decorrelation_before_the_first_batch_counts_as_other(clock):
    cage = SerialCage(CostlyEnv, 3, ENV_KWARGS, options=CageOptions(seed=2))
    sampler = build(FeedForwardSampler, [cage], 3, decorrelation_steps=4, seed=0)
    try:
        sampler.collect_batch()
        metrics = sampler_metrics(sampler.phase_times.take())
    finally:
        cage.close()
        sampler.sample_tree.close()
    assert metrics["time/sampler/env_step_ms"] == 1000 * T * 3 * ENV_COST
    assert metrics["time/sampler/other_ms"] == pytest.approx(1000 * 4 * 3 * ENV_COST)


def test_envs_in_workers_are_waited_for_not_stepped_here():
    """Real clock: a process cage without a main-process share steps nothing
    in this process, so all its time is waiting on the worker."""
    cage = ProcessCage(
        CountingEnv,
        2,
        ENV_KWARGS,
        layout=ProcessLayout(n_workers=1),
        options=CageOptions(seed=5),
    )
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=1), 2)
    tree = build_sample_tree(cage, handler, T)
    sampler = FeedForwardSampler(cage, handler, tree)
    try:
        sampler.collect_batch()
        seconds = sampler.phase_times.take()["seconds"]
    finally:
        cage.close()
        tree.close()
    assert seconds["env_step"] == 0.0
    assert seconds["worker_wait"] > 0.0
    inside = sum(seconds[p] for p in ("worker_wait", "inference", "transforms"))
    assert np.isfinite(inside) and inside <= seconds["batch"]


def test_a_background_sampler_receives_its_process_timings_with_each_batch():
    from parllel.samplers.background import BackgroundSampler
    from tests.helpers.background_helpers import build_random_sampler

    with BackgroundSampler(build_random_sampler, 3, max_lag=None) as sampler:
        for _ in range(3):
            sampler.collect_batch()
        taken = sampler.phase_times.take()
    assert taken["count"] == 3
    seconds = taken["seconds"]
    assert set(seconds) == {
        "batch",
        "env_step",
        "worker_wait",
        "inference",
        "transforms",
    }
    assert seconds["env_step"] > 0.0  # a serial cage in the background process
    assert seconds["batch"] >= seconds["env_step"] + seconds["inference"]
