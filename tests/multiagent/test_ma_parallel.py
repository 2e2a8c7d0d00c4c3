"""ParallelEnvAdapter in cages: the sampler's [T, B, A] fields match a plain loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.multiagent import MultiAgentTrajInfo, make_parallel_env_factory
from parllel.multiagent.parallel_env import ParallelEnvAdapter
from tests.helpers.ma_envs import DropoutParallelEnv
from tests.multiagent.ma_reference import (
    A,
    parallel_factory,
    parallel_reference,
    run_sampler,
)

T, B, N_BATCHES = 7, 3, 3
AGENT_KEYS = (
    fields.AGENT_REWARD,
    fields.AGENT_TERMINATED,
    fields.AGENT_TRUNCATED,
    fields.AGENT_MASK,
)


def observation_leaves(observation, dict_obs):
    if dict_obs:
        return {
            f"{fields.OBSERVATION}.observation": observation["observation"],
            f"{fields.OBSERVATION}.action_mask": observation["action_mask"],
        }
    return {fields.OBSERVATION: observation}


def check_against_reference(batches, completed, seeds, dict_obs, max_life):
    env_episodes = {}
    for b in range(B):
        env = DropoutParallelEnv(dict_obs=dict_obs, max_life=max_life)
        rows, episodes = parallel_reference(env, seeds[b], N_BATCHES * T, dict_obs)
        env_episodes[b] = episodes
        for k, batch in enumerate(batches):
            for t in range(T + 1):
                row = rows[k * T + t]
                where = f"batch {k}, t {t}, env {b}"
                expected = observation_leaves(row["observation"], dict_obs)
                for path, value in expected.items():
                    np.testing.assert_array_equal(batch[path][t, b], value, where)
                if t == T:
                    continue
                np.testing.assert_array_equal(batch[fields.ACTION][t, b], row["action"])
                assert batch[fields.REWARD][t, b] == row["reward"], where
                for key in (fields.TERMINATED, fields.TRUNCATED):
                    assert batch[key][t, b] == row[key], (where, key)
                done = row["terminated"] or row["truncated"]
                assert batch[fields.DONE][t, b] == done
                for key in AGENT_KEYS:
                    leaf = batch[f"{fields.ENV_INFO}.{key}"]
                    assert leaf.shape == (T, B, A)
                    np.testing.assert_array_equal(leaf[t, b], row[key], (where, key))
    # every finished episode's per-agent returns, env by env in order
    for b in range(B):
        mine = [traj for traj in completed if traj.env_index == b]
        expected = env_episodes[b]
        assert len(mine) == len(expected) > 0
        for traj, returns in zip(mine, expected):
            assert isinstance(traj, MultiAgentTrajInfo)
            np.testing.assert_allclose(traj.agent_returns, returns, rtol=1e-12)
            assert traj.agent_returns.dtype == np.float64
            assert traj.agent_lengths.max() == traj.length
            np.testing.assert_allclose(traj.return_, returns.sum(), rtol=1e-6)
            # the env's per-agent infos of the last step reach TrajInfo.extra
            # (red's {"t": t} if red acted then; the others' are empty)
            if traj.agent_lengths[0] == traj.length:
                assert traj.extra["agent_infos"]["red"] == {"t": traj.length - 1}
            else:
                assert "agent_infos" not in traj.extra
    assert any("agent_infos" in traj.extra for traj in completed)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "kind, dict_obs", [("serial", False), ("serial", True), ("process", True)]
)
def test_fields_line_up_with_a_plain_loop(kind, dict_obs):
    max_life = 5
    factory = parallel_factory(dict_obs=dict_obs, max_life=max_life)
    batches, completed, seeds = run_sampler(kind, factory, B, T, N_BATCHES)
    batch = batches[0]
    assert batch[fields.ACTION].shape == (T, B, A)
    assert batch[f"{fields.ENV_INFO}.{fields.AGENT_REWARD}"].dtype == np.float32
    assert batch[f"{fields.ENV_INFO}.{fields.AGENT_MASK}"].dtype == np.bool_
    # agents drop out at different times: some steps have partial masks
    masks = np.concatenate(
        [b[f"{fields.ENV_INFO}.{fields.AGENT_MASK}"] for b in batches]
    )
    assert (masks.any(-1) & ~masks.all(-1)).any()
    check_against_reference(batches, completed, seeds, dict_obs, max_life)


@pytest.mark.timeout(120)
def test_serial_and_process_cages_give_the_same_batches_bitwise():
    factory = parallel_factory(dict_obs=True, max_life=4)
    serial, serial_trajs, _ = run_sampler("serial", factory, B, T, N_BATCHES, seed=11)
    process, process_trajs, _ = run_sampler(
        "process", factory, B, T, N_BATCHES, seed=11
    )
    for one, other in zip(serial, process):
        assert one.keys() == other.keys()
        for path in one:
            assert one[path].dtype == other[path].dtype, path
            assert one[path].tobytes() == other[path].tobytes(), path
    key = lambda traj: (traj.env_index, traj.length)  # noqa: E731
    pairs = zip(sorted(serial_trajs, key=key), sorted(process_trajs, key=key))
    for one, other in pairs:
        assert one.agent_returns.tobytes() == other.agent_returns.tobytes()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["serial", "process"])
def test_simple_spread_in_cages_matches_a_bare_loop(kind):
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    n_agents, batch_T = 3, 30  # episodes of 25 steps: one boundary per env
    factory = make_parallel_env_factory(simple_spread_v3.parallel_env, N=n_agents)

    def policy(observation, prev_action, prev_reward):
        # deterministic actions from the observation (velocity signs)
        return ((observation[..., 0] > 0) * 2 + (observation[..., 1] > 0)).astype(
            np.int64
        ) + 1

    batches, completed, seeds = run_sampler(kind, factory, 2, batch_T, 1, policy=policy)
    batch = batches[0]
    assert batch[fields.OBSERVATION].shape == (batch_T + 1, 2, n_agents, 18)
    for b in range(2):
        env = simple_spread_v3.parallel_env(N=n_agents)
        observations, _ = env.reset(seed=seeds[b])
        agents = env.possible_agents
        for t in range(batch_T):
            stacked = np.stack([observations[agent] for agent in agents])
            np.testing.assert_array_equal(batch[fields.OBSERVATION][t, b], stacked)
            actions = policy(stacked[None], None, None)[0]
            np.testing.assert_array_equal(batch[fields.ACTION][t, b], actions)
            observations, rewards, _, truncations, _ = env.step(
                {agent: actions[i] for i, agent in enumerate(agents)}
            )
            np.testing.assert_array_equal(
                batch[f"{fields.ENV_INFO}.{fields.AGENT_REWARD}"][t, b],
                np.array([rewards[agent] for agent in agents], np.float32),
            )
            over = not env.agents
            assert batch[fields.TRUNCATED][t, b] == over
            assert not batch[fields.TERMINATED][t, b]
            if over:
                assert t == 24 and all(truncations.values())
                observations, _ = env.reset()
    assert [traj.length for traj in completed] == [25, 25]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    max_life=st.integers(1, 6),
    dict_obs=st.booleans(),
)
def test_adapter_matches_the_plain_loop_for_any_lifetimes(seed, max_life, dict_obs):
    rows, _ = parallel_reference(
        DropoutParallelEnv(dict_obs=dict_obs, max_life=max_life), seed, 20, dict_obs
    )
    env = ParallelEnvAdapter(DropoutParallelEnv(dict_obs=dict_obs, max_life=max_life))
    observation, _ = env.reset(seed=seed)
    for t, row in enumerate(rows[:-1]):
        expected = observation_leaves(row["observation"], dict_obs)
        for path, value in observation_leaves(observation, dict_obs).items():
            np.testing.assert_array_equal(value, expected[path], f"t {t} {path}")
        observation, reward, terminated, truncated, info = env.step(row["action"])
        assert np.float32(reward) == row["reward"]
        assert (terminated, truncated) == (row["terminated"], row["truncated"])
        for key in AGENT_KEYS:
            np.testing.assert_array_equal(info[key], row[key], f"t {t} {key}")
        if terminated or truncated:
            observation, _ = env.reset()
