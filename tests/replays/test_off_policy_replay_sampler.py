"""A real FeedForwardSampler + SerialCage feeding a replay through several wrap-arounds.

``CountingEnv`` observations are ``[tag, episode, t, last_action]`` and its
reward is ``action + 0.01 * t``, so every stored transition can be checked on
its own (the next observation is the same episode, one step later, and
carries the action) and against the env's true history, recorded step by
step from the sampler's batches.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.errors import ConfigError
from parllel.replays import PrioritizedReplay, UniformReplay
from parllel.replays.transitions import gather_transitions
from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
from tests.helpers.envs import CountingEnv

pytestmark = pytest.mark.timeout(60)

T, B = 3, 2


def _setup(
    full_size,
    terminal=True,
    replay_type=UniformReplay,
    storage="local",
    zero_copy=False,
    process=False,
):
    factory = partial(CountingEnv, min_length=2, max_length=6, terminal=terminal)
    if process:
        cage = ProcessCage(
            factory,
            B,
            options=CageOptions(seed=3),
            layout=ProcessLayout(envs_per_worker=1),
            start_method="fork",
        )
        storage = "shared"
    else:
        cage = SerialCage(factory, B, options=CageOptions(seed=3))
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=1), B)
    example = handler.example_outputs(cage.example[fields.OBSERVATION])
    sample_tree = sample_tree_from_examples(
        cage.example, example, T, B, storage, final_observation=True
    )
    replay_tree = sample_tree_from_examples(
        cage.example, example, T, B, storage, final_observation=True,
        full_size=full_size, env_info=False,
    )  # fmt: skip
    replay = replay_type(replay_tree, 4, np.random.default_rng(0))
    if zero_copy:  # the sampler writes straight into the sliding replay window
        sample_tree.close()
        sample_tree = replay_tree
    sampler = FeedForwardSampler(cage, handler, sample_tree)
    return cage, sampler, sample_tree, replay


def _truth(sample_tree):
    """Per env, the batch's transitions (obs, action, reward, next obs, term, trunc)."""
    observation = sample_tree[fields.OBSERVATION]
    steps = []
    for t in range(T):
        for b in range(B):
            done = (
                sample_tree[fields.TERMINATED][t, b]
                or sample_tree[fields.TRUNCATED][t, b]
            )
            following = (
                sample_tree[fields.FINAL_OBSERVATION][t, b]
                if done
                else observation[t + 1, b]
            )
            steps.append(
                (
                    b,
                    tuple(observation[t, b]),
                    int(sample_tree[fields.ACTION][t, b]),
                    float(sample_tree[fields.REWARD][t, b]),
                    tuple(following),
                    bool(sample_tree[fields.TERMINATED][t, b]),
                    bool(sample_tree[fields.TRUNCATED][t, b]),
                )
            )
    return steps


def _stored(replay):
    storage = replay.storage
    positions = storage.positions_from_age(np.arange(storage.num_transitions))
    batch = gather_transitions(storage, positions, 1, 0.99)
    return [
        (
            int(positions[k] % B),
            tuple(batch.observation[k]),
            int(batch.action[k]),
            float(batch.reward[k]),
            tuple(batch.next_observation[k]),
            bool(batch.terminated[k]),
            bool(batch.truncated[k]),
        )
        for k in range(len(positions))
    ]


def _check_consistent(transition):
    _, obs, action, reward, following, terminated, truncated = transition
    assert following[1] == obs[1], "paired with another episode's observation"
    assert following[2] == obs[2] + 1
    assert following[3] == action
    assert reward == pytest.approx(action + 0.01 * following[2], abs=1e-5)


