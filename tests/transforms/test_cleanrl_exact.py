"""The pieces of CleanRL's exact PPO setup, each against a hand-computed case.

GAE with truncation treated as termination, the reward normalizer's
gymnasium 0.28 restart rule, the prior count of gymnasium's running
statistics, and final observations counted by the observation normalizer
(in the order a per-env gymnasium wrapper sees them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from parllel.builders import add_advantage_estimation, add_reward_normalization
from parllel.cages import CageOptions, SerialCage
from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
from parllel.transforms import NormalizeObservations, NormalizeRewards
from parllel.transforms.running_stats import RunningMeanStd
from tests.helpers.envs import CountingEnv
from tests.samplers.test_samplers_eval import make_handler


def gae_tree() -> dict:
    """4 steps of one env, truncated at t = 1 (final value 2), bootstrap 1."""
    truncated = np.zeros((4, 1), bool)
    truncated[1] = True
    final_value = np.zeros((4, 1))
    final_value[1] = 2.0
    return {
        "reward": np.ones((4, 1)),
        "agent_info": {"value": np.full((4, 1), 0.5)},
        "terminated": np.zeros((4, 1), bool),
        "truncated": truncated,
        "bootstrap_value": np.ones(1),
        "final_value": final_value,
    }


@pytest.mark.parametrize(
    "as_termination, expected",
    [
        # by hand, gamma = lambda = 0.5, delta = r + 0.5 next_value - 0.5:
        # t3: 1 + 0.5 - 0.5 = 1; t2: 0.75 + 0.25 * 1 = 1;
        # t1 cut: 1 + 0 - 0.5 = 0.5 (as termination) or 1 + 1 - 0.5 = 1.5;
        # t0: 0.75 + 0.25 * A1
        (True, [0.875, 0.5, 1.0, 1.0]),
        (False, [1.125, 1.5, 1.0, 1.0]),
    ],
)
def test_gae_truncation_as_termination_by_hand(as_termination, expected):
    tree = gae_tree()
    if as_termination:
        del tree["final_value"]  # not needed: truncations are not bootstrapped
    (gae,) = add_advantage_estimation(
        tree, 0.5, 0.5, truncation_as_termination=as_termination
    )
    gae(tree)
    np.testing.assert_allclose(tree["advantage"][:, 0], expected)
    np.testing.assert_allclose(tree["return_"][:, 0], np.add(expected, 0.5))


def reward_tree() -> dict:
    """Rewards 1, 2, 3, 4 of one env: terminated at t = 1, truncated at t = 2."""
    terminated, truncated = np.zeros((4, 1), bool), np.zeros((4, 1), bool)
    terminated[1], truncated[2] = True, True
    reward = np.array([[1.0], [2.0], [3.0], [4.0]])
    return {"reward": reward, "terminated": terminated, "truncated": truncated}


@pytest.mark.parametrize(
    "reset, returns",
    [
        # gymnasium 0.28, R = 0.5 (1 - terminated) R + r: 1; 2 (restarted at
        # the terminating step); 0.5 * 2 + 3 = 4; 0.5 * 4 + 4 = 6 (the
        # truncation does not restart it)
        ("termination", [1.0, 2.0, 4.0, 6.0]),
        # SB3, R = 0.5 R + r, zeroed after every episode end: 1; 2.5; 3; 4
        ("episode_end", [1.0, 2.5, 3.0, 4.0]),
    ],
)
def test_reward_normalizer_restart_rule_by_hand(reset, returns):
    tree = reward_tree()
    (normalize,) = add_reward_normalization(tree, 0.5, reset=reset)
    normalize.epsilon = 1.0  # keeps the hand arithmetic exact: r / sqrt(var + 1)
    normalize.clip = math.inf
    normalize(tree)
    expected = [
        r / math.sqrt(np.var(returns[: t + 1]) + 1.0)
        for t, r in enumerate([1.0, 2.0, 3.0, 4.0])
    ]
    np.testing.assert_allclose(tree["reward"][:, 0], expected)
    assert normalize.return_var == pytest.approx(np.var(returns))


def gymnasium_reward_reference(rewards, terminated, gamma):
    """gymnasium 0.28.1's NormalizeReward step by step (its RunningMeanStd:
    count 1e-4, mean 0, var 1 to start; epsilon 1e-8)."""
    mean, var, count, ret, out = 0.0, 1.0, 1e-4, 0.0, []
    for r, term in zip(rewards, terminated):
        ret = ret * gamma * (1 - term) + r
        delta, total = ret - mean, count + 1
        mean = mean + delta / total
        var = (var * count + delta**2 * count / total) / total
        count = total
        out.append(r / np.sqrt(var + 1e-8))
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reward_normalizer_matches_gymnasium_028(seed):
    rng = np.random.default_rng(seed)
    T = 300
    tree = {
        "reward": rng.normal(size=(T, 1)),
        "terminated": rng.random((T, 1)) < 0.02,
        "truncated": rng.random((T, 1)) < 0.02,
    }
    expected = gymnasium_reward_reference(
        tree["reward"][:, 0].copy(), tree["terminated"][:, 0], 0.99
    )
    normalize = NormalizeRewards(
        tree, 0.99, clip=math.inf, reset="termination", prior_count=1e-4
    )
    for start in range(0, T, 100):  # three batches: the state carries over
        part = {k: v[start : start + 100] for k, v in tree.items()}
        normalize(part)
    np.testing.assert_allclose(tree["reward"][:, 0], expected, rtol=1e-9)


def test_running_stats_prior_count_as_gymnasium():
    stats = RunningMeanStd((2,), prior_count=1e-4)
    np.testing.assert_allclose(stats.var, [1.0, 1.0])
    stats.update(np.array([[2.0, -4.0]]))
    # one row x merged into (count 1e-4, mean 0, var 1), by hand:
    # mean = x / (1 + 1e-4); var = (1e-4 + x^2 * 1e-4 / (1 + 1e-4)) / (1 + 1e-4)
    total = 1.0 + 1e-4
    x = np.array([2.0, -4.0])
    np.testing.assert_allclose(stats.mean, x / total)
    np.testing.assert_allclose(stats.var, (1e-4 + x**2 * 1e-4 / total) / total)
    with pytest.raises(Exception, match="prior_count"):
        RunningMeanStd((2,), prior_count=-1.0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("count_finals", [True, False])
def test_observation_normalizer_counts_final_observations_first(count_finals):
    # episodes of 2 steps, truncated; one env, 4 steps: the env returns
    # reset (t = 0), 1, final 2, reset 0, 1, final 2, reset 0
    with SerialCage(
        CountingEnv,
        1,
        {"min_length": 2, "max_length": 2, "terminal": False},
        options=CageOptions(seed=0),
    ) as cage:
        handler, example = make_handler(cage)
        with sample_tree_from_examples(cage.example, example, 4, 1) as tree:
            normalizer = NormalizeObservations(
                tree, clip=math.inf, count_final_observations=count_finals
            )
            FeedForwardSampler(
                cage, handler, tree, observation_normalizer=normalizer
            ).collect_batch()
            stats = normalizer.stats[""]
            counted = [0, 1, 2, 0, 1, 2, 0] if count_finals else [0, 1, 0, 1, 0]
            assert stats.count == len(counted)
            assert stats.mean[2] == pytest.approx(np.mean(counted))
            # the second reset observation (obs[2]) saw the final one first
            seen = [0, 1, 2, 0] if count_finals else [0, 1, 0]
            normalized = (0 - np.mean(seen)) / np.sqrt(np.var(seen) + 1e-8)
            assert tree.observation[2][0, 2] == pytest.approx(normalized)
