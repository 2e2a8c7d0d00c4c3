"""UniformReplay: episode boundaries, wrap-around, errors, checkpoints."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError, ReplayError
from parllel.replays import ReplayRatio, UniformReplay
from parllel.replays.transitions import gather_transitions
from parllel.tree import ArrayDict
from tests.helpers.replay_helpers import (
    SCRIPTED_ENDS,
    ScriptedSampler,
    build_replay_tree,
    state_of,
)


def _every_stored(replay):
    """All stored transitions, oldest first, as one batch."""
    storage = replay.storage
    positions = storage.positions_from_age(np.arange(storage.num_transitions))
    return gather_transitions(storage, positions, replay.n_step, replay.discount)


def _check_against_truth(batch, sampler, dict_obs=False):
    for k in range(len(batch.action)):
        observation = state_of(batch.observation, k, dict_obs)
        env, step = observation[0], int(batch.action[k])
        truth = sampler.history[(step, env)]
        next_observation = state_of(batch.next_observation, k, dict_obs)
        assert observation == truth.observation
        # same episode, one step later: never the next episode's reset observation
        assert next_observation == truth.next_observation
        assert next_observation[1] == observation[1]
        assert next_observation[2] == observation[2] + 1
        assert bool(batch.terminated[k]) == truth.terminated
        assert bool(batch.truncated[k]) == truth.truncated
        assert batch.reward[k] == np.float32(truth.reward)
        if dict_obs:
            assert batch.next_observation["extra"][k] == observation[1]


@pytest.mark.parametrize("dict_obs", [False, True])
@pytest.mark.parametrize("full_size", [4, 12])
def test_transitions_never_cross_episodes_across_wraparound(dict_obs, full_size):
    T, B = 4, 3
    tree = build_replay_tree(T, B, full_size, dict_obs)
    sampler = ScriptedSampler(tree, SCRIPTED_ENDS, dict_obs=dict_obs)
    replay = UniformReplay(tree, 4, np.random.default_rng(0))
    for _ in range(4 * full_size // T + 1):  # several laps
        sampler.collect()
        replay.record_batch()
        # read both before and after the rotation that may wrap around
        for rotate in (False, True):
            batch = _every_stored(replay)
            _check_against_truth(batch, sampler, dict_obs)
            newest = sampler.global_step - 1
            stored = {
                (int(a), state_of(batch.observation, k, dict_obs)[0])
                for k, a in enumerate(batch.action)
            }
            expected_steps = range(max(0, newest - (full_size - 1) + 1), newest + 1)
            assert stored == {(g, b) for g in expected_steps for b in range(B)}
            _check_against_truth(replay.sample(), sampler, dict_obs)
            if rotate is False:
                tree.rotate()
    history = sampler.history.values()
    assert any(s.terminated for s in history) and any(s.truncated for s in history)


def test_capacity_and_length():
    tree = build_replay_tree(2, 2, 6)
    sampler = ScriptedSampler(tree, SCRIPTED_ENDS[:2])
    replay = UniformReplay(tree, 2, np.random.default_rng(0))
    sizes = []
    for _ in range(5):
        sampler.collect()
        assert replay.record_batch() == 4
        sizes.append(len(replay))
        tree.rotate()
    assert sizes == [4, 8, 10, 10, 10]  # at most (full_size - 1) * B


def test_seeded_sampling_is_reproducible():
    def run(seed):
        tree = build_replay_tree(4, 2, 8)
        sampler = ScriptedSampler(tree, SCRIPTED_ENDS[:2])
        replay = UniformReplay(tree, 5, np.random.default_rng(seed))
        sampler.collect()
        replay.record_batch()
        return replay.sample().indices

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def test_sampling_errors():
    tree = build_replay_tree(4, 2, 8)
    sampler = ScriptedSampler(tree, SCRIPTED_ENDS[:2])
    replay = UniformReplay(tree, 4, np.random.default_rng(0), learning_starts=10)
    with pytest.raises(ReplayError, match="learning_starts"):
        replay.sample()
    sampler.collect()
    replay.record_batch()
    assert not replay.ready
    with pytest.raises(ReplayError, match="learning_starts"):
        replay.sample()
    with pytest.raises(ReplayError, match="record_batch"):
        replay.record_batch()  # the same window twice
    tree.rotate()
    sampler.collect()
    replay.record_batch()
    assert replay.ready and len(replay.sample()) == 10
    with pytest.raises(ReplayError, match="cannot sample 100"):
        replay.sample(100)
    tree.rotate()
    tree.rotate()  # skipped a batch
    with pytest.raises(ReplayError, match="expects the next batch"):
        replay.record_batch()


def test_config_errors():
    tree = build_replay_tree(4, 2, 8)
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="batch_size"):
        UniformReplay(tree, 15, rng)  # more than (8 - 1) * 2 can ever be stored
    with pytest.raises(ConfigError, match="learning_starts"):
        UniformReplay(tree, 4, rng, learning_starts=100)
    with pytest.raises(ConfigError, match="n_step"):
        UniformReplay(tree, 4, rng, n_step=0)
    with pytest.raises(ConfigError, match="discount"):
        UniformReplay(tree, 4, rng, discount=1.5)
    with pytest.raises(ConfigError, match="Generator"):
        UniformReplay(tree, 4, np.random.RandomState(0))
    missing = ArrayDict(
        {k: v for k, v in tree.items() if k != fields.FINAL_OBSERVATION}
    )
    with pytest.raises(ConfigError, match="final_observation"):
        UniformReplay(missing, 4, rng)
    unpadded = ArrayDict(dict(tree.items()))
    unpadded[fields.OBSERVATION] = Array((4, 2), (3,), full_size=8)
    with pytest.raises(ConfigError, match="padding"):
        UniformReplay(unpadded, 4, rng)
    mismatched = ArrayDict(dict(tree.items()))
    mismatched[fields.REWARD] = Array((4, 2), full_size=16)
    with pytest.raises(ConfigError, match="reward"):
        UniformReplay(mismatched, 4, rng)


def _filled(seed=0, batches=5, T=4, B=2, N=12):
    tree = build_replay_tree(T, B, N)
    sampler = ScriptedSampler(tree, SCRIPTED_ENDS[:B])
    replay = UniformReplay(tree, 6, np.random.default_rng(seed), n_step=2)
    sampler.record_into(replay, batches)
    return tree, sampler, replay


def test_state_dict_round_trip_with_contents():
    tree, _, replay = _filled()
    state = replay.state_dict(include_contents=True)
    expected = [replay.sample() for _ in range(3)]

    fresh_tree = build_replay_tree(4, 2, 12)
    fresh = UniformReplay(fresh_tree, 6, np.random.default_rng(99), n_step=2)
    fresh.load_state_dict(state)
    assert len(fresh) == len(replay)
    for batch in expected:
        again = fresh.sample()
        for name in batch._fields:
            np.testing.assert_array_equal(getattr(again, name), getattr(batch, name))
    # the fresh tree's window is where the old one was: recording continues
    tree.rotate()
    fresh_tree.rotate()
    fresh.record_batch()
    replay.record_batch()
    assert fresh.storage.cursor == replay.storage.cursor


def test_state_dict_without_contents_restarts_empty():
    _, _, replay = _filled()
    state = replay.state_dict()
    assert "contents" not in state["storage"]
    fresh = UniformReplay(build_replay_tree(4, 2, 12), 6, np.random.default_rng(1))
    fresh.load_state_dict(state)
    assert len(fresh) == 0 and not fresh.ready
    assert fresh.storage.steps_recorded == replay.storage.steps_recorded
    assert fresh.rng.bit_generator.state == replay.rng.bit_generator.state
    with pytest.raises(ConfigError, match="does not fit"):
        UniformReplay(
            build_replay_tree(4, 2, 8), 6, np.random.default_rng(1)
        ).load_state_dict(state)


def test_replay_ratio_carries_fractions():
    ratio = ReplayRatio(0.25)
    assert [ratio.updates(6) for _ in range(4)] == [1, 2, 1, 2]
    state = ratio.state_dict()
    other = ReplayRatio(0.25)
    other.load_state_dict(state)
    assert other.updates(6) == ratio.updates(6)
    assert ReplayRatio(4).updates(3) == 12
    with pytest.raises(ConfigError):
        ReplayRatio(0)


def test_replays_import_without_torch():
    code = (
        "import sys, parllel.replays; "
        "assert 'torch' not in sys.modules, 'parllel.replays imported torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