@pytest.mark.parametrize(
    "mode", ["copy", "zero_copy", "zero_copy_process"]
)  # fmt: skip
@pytest.mark.parametrize("terminal", [True, False])
@pytest.mark.parametrize("full_size", [6, 9])
def test_replay_holds_the_newest_steps_through_wraparounds(full_size, terminal, mode):
    cage, sampler, sample_tree, replay = _setup(
        full_size, terminal, zero_copy=mode != "copy", process=mode.endswith("process")
    )
    history = {b: [] for b in range(B)}
    try:
        for _ in range(5 * full_size // T):  # five laps of the replay
            batch, _ = sampler.collect_batch()
            for step in _truth(batch):
                history[step[0]].append(step)
            replay.record_batch(batch)
            stored = _stored(replay)
            capacity = min(len(history[0]), full_size - 1)
            assert len(replay) == capacity * B
            for b in range(B):
                mine = [s for s in stored if s[0] == b]
                assert mine == history[b][-capacity:]
                for transition in mine:
                    _check_consistent(transition)
            sample = replay.sample()
            for k in range(len(sample.action)):
                assert sample.next_observation[k][1] == sample.observation[k][1]
        ended = [s for b in range(B) for s in history[b] if s[5] or s[6]]
        assert ended and all(s[5] == terminal for s in ended)
    finally:
        cage.close()
        sample_tree.close()
        replay.storage.tree.close()


def test_prioritized_replay_from_the_sampler():
    cage, sampler, _, replay = _setup(9, replay_type=PrioritizedReplay)
    try:
        for _ in range(7):
            batch, _ = sampler.collect_batch()
            replay.record_batch(batch)
            sample = replay.sample()
            assert (sample.next_observation[:, 2] == sample.observation[:, 2] + 1).all()
            replay.update_priorities(sample.indices, np.ones(len(sample.indices)))
    finally:
        cage.close()


def test_zero_copy_recording_aligns_with_a_sampler_that_rotates_first():
    """A sampler that rotates at the start of each batch, writing into the replay tree."""
    cage, _, _, replay = _setup(6)
    try:
        tree = replay.storage.tree
        tree.rotate()  # like start_batch(): the first window is not row 0
        assert replay.storage.window_start() == T
        replay.record_batch()
        assert replay.storage.cursor == (2 * T) % 6 and len(replay) == T * B
        tree.rotate()
        replay.record_batch()
        assert len(replay) == 5 * B  # capacity N - 1
    finally:
        cage.close()


@pytest.mark.parametrize("zero_copy", [True, False], ids=["zero_copy", "copy"])
def test_who_rotates_which_tree(zero_copy):
    """docs/replays.md, "The loop": zero copy, the sampler rotates the replay
    tree and ``record_batch(batch)`` (batch is that tree) rotates nothing;
    copy-in, ``record_batch(sample_tree)`` rotates the replay tree."""
    cage, sampler, sample_tree, replay = _setup(9, zero_copy=zero_copy)
    storage = replay.storage
    try:
        for _ in range(4):
            before = storage.window_start()
            batch, _ = sampler.collect_batch()
            assert (batch is storage.tree) == zero_copy
            collected = storage.window_start()  # the sampler moved it, or not
            assert collected == ((before + T) % 9 if zero_copy else before)
            replay.record_batch(batch)
            recorded = storage.window_start()
            assert recorded == (collected if zero_copy else (collected + T) % 9)
    finally:
        cage.close()
        sample_tree.close()
        storage.tree.close()


def test_copy_errors_name_the_leaf():
    cage, _, sample_tree, replay = _setup(6)
    try:
        other = sample_tree_from_examples(
            cage.example,
            NumpyHandler(RandomAgent(cage.spaces.action), B).example_outputs(
                cage.example[fields.OBSERVATION]
            ),
            T + 1,
            B,
            "local",
            final_observation=True,
        )
        with pytest.raises(ConfigError, match="observation"):
            replay.record_batch(other)
        missing = sample_tree_from_examples(
            cage.example,
            NumpyHandler(RandomAgent(cage.spaces.action), B).example_outputs(
                cage.example[fields.OBSERVATION]
            ),
            T,
            B,
            "local",
        )
        with pytest.raises(ConfigError, match="final_observation"):
            replay.record_batch(missing)
    finally:
        cage.close()


def test_sample_tree_from_examples_full_size_option():
    cage, _, _, replay = _setup(12)
    try:
        tree = replay.storage.tree
        for path, leaf in tree.items_flat():
            # final observations are kept sparsely: a [T, B] slot, not N rows
            rows = T if path.startswith(fields.FINAL_OBSERVATION) else 12
            assert leaf.full_size == rows and leaf.batch_shape == (T, B)
        assert tree[fields.OBSERVATION].padding == 1
        with pytest.raises(ConfigError, match="multiple"):
            _setup(7)
    finally:
        cage.close()
