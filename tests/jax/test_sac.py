"""JAX SAC: optimize from a replay, same seed bit for bit, state dicts,
non-finite updates refused, the agent's actions."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.errors import CheckpointMismatchError, ConfigError, NonFiniteError
from parllel.jax.agents.sac_agent import SacAgent, build_sac_agent
from parllel.jax.algos.replay_updates import ReplayArrays
from parllel.jax.algos.sac import SAC, EntropyCoefficient, _mean_metrics
from parllel.jax.algos.sac_setup import build_sac_optimizers
from parllel.replays.transitions import ReplayBatch

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(
    np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
)
BATCH = 16


# programs compiled once per module (tests/jax/conftest.py): each SAC jits
# its own update, and most tests here build the same one
pytestmark = pytest.mark.usefixtures("shared_compilations")


class FakeReplay:
    """Batches drawn from a seeded generator (what SAC needs of a replay)."""

    def __init__(self, seed: int = 0, nan_reward_at: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.sampled = 0
        self.nan_reward_at = nan_reward_at

    def sample(self) -> ReplayBatch:
        rng, n = self.rng, BATCH
        reward = rng.normal(size=n).astype(np.float32)
        if self.sampled == self.nan_reward_at:
            reward[0] = np.nan
        self.sampled += 1
        return ReplayBatch(
            observation=rng.normal(size=(n, 3)).astype(np.float32),
            action=rng.uniform(-1, 1, (n, 2)).astype(np.float32),
            reward=reward,
            next_observation=rng.normal(size=(n, 3)).astype(np.float32),
            terminated=rng.random(n) < 0.1,
            truncated=np.zeros(n, bool),
            discount=np.full(n, 0.99, np.float32),
            n_steps=np.ones(n, np.int64),
            indices=np.arange(n),
            weights=np.ones(n, np.float32),
        )


class FakePrioritizedReplay(FakeReplay):
    def __init__(self) -> None:
        super().__init__()
        self.priorities: list[np.ndarray] = []

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.priorities.append(np.asarray(priorities))


def make_sac(seed: int = 0, **kwargs) -> SAC:
    agent = build_sac_agent(OBS, ACT, seed=seed, hidden_sizes=(8, 8))
    return SAC(
        agent, build_sac_optimizers(1e-3), EntropyCoefficient(1.0), seed=seed, **kwargs
    )


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_optimize_runs_the_ratio_of_updates_and_reports_torch_metrics():
    sac = make_sac(replay_ratio=0.5)
    replay = FakeReplay()
    metrics = sac.optimize(replay, new_steps=4)
    assert metrics["updates"] == 2.0 and replay.sampled == 2
    assert sac.updates_done == 2
    for name in ("q1_loss", "q2_loss", "q1", "q2", "target_q", "alpha"):
        assert np.isfinite(metrics[name]), name
    for name in ("pi_loss", "alpha_loss", "entropy"):
        assert np.isfinite(metrics[name]), name
    assert sac.optimize(replay, new_steps=1) == {"updates": 0.0}  # carry 0.5
    with pytest.raises(ConfigError, match="new_steps"):
        sac.optimize(replay)


def test_same_seed_same_parameters_bit_for_bit():
    runs = []
    for _ in range(2):
        sac = make_sac(seed=3, updates_per_optimize=4, policy_delay=2)
        replay = FakeReplay(seed=5)
        for _ in range(3):
            sac.optimize(replay)
        runs.append(
            leaves((sac.agent.actor_params, sac.agent.critic_params, sac.target_critic))
            + [np.asarray(sac.log_alpha)]
        )
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    other = make_sac(seed=4, updates_per_optimize=4, policy_delay=2)
    other.optimize(FakeReplay(seed=5))
    assert not np.array_equal(leaves(other.agent.actor_params)[0], runs[0][0])


def test_state_dict_resumes_the_same_run():
    sac = make_sac(updates_per_optimize=2)
    replay = FakeReplay()
    sac.optimize(replay)
    agent_state, sac_state = sac.agent.state_dict(), sac.state_dict()
    assert all(
        isinstance(x, np.ndarray) for x in jax.tree.leaves(sac_state["target_critic"])
    )
    rng_state = replay.rng.bit_generator.state
    sac.optimize(replay)
    expected = leaves(sac.agent.critic_params) + [np.asarray(sac.log_alpha)]

    resumed = make_sac(seed=9, updates_per_optimize=2)
    resumed.agent.load_state_dict(agent_state)
    resumed.load_state_dict(sac_state)
    replay.rng.bit_generator.state = rng_state
    resumed.optimize(replay)
    got = leaves(resumed.agent.critic_params) + [np.asarray(resumed.log_alpha)]
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)
    assert resumed.updates_done == 4


def test_state_dict_of_another_size_is_refused():
    sac = make_sac()
    bigger = SAC(
        build_sac_agent(OBS, ACT, seed=0, hidden_sizes=(4, 4)),
        build_sac_optimizers(1e-3),
        1.0,
        seed=0,
    )
    with pytest.raises(CheckpointMismatchError):
        bigger.load_state_dict(sac.state_dict())


def state_leaves(sac: SAC) -> list[np.ndarray]:
    return leaves(
        (
            sac.agent.actor_params,
            sac.agent.critic_params,
            sac.target_critic,
            sac.log_alpha,
            sac.opt_states,
        )
    )


@pytest.mark.parametrize("policy_delay", [1, 2])
def test_non_finite_update_and_every_later_one_are_not_kept(policy_delay):
    source = FakeReplay(nan_reward_at=1)
    batches = [source.sample() for _ in range(3)]
    noise = np.random.default_rng(1).normal(size=(3, 1 + policy_delay, BATCH, 2))
    noise = noise.astype(np.float32)
    sac, reference = (make_sac(policy_delay=policy_delay) for _ in range(2))
    before = state_leaves(sac)
    reference.update_batches(ReplayArrays.stack(batches[:1], np.float32), noise[:1])
    with pytest.raises(NonFiniteError, match="SAC update 1") as error:
        sac.update_batches(ReplayArrays.stack(batches, np.float32), noise)
    assert "q1_loss" in error.value.terms
    assert sac.updates_done == reference.updates_done == 1
    for a, b in zip(state_leaves(sac), state_leaves(reference)):
        np.testing.assert_array_equal(a, b)
    # the caller's arrays from before the call are intact
    for a, b in zip(before, state_leaves(make_sac(policy_delay=policy_delay))):
        np.testing.assert_array_equal(a, b)
    # and training goes on from the kept state
    good = ReplayArrays.stack([FakeReplay(seed=2).sample()], np.float32)
    for algo in (sac, reference):
        algo.update_batches(good, noise[:1])
    for a, b in zip(state_leaves(sac), state_leaves(reference)):
        np.testing.assert_array_equal(a, b)


def test_state_is_updated_in_place_and_arrays_set_from_outside_stay_valid():
    sac = make_sac()
    replay = FakeReplay()
    mine = sac.agent.actor_params  # not the program's own output: copied once
    sac.optimize(replay)
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(mine))
    last = sac.agent.actor_params
    sac.optimize(replay)  # the last call's outputs: donated
    assert all(leaf.is_deleted() for leaf in jax.tree.leaves(last))
    loaded = make_sac(seed=1)
    loaded.agent.load_state_dict(sac.agent.state_dict())
    loaded.load_state_dict(sac.state_dict())
    held = (loaded.agent.critic_params, loaded.target_critic, loaded.opt_states)
    loaded.optimize(replay)
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(held))


def test_prioritized_replay_gets_td_errors_per_update():
    sac = make_sac(updates_per_optimize=2)
    replay = FakePrioritizedReplay()
    assert sac.optimize(replay)["updates"] == 2.0
    assert len(replay.priorities) == 2
    assert all(p.shape == (BATCH,) and (p >= 0).all() for p in replay.priorities)


@pytest.mark.slow  # its own program (about 15 s to compile on a loaded 2-core machine)
def test_fixed_alpha_stays():
    agent = build_sac_agent(OBS, ACT, seed=0, hidden_sizes=(8, 8))
    sac = SAC(agent, build_sac_optimizers(1e-3), 0.2, seed=0, updates_per_optimize=1)
    metrics = sac.optimize(FakeReplay())
    assert sac.alpha == pytest.approx(0.2) and "alpha_loss" not in metrics


def test_agent_actions_in_bounds_random_and_deterministic():
    agent = build_sac_agent(OBS, ACT, seed=0, hidden_sizes=(8, 8))
    assert isinstance(agent, SacAgent)
    observation = np.random.default_rng(0).normal(size=(256, 3)).astype(np.float32)
    key = jax.random.key(1)
    policy_step = jax.jit(agent.policy_step, static_argnums=3)
    sampled, info = policy_step(agent.params, observation, key, False)
    assert info == {} and sampled.shape == (256, 2)
    assert ACT.contains(np.asarray(sampled[0]))
    deterministic, _ = policy_step(agent.params, observation, key, True)
    dist_params = agent.dist_params(agent.actor_params, observation)
    np.testing.assert_allclose(
        deterministic, agent.distribution.deterministic(dist_params), rtol=1e-6
    )
    agent.random_actions = True
    uniform, _ = policy_step(agent.params, observation, key, False)
    uniform = np.asarray(uniform)
    assert (uniform >= ACT.low).all() and (uniform <= ACT.high).all()
    # uniform over the bounds: spread, not the actor's narrow start
    assert uniform[:, 0].min() < -1.5 and uniform[:, 0].max() > 1.5
    still, _ = policy_step(agent.params, observation, key, True)
    np.testing.assert_array_equal(still, deterministic)  # eval ignores the warm-up


NAMES = ("q1_loss", "actor_stepped", "pi_loss", "alpha", "entropy")


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6).flatmap(
        lambda k: st.tuples(
            st.lists(st.booleans(), min_size=k, max_size=k),
            st.lists(
                st.lists(st.floats(-1e3, 1e3, width=32), min_size=4, max_size=4),
                min_size=k,
                max_size=k,
            ),
        )
    )
)
def test_mean_metrics_match_a_plain_mean_per_name(rows) -> None:
    stepped, values = rows
    table = np.array(
        [[v[0], float(s), v[1], v[2], v[3]] for s, v in zip(stepped, values)],
        np.float32,
    )
    got = _mean_metrics(NAMES, table)
    mask = np.array(stepped)
    expected = {"q1_loss": table[:, 0].mean(dtype=np.float64)}
    expected["alpha"] = table[:, 3].mean(dtype=np.float64)
    if mask.any():  # the actor's metrics over the updates where it stepped
        expected["pi_loss"] = table[mask, 2].mean(dtype=np.float64)
        expected["entropy"] = table[mask, 4].mean(dtype=np.float64)
    expected["updates"] = float(len(table))
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-6, abs=1e-6), name
