"""The JAX DQN agent and algorithm: epsilon-greedy actions, same seed same
bits, checkpoints that resume exactly, priorities, bad input."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
import pytest

from parllel.errors import ConfigError, NonFiniteError
from parllel.jax.agents.dqn_agent import build_dqn_agent
from parllel.jax.algos.dqn import DQN
from parllel.jax.algos.dqn_update import huber
from parllel.jax.algos.optimizers import adam
from parllel.jax.models.params import params_to_numpy
from parllel.replays.transitions import ReplayBatch

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(5)
HIDDEN = (8,)
BATCH = 16

pytestmark = pytest.mark.usefixtures("shared_compilations")


def _batches(count: int, seed: int = 0) -> list[ReplayBatch]:
    rng = np.random.default_rng(seed)
    n = BATCH
    return [
        ReplayBatch(
            observation=rng.normal(size=(n, 4)).astype(np.float32),
            action=rng.integers(0, 5, size=n),
            reward=rng.normal(size=n).astype(np.float32),
            next_observation=rng.normal(size=(n, 4)).astype(np.float32),
            terminated=rng.random(n) < 0.2,
            truncated=np.zeros(n, bool),
            discount=np.full(n, 0.99, np.float32),
            n_steps=np.ones(n, np.int64),
            indices=np.arange(n) + 100,
            weights=np.ones(n, np.float32),
        )
        for _ in range(count)
    ]


class ListReplay:
    """Hands out fixed batches in turn; records priorities when asked to."""

    def __init__(self, batches: list[ReplayBatch], prioritized: bool) -> None:
        self.batches = list(batches)
        self.priorities: list[tuple[np.ndarray, np.ndarray]] = []
        if prioritized:
            self.update_priorities = lambda i, p: self.priorities.append((i, p))

    def sample(self) -> ReplayBatch:
        return self.batches.pop(0)


def _dqn(seed: int = 3, **options) -> DQN:
    agent = build_dqn_agent(OBS, ACT, seed=seed, hidden_sizes=HIDDEN)
    return DQN(agent, adam(1e-2), target_update_interval=2, **options)


def _leaves(tree) -> list[np.ndarray]:
    return jax.tree.leaves(params_to_numpy(tree))


def _assert_same_bits(a, b) -> None:
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def test_epsilon_greedy_actions():
    agent = build_dqn_agent(OBS, ACT, seed=0, hidden_sizes=HIDDEN)
    observation = np.random.default_rng(0).normal(size=(2000, 4)).astype(np.float32)
    greedy = np.asarray(agent.q_values(agent.q_params, observation)).argmax(-1)
    step = jax.jit(agent.policy_step, static_argnums=3)
    key = jax.random.key(0)
    agent.epsilon = 0.0
    action, info = step(agent.params, observation, key, False)
    assert info == {} and action.dtype == np.int32
    np.testing.assert_array_equal(action, greedy)
    agent.epsilon = 1.0  # a new epsilon, the same compiled program
    action = np.asarray(step(agent.params, observation, key, False)[0])
    assert set(np.unique(action)) == set(range(5))
    assert 0.15 < np.mean(action == greedy) < 0.3  # uniform: 1/5 agree
    np.testing.assert_array_equal(step(agent.params, observation, key, True)[0], greedy)


def test_same_seed_same_run_bit_for_bit():
    runs = []
    for _ in range(2):
        dqn = _dqn(seed=3)
        metrics = dqn.optimize(ListReplay(_batches(4), False), None)
        runs.append((dqn, metrics))
    (first, first_metrics), (second, second_metrics) = runs
    assert first_metrics == second_metrics
    _assert_same_bits(first.agent.q_params, second.agent.q_params)
    _assert_same_bits(first.target_params, second.target_params)
    _assert_same_bits(first.opt_state, second.opt_state)
    other = build_dqn_agent(OBS, ACT, seed=4, hidden_sizes=HIDDEN)
    assert not np.array_equal(
        _leaves(other.q_params)[0], _leaves(_dqn().agent.q_params)[0]
    )


def test_checkpoint_resumes_exactly():
    batches = _batches(6)
    straight = _dqn(updates_per_optimize=3)
    for _ in range(2):
        straight.optimize(ListReplay(batches[:3] if _ == 0 else batches[3:], False))
    first = _dqn(updates_per_optimize=3)
    first.optimize(ListReplay(batches[:3], False))
    resumed = _dqn(seed=9, updates_per_optimize=3)  # other weights, overwritten
    resumed.agent.load_state_dict(first.agent.state_dict())
    resumed.load_state_dict(first.state_dict())
    assert resumed.updates_done == 3
    resumed.optimize(ListReplay(batches[3:], False))
    _assert_same_bits(resumed.agent.q_params, straight.agent.q_params)
    _assert_same_bits(resumed.target_params, straight.target_params)


def test_prioritized_replay_gets_each_updates_td_errors():
    batches = _batches(3)
    replay = ListReplay(batches, prioritized=True)
    dqn = _dqn(updates_per_optimize=3)
    metrics = dqn.optimize(replay)
    assert metrics["updates"] == 3.0
    assert [list(i) for i, _ in replay.priorities] == [list(b.indices) for b in batches]
    # the same updates in one call give the same errors
    again = _dqn(updates_per_optimize=3)
    errors = again.update_batches(batches)["td_error"]
    np.testing.assert_allclose(
        np.stack([p for _, p in replay.priorities]), errors, rtol=1e-6, atol=1e-6
    )


def test_non_finite_loss_keeps_the_weights():
    dqn = _dqn()
    before = _leaves(dqn.agent.q_params)
    batches = _batches(2)
    batches[1].reward[3] = np.nan
    with pytest.raises(NonFiniteError, match="DQN update 1: non-finite loss"):
        dqn.update_batches(batches)
    for x, y in zip(before, _leaves(dqn.agent.q_params)):
        np.testing.assert_array_equal(x, y)
    assert dqn.updates_done == 0


def test_huber_matches_its_definition():
    error = np.linspace(-3, 3, 61).astype(np.float32)
    expected = np.where(
        np.abs(error) < 1.5, 0.5 * error**2, 1.5 * (np.abs(error) - 0.75)
    )
    np.testing.assert_allclose(huber(error, 1.5), expected, rtol=1e-6)
    np.testing.assert_allclose(huber(error, float("inf")), 0.5 * error**2)
    grad = jax.grad(lambda e: huber(e, float("inf")).sum())(error)
    assert np.isfinite(grad).all()


def test_bad_input_is_named():
    agent = build_dqn_agent(OBS, ACT, seed=0, hidden_sizes=HIDDEN)
    with pytest.raises(ConfigError, match="not both"):
        DQN(agent, adam(1e-3), target_update_interval=10, tau=0.1)
    with pytest.raises(ConfigError, match="GradientTransformation"):
        DQN(agent, object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="DqnAgent"):
        DQN(object(), adam(1e-3))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Discrete"):
        build_dqn_agent(OBS, gym.spaces.Box(-1, 1, (2,)), seed=0)


def test_a_loop_of_calls_gives_the_scans_updates():
    batches = _batches(3)
    scanned, looped = _dqn(scan=True), _dqn(scan=False)
    metrics = [dqn.update_batches(batches) for dqn in (scanned, looped)]
    for name in ("loss", "grad_norm", "td_error"):
        np.testing.assert_allclose(metrics[0][name], metrics[1][name], rtol=1e-5)
    for x, y in zip(_leaves(scanned.agent.q_params), _leaves(looped.agent.q_params)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert looped.updates_done == 3
