"""The seed axis: K runs in one program equal K separate runs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import jax
import numpy as np
import pytest

from parllel.builders import add_advantage_estimation, build_sample_tree
from parllel.cages import CageOptions, EnvSpaces, build_cage
from parllel.errors import ConfigError, NonFiniteError
from parllel.jax import JaxHandler
from parllel.jax.agents import build_actor_critic_agent
from parllel.jax.algos import PPO, SeededPPO, adam
from parllel.jax.seeds import SeededHandler, SeedStack
from parllel.samplers import FeedForwardSampler
from parllel.seeding import Seeds
from parllel.transforms import Compose

B, T, UPDATES = 2, 16, 3
MASTERS = (3, 11)


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def schedule(progress: float) -> float:
    return 1e-2 * (1.0 - progress)


def build_ppo(agent: Any, seeds: Seeds) -> PPO:
    return PPO(
        agent,
        adam(1e-2),
        learning_rate=schedule,
        epochs=2,
        minibatches=2,
        seed=seeds.torch,
    )


def agent_for(spaces: Any, seeds: Seeds) -> Any:
    return build_actor_critic_agent(
        spaces.observation, spaces.action, seed=seeds.torch, hidden_sizes=(8,)
    )


def sampler_for(cage: Any, handler: Any) -> FeedForwardSampler:
    sample_tree = build_sample_tree([cage], handler, T)
    transform = Compose(add_advantage_estimation(sample_tree, 0.99, 0.95))
    return FeedForwardSampler([cage], handler, sample_tree, transform=transform)


def single_run(master: int) -> tuple[list[np.ndarray], list[dict], Any]:
    seeds = Seeds.from_master(master, n_envs=B)
    cage = build_cage(
        make_env, B, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = agent_for(cage.spaces, seeds)
    sampler = sampler_for(cage, JaxHandler(agent, n_envs=B, seed=seeds.actions))
    ppo = build_ppo(agent, seeds)
    actions, metrics = [], []
    try:
        for update in range(UPDATES):
            batch, _ = sampler.collect_batch()
            actions.append(np.array(batch["action"]))
            metrics.append(ppo.optimize(batch, progress=update / UPDATES))
        final = jax.device_get(agent.params)
    finally:
        cage.close()
        sampler.sample_tree.close()
    return actions, metrics, final


def seeded_run(
    masters: tuple[int, ...], on_nonfinite: Any = "stop_all", poison: int | None = None
) -> tuple[list[np.ndarray], list[list], Any, SeededPPO]:
    run_seeds = [Seeds.from_master(m, n_envs=B) for m in masters]
    env_seeds = [seed for seeds in run_seeds for seed in seeds.envs]
    cage = build_cage(
        make_env,
        len(masters) * B,
        parallel="serial",
        options=CageOptions(seed=env_seeds),
    )
    stack = SeedStack([agent_for(cage.spaces, seeds) for seeds in run_seeds])
    handler = SeededHandler(stack, B, seeds=[s.actions for s in run_seeds])
    sampler = sampler_for(cage, handler)
    seeded = SeededPPO(
        [build_ppo(a, s) for a, s in zip(stack.agents, run_seeds)],
        stack,
        envs_per_run=B,
        seeds=list(masters),
        on_nonfinite=on_nonfinite,
    )
    actions, metrics = [], []
    try:
        for update in range(UPDATES):
            batch, _ = sampler.collect_batch()
            if poison is not None and update == 1:
                batch["advantage"][:, poison * B] = np.nan
            actions.append(np.array(batch["action"]))
            metrics.append(seeded.optimize(batch, progress=update / UPDATES))
    finally:
        cage.close()
        sampler.sample_tree.close()
    return actions, metrics, jax.device_get(stack.params), seeded


@pytest.mark.slow
def test_seeded_runs_equal_single_runs() -> None:
    actions, metrics, params, _ = seeded_run(MASTERS)
    for run, master in enumerate(MASTERS):
        single_actions, single_metrics, single_params = single_run(master)
        columns = slice(run * B, (run + 1) * B)
        for update in range(UPDATES):
            # the actions (sampled with run k's weights and key) are equal
            np.testing.assert_array_equal(
                actions[update][:, columns], single_actions[update]
            )
            for name, value in single_metrics[update].items():
                assert metrics[update][run][name] == pytest.approx(
                    value, rel=1e-5, abs=1e-6, nan_ok=True
                ), name
        for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(single_params)):
            np.testing.assert_allclose(got[run], want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_nonfinite_run_stops_alone() -> None:
    _, metrics, params, seeded = seeded_run(MASTERS, "stop_run", poison=1)
    assert metrics[1][1] is None and metrics[2][1] is None
    assert set(seeded.stopped) == {1}
    assert f"seed {MASTERS[1]}" in str(seeded.stopped[1])
    # run 0 is untouched: as its single run
    _, single_metrics, single_params = single_run(MASTERS[0])
    assert metrics[2][0]["policy_loss"] == pytest.approx(
        single_metrics[2]["policy_loss"], rel=1e-5, abs=1e-6
    )
    for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(single_params)):
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)
        assert np.isfinite(got[1]).all()


@pytest.mark.slow
def test_nonfinite_run_stops_all() -> None:
    with pytest.raises(NonFiniteError, match=f"seed {MASTERS[0]}"):
        seeded_run(MASTERS, "stop_all", poison=0)


def test_refuses_mixed_configurations() -> None:
    seeds = Seeds.from_master(0, n_envs=1)
    env = make_env()
    agents = [agent_for(env_spaces(env), seeds) for _ in range(2)]
    stack = SeedStack(agents)
    ppos = [build_ppo(agents[0], seeds), PPO(agents[1], adam(1e-2), epochs=3)]
    with pytest.raises(ConfigError, match="epochs"):
        SeededPPO(ppos, stack, envs_per_run=1, seeds=[0, 1])


def env_spaces(env: gym.Env) -> EnvSpaces:
    return EnvSpaces(env.observation_space, env.action_space)
