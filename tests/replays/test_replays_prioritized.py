"""PrioritizedReplay and the numba sum tree."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.errors import ConfigError, ReplayError
from parllel.replays import PrioritizedReplay
from parllel.replays.sum_tree import SumTree
from tests.helpers.replay_helpers import ScriptedSampler, build_replay_tree, state_of

ENDS = [[(3, "term"), (5, "trunc")], [(2, "trunc"), (4, "term")]]


def test_sum_tree_sums_and_finds():
    tree = SumTree(5)
    tree.set(np.array([0, 2, 4]), np.array([1.0, 2.0, 3.0]))
    assert tree.total == 6.0
    # prefix spans: leaf 0 [0, 1), leaf 2 [1, 3), leaf 4 [3, 6); zero leaves never
    np.testing.assert_array_equal(
        tree.find(np.array([0.0, 0.99, 1.0, 2.5, 3.0, 5.999])), [0, 0, 2, 2, 4, 4]
    )
    tree.set(np.array([2]), np.array([0.0]))
    assert tree.total == 4.0
    assert 2 not in tree.find(np.linspace(0, 3.999, 200))
    rebuilt = SumTree(5)
    rebuilt.load_state_dict(tree.state_dict())
    np.testing.assert_array_equal(rebuilt.nodes, tree.nodes)
    with pytest.raises(ConfigError):
        tree.set(np.array([5]), np.array([1.0]))
    with pytest.raises(ConfigError):
        tree.set(np.array([0]), np.array([-1.0]))


def _filled(batch_size=16, batches=3, alpha=1.0, beta=0.5, T=4, B=2, N=16, **kw):
    tree = build_replay_tree(T, B, N)
    sampler = ScriptedSampler(tree, ENDS[:B])
    replay = PrioritizedReplay(
        tree, batch_size, np.random.default_rng(0), alpha=alpha, beta=beta, **kw
    )
    sampler.record_into(replay, batches)
    return tree, sampler, replay


def _stored_positions(replay):
    storage = replay.storage
    return storage.positions_from_age(np.arange(storage.num_transitions))


def test_sampling_frequencies_match_priorities():
    _, _, replay = _filled(alpha=0.7)
    positions = _stored_positions(replay)  # 24 transitions
    errors = np.arange(1, len(positions) + 1, dtype=np.float64)  # 1 .. 24
    replay.update_priorities(positions, errors)
    expected = (errors + replay.epsilon) ** 0.7
    expected /= expected.sum()

    draws = 64_000
    counts = np.zeros(len(positions))
    lookup = {int(p): i for i, p in enumerate(positions)}
    for _ in range(draws // replay.batch_size):
        for index in replay.sample().indices:
            counts[lookup[int(index)]] += 1
    assert counts.sum() == draws
    chi_square = float((((counts - draws * expected) ** 2) / (draws * expected)).sum())
    # 23 degrees of freedom: the 99.9% quantile is 49.7
    assert chi_square < 49.7, (chi_square, counts, draws * expected)


def test_importance_weights():
    _, _, replay = _filled(alpha=1.0, beta=0.5)
    positions = _stored_positions(replay)
    errors = np.linspace(0.5, 3.0, len(positions))
    replay.update_priorities(positions, errors)
    batch = replay.sample()
    priority = dict(zip(positions.tolist(), (errors + replay.epsilon).tolist()))
    total = sum(priority.values())
    raw = np.array(
        [(len(positions) * priority[int(i)] / total) ** -0.5 for i in batch.indices]
    )
    np.testing.assert_allclose(batch.weights, raw / raw.max(), rtol=1e-5)
    assert batch.weights.max() == pytest.approx(1.0)


def test_new_data_gets_max_priority_and_dropped_rows_zero():
    tree, sampler, replay = _filled(
        batch_size=8, batches=4, N=8
    )  # wraps: capacity 7 rows
    stored = _stored_positions(replay)
    leaves = replay.priorities.priorities
    assert set(np.flatnonzero(leaves)) == set(stored.tolist())
    replay.update_priorities(stored[:2], np.array([10.0, 0.0]))
    assert replay.max_priority == pytest.approx(10.0, rel=1e-6)
    tree.rotate()
    sampler.collect()
    replay.record_batch()
    newest = replay.storage.new_window_positions()
    np.testing.assert_allclose(
        replay.priorities.priorities[newest], replay.max_priority
    )
    # Rows 1-4 dropped out; 1-3 were overwritten by the new window, row 4 (the
    # new bootstrap row) holds no intact transition any more.
    assert replay.storage.oldest_row == 5
    stale = np.array([4 * 2])  # row 4, env 0
    assert stale[0] in stored
    assert not replay.storage.is_stored(stale).any()
    assert replay.priorities.priorities[stale[0]] == 0.0
    replay.update_priorities(stale, np.array([5.0]))  # skipped: no longer stored
    assert replay.priorities.priorities[stale[0]] == 0.0
    assert set(np.flatnonzero(replay.priorities.priorities)) == set(
        _stored_positions(replay).tolist()
    )


def test_prioritized_samples_respect_episode_boundaries():
    _, sampler, replay = _filled(batches=6, n_step=3, discount=0.5)
    batch = replay.sample()
    for k in range(len(batch.indices)):
        observation = state_of(batch.observation, k)
        next_observation = state_of(batch.next_observation, k)
        assert next_observation[1] == observation[1]  # same episode
        assert next_observation[2] == observation[2] + batch.n_steps[k]


def test_state_dict_round_trip_and_errors():
    _, _, replay = _filled()
    replay.update_priorities(_stored_positions(replay)[:4], np.array([1, 2, 3, 4.0]))
    state = replay.state_dict(include_contents=True)
    expected = replay.sample()
    other_tree = build_replay_tree(4, 2, 16)
    other = PrioritizedReplay(other_tree, 16, np.random.default_rng(5), beta=0.1)
    other.load_state_dict(state)
    assert other.beta == replay.beta and other.max_priority == replay.max_priority
    again = other.sample()
    for name in expected._fields:
        np.testing.assert_array_equal(getattr(again, name), getattr(expected, name))

    empty = PrioritizedReplay(build_replay_tree(4, 2, 16), 16, np.random.default_rng(5))
    empty.load_state_dict(replay.state_dict())  # no contents: restarts empty
    assert empty.priorities.total == 0.0
    with pytest.raises(ReplayError):
        empty.sample()
    with pytest.raises(ConfigError, match="beta"):
        replay.beta = 1.5
    with pytest.raises(ConfigError, match="priorities"):
        replay.update_priorities(np.array([0]), np.array([np.nan]))
    with pytest.raises(ConfigError, match="alpha"):
        PrioritizedReplay(
            build_replay_tree(4, 2, 16), 4, np.random.default_rng(), alpha=-1
        )
