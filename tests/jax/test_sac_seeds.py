"""The seed axis for SAC: run k of a K-seed run equals its single run."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import jax
import numpy as np
import pytest

from parllel.builders import build_replay_tree
from parllel.cages import CageOptions, build_cage
from parllel.errors import ConfigError, NonFiniteError
from parllel.jax import JaxHandler
from parllel.jax.agents import build_sac_agent
from parllel.jax.algos import SAC, EntropyCoefficient, SeededSAC, build_sac_optimizers
from parllel.jax.seeds import SeededHandler, SeedStack
from parllel.replays import UniformReplay
from parllel.replays.per_run import PerRunReplay
from parllel.samplers import FeedForwardSampler
from parllel.seeding import Seeds

B, T, STEPS, STARTS, BATCH = 2, 2, 14, 8, 16
MASTERS = (3, 11)
pytestmark = pytest.mark.usefixtures("shared_compilations")


def make_env() -> gym.Env:
    return gym.make("Pendulum-v1")


def build_sac(agent: Any, seeds: Seeds, tau: float = 0.05) -> SAC:
    return SAC(
        agent,
        build_sac_optimizers(1e-2),
        EntropyCoefficient(1.0),
        seed=seeds.torch,
        tau=tau,
        replay_ratio=0.5,
        policy_delay=2,
    )


def agent_for(spaces: Any, seeds: Seeds) -> Any:
    return build_sac_agent(
        spaces.observation, spaces.action, seed=seeds.torch, hidden_sizes=(16,)
    )


def single_run(master: int) -> tuple[list[np.ndarray], list[dict], Any]:
    seeds = Seeds.from_master(master, n_envs=B)
    cage = build_cage(
        make_env, B, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = agent_for(cage.spaces, seeds)
    handler = JaxHandler(agent, n_envs=B, seed=seeds.actions)
    tree = build_replay_tree(cage, handler, T, 64)
    replay = UniformReplay(
        tree, BATCH, np.random.default_rng(seeds.replay), learning_starts=STARTS
    )
    sampler = FeedForwardSampler(cage, handler, tree)
    sac = build_sac(agent, seeds)
    actions, metrics = [], []
    try:
        for step in range(STEPS):
            agent.random_actions = step * T * B < STARTS
            batch, _ = sampler.collect_batch()
            actions.append(np.array(batch["action"][:T]))
            replay.record_batch(batch)
            if replay.ready:
                metrics.append(sac.optimize(replay, new_steps=T * B))
        final = jax.device_get((agent.actor_params, agent.critic_params))
    finally:
        cage.close()
        tree.close()
    return actions, metrics, final


def seeded_run(
    masters: tuple[int, ...], on_nonfinite: Any = "stop_all", poison: int | None = None
) -> tuple[list[np.ndarray], list[list], Any, SeededSAC]:
    run_seeds = [Seeds.from_master(m, n_envs=B) for m in masters]
    env_seeds = [seed for seeds in run_seeds for seed in seeds.envs]
    K = len(masters)
    cage = build_cage(
        make_env, K * B, parallel="serial", options=CageOptions(seed=env_seeds)
    )
    stack = SeedStack([agent_for(cage.spaces, seeds) for seeds in run_seeds])
    handler = SeededHandler(stack, B, seeds=[s.actions for s in run_seeds])
    tree = build_replay_tree(cage, handler, T, 64)
    replay = PerRunReplay(
        tree,
        BATCH,
        [np.random.default_rng(s.replay) for s in run_seeds],
        learning_starts=STARTS,
    )
    sampler = FeedForwardSampler(cage, handler, tree)
    seeded = SeededSAC(
        [build_sac(a, s) for a, s in zip(stack.agents, run_seeds)],
        stack,
        seeds=list(masters),
        on_nonfinite=on_nonfinite,
    )
    actions, metrics = [], []
    try:
        for step in range(STEPS):
            seeded.random_actions = step * T * B < STARTS
            batch, _ = sampler.collect_batch()
            actions.append(np.array(batch["action"][:T]))
            if poison is not None and step == STEPS - 3:  # run `poison` diverges
                log_alpha = seeded.state.log_alpha.at[poison].set(np.nan)
                seeded.state = seeded.state._replace(log_alpha=log_alpha)
            replay.record_batch(batch)
            if replay.ready:
                metrics.append(seeded.optimize(replay, new_steps=T * B))
        final = jax.device_get((seeded.state.actor, seeded.state.critic))
    finally:
        cage.close()
        tree.close()
    return actions, metrics, final, seeded


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_seeded_sac_runs_equal_single_runs() -> None:
    actions, metrics, params, _ = seeded_run(MASTERS)
    assert len(metrics) >= 3
    for run, master in enumerate(MASTERS):
        single_actions, single_metrics, single_params = single_run(master)
        columns = slice(run * B, (run + 1) * B)
        assert len(single_metrics) == len(metrics)
        for step, want in enumerate(single_actions):
            # bitwise before the first update; float32 rounding after
            np.testing.assert_allclose(
                actions[step][:, columns], want, rtol=1e-5, atol=1e-6
            )
            if step * T * B < STARTS + T * B:
                np.testing.assert_array_equal(actions[step][:, columns], want)
        for update, want_metrics in enumerate(single_metrics):
            got = metrics[update][run]
            assert got is not None and got.keys() == want_metrics.keys()
            for name, value in want_metrics.items():
                assert got[name] == pytest.approx(value, rel=1e-4, abs=1e-5), name
        for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(single_params)):
            np.testing.assert_allclose(got[run], want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_nonfinite_sac_run_stops_alone() -> None:
    _, metrics, params, seeded = seeded_run(MASTERS, "stop_run", poison=1)
    assert set(seeded.stopped) == {1}
    assert f"seed {MASTERS[1]}" in str(seeded.stopped[1])
    assert metrics[-1][1] is None and metrics[-1][0] is not None
    _, single_metrics, single_params = single_run(MASTERS[0])
    assert metrics[-1][0]["q1_loss"] == pytest.approx(
        single_metrics[-1]["q1_loss"], rel=1e-4, abs=1e-5
    )
    for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(single_params)):
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
        assert np.isfinite(got[1]).all()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_nonfinite_sac_run_stops_all() -> None:
    with pytest.raises(NonFiniteError, match=f"seed {MASTERS[0]}"):
        seeded_run(MASTERS, "stop_all", poison=0)


def test_refuses_mixed_sac_configurations() -> None:
    seeds = Seeds.from_master(0, n_envs=1)
    env = make_env()
    spaces = build_cage(make_env, 1, parallel="serial").spaces
    env.close()
    stack = SeedStack([agent_for(spaces, seeds) for _ in range(2)])
    sacs = [build_sac(stack.agents[0], seeds), build_sac(stack.agents[1], seeds, 0.5)]
    with pytest.raises(ConfigError, match="tau"):
        SeededSAC(sacs, stack, seeds=[0, 1])


def test_per_run_replay_refuses_columns_that_do_not_split() -> None:
    seeds = Seeds.from_master(0, n_envs=3)
    cage = build_cage(
        make_env, 3, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = agent_for(cage.spaces, seeds)
    tree = build_replay_tree(cage, JaxHandler(agent, n_envs=3, seed=0), 1, 8)
    try:
        with pytest.raises(ConfigError, match="do not split into 2 runs"):
            PerRunReplay(tree, 4, [np.random.default_rng(k) for k in range(2)])
    finally:
        cage.close()
        tree.close()
