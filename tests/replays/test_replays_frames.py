"""One stored frame per step: rebuilt stacks against a replay of whole stacks.

Envs are ``FrameStackObservation(k)`` over random frames (padding with the
reset frame). Every batch is recorded both into a ``frame_stack=k`` replay
and into a plain replay of whole stacks; every transition the frame replay
offers must equal the plain replay's, bit for bit (observation, next
observation across episode ends, batch boundaries and wrap-around, n-step
returns), and it must offer every step whose history is still stored.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.checkpoints.compatibility import check_object
from parllel.errors import ConfigError, ReplayError
from parllel.frame_stacks.replay import build_frame_replay_tree
from parllel.replays import PrioritizedReplay, UniformReplay
from parllel.replays.transitions import gather_transitions
from parllel.runners.off_policy import ReplayCheckpoint
from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
from parllel.tree import ArrayDict, buffer_from_example
from tests.helpers.frame_envs import episode_lengths, make_stacked


def sample_tree(T: int, B: int, example: np.ndarray) -> ArrayDict:
    """A ``[T, B]`` sample tree with the fields a replay copies."""
    return ArrayDict(
        {
            fields.OBSERVATION: buffer_from_example(example, (T, B), padding=1),
            fields.ACTION: buffer_from_example(np.int64(0), (T, B), padding=1),
            fields.REWARD: buffer_from_example(np.float32(0), (T, B), padding=1),
            fields.TERMINATED: buffer_from_example(np.bool_(False), (T, B)),
            fields.TRUNCATED: buffer_from_example(np.bool_(False), (T, B)),
            fields.FINAL_OBSERVATION: buffer_from_example(example, (T, B)),
        }
    )


def plain_replay_tree(T: int, B: int, N: int, example: np.ndarray) -> ArrayDict:
    """The reference: a replay tree that stores whole stacks."""

    def alloc(value, padding=0):
        return buffer_from_example(value, (T, B), padding=padding, full_size=N)

    return ArrayDict(
        {
            fields.OBSERVATION: alloc(example, padding=1),
            fields.ACTION: alloc(np.int64(0)),
            fields.REWARD: alloc(np.float32(0)),
            fields.TERMINATED: alloc(np.bool_(False)),
            fields.TRUNCATED: alloc(np.bool_(False)),
            fields.FINAL_OBSERVATION: buffer_from_example(example, (T, B)),
        }
    )


class StackSampler:
    """Steps ``FrameStackObservation`` envs into a ``[T, B]`` sample tree."""

    def __init__(self, envs: list, T: int, seed: int = 0) -> None:
        self.envs, self.T = envs, T
        example = envs[0].observation_space.sample()
        self.tree = sample_tree(T, len(envs), example)
        self.rng = np.random.default_rng(seed)
        self.started = False
        self.step = 0

    def reset(self) -> None:
        for b, env in enumerate(self.envs):
            self.tree[fields.OBSERVATION][0, b] = env.reset(seed=self.step + b)[0]

    def collect(self) -> ArrayDict:
        tree = self.tree
        if self.started:
            tree.rotate()  # row 0 <- the bootstrap row T
        else:
            self.reset()
            self.started = True
        for t in range(self.T):
            for b, env in enumerate(self.envs):
                action = int(self.rng.integers(3))
                obs, reward, terminated, truncated, _ = env.step(action)
                tree[fields.ACTION][t, b] = self.step
                tree[fields.REWARD][t, b] = reward + 0.5 * b
                tree[fields.TERMINATED][t, b] = terminated
                tree[fields.TRUNCATED][t, b] = truncated
                tree[fields.FINAL_OBSERVATION][t, b] = obs * 0 + 7  # garbage
                if terminated or truncated:
                    tree[fields.FINAL_OBSERVATION][t, b] = obs
                    obs = env.reset()[0]
                tree[fields.OBSERVATION][t + 1, b] = obs
            self.step += 1
        return tree


def assert_same(frame_replay, plain_replay, n_step: int) -> None:
    """Every offered transition equals the plain replay's, bit for bit."""
    frames, plain = frame_replay.storage, plain_replay.storage
    B = frames.num_envs
    assert frames.num_transitions == max(plain.size - frames.history, 0) * B
    if not frames.num_transitions:
        return
    positions = frames.positions_from_age(np.arange(frames.num_transitions))
    assert frames.is_stored(positions).all() and plain.is_stored(positions).all()
    ours = gather_transitions(frames, positions, n_step, 0.9)
    theirs = gather_transitions(plain, positions, n_step, 0.9)
    for name, value in ours._asdict().items():
        expected = getattr(theirs, name)
        assert value.dtype == expected.dtype, name
        np.testing.assert_array_equal(value, expected, err_msg=name)


def pair(T, B, N, k, lengths, n_step=1, cls=UniformReplay, seed=0):
    envs = [make_stacked(k, lengths[b % len(lengths)]) for b in range(B)]
    sampler = StackSampler(envs, T, seed)
    example = envs[0].observation_space.sample()
    rng = np.random.default_rng
    frame_tree = build_frame_replay_tree(sampler.tree, N, frame_stack=k)
    frame = cls(frame_tree, 1, rng(0), n_step=n_step, discount=0.9, frame_stack=k)
    plain_tree = plain_replay_tree(T, B, frame_tree[fields.ACTION].full_size, example)
    plain = cls(plain_tree, 1, rng(0), n_step=n_step, discount=0.9)
    return sampler, frame, plain


lengths_strategy = episode_lengths(longest=7)


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 5),
    B=st.integers(1, 3),
    laps=st.integers(1, 4),
    k=st.integers(1, 5),
    n_step=st.integers(1, 3),
    lengths=st.lists(lengths_strategy, min_size=1, max_size=3),
    batches=st.integers(1, 12),
)
def test_rebuilt_stacks_equal_whole_stacks(T, B, laps, k, n_step, lengths, batches):
    N = max(T * laps, k + 1 + n_step)
    sampler, frame, plain = pair(T, B, N, k, lengths, n_step)
    for _ in range(batches):
        tree = sampler.collect()
        frame.record_batch(tree)
        plain.record_batch(tree)
        assert_same(frame, plain, n_step)


def test_wrap_around_never_offers_overwritten_history():
    """With N = 8 and k = 4, the 7 intact steps offer 4: the 3 oldest only
    serve as history (their own history is overwritten)."""
    sampler, frame, plain = pair(T=2, B=2, N=8, k=4, lengths=[(50,)])
    for _ in range(9):
        tree = sampler.collect()
        frame.record_batch(tree)
        plain.record_batch(tree)
        assert_same(frame, plain, 1)
    assert plain.storage.size == 7 and frame.storage.num_transitions == 4 * 2


def test_prioritized_offers_only_steps_with_history():
    sampler, frame, plain = pair(
        T=3, B=2, N=9, k=3, lengths=[(4, -2)], cls=PrioritizedReplay
    )
    for _ in range(7):
        tree = sampler.collect()
        frame.record_batch(tree)
        plain.record_batch(tree)
        assert_same(frame, plain, 1)
        storage = frame.storage
        everything = np.arange(frame.priorities.size)
        offered = storage.is_stored(everything)
        assert (frame.priorities.priorities[~offered] == 0).all()
        assert (frame.priorities.priorities[offered] > 0).all()
        if len(frame):
            batch = frame.sample(len(frame))
            assert storage.is_stored(batch.indices).all()


def test_checkpoint_resume_with_episode_break():
    """Contents saved and loaded; the resumed sampler resets its envs."""
    sampler, frame, plain = pair(T=3, B=2, N=12, k=4, lengths=[(5, -4), (9,)])
    for _ in range(3):
        tree = sampler.collect()
        frame.record_batch(tree)
        plain.record_batch(tree)
    state = frame.state_dict(include_contents=True)
    plain_state = plain.state_dict(include_contents=True)
    assert len(state["storage"]["contents"]["final_observations"]["rows"]) > 0
    _, frame2, plain2 = pair(T=3, B=2, N=12, k=4, lengths=[(5, -4), (9,)])
    # what a runner checks before loading (issue #29: the saved episode ends
    # are more final-observation rows than a fresh replay's none)
    check_object("replay", ReplayCheckpoint(frame2, include_contents=True), state)
    frame2.load_state_dict(state)
    plain2.load_state_dict(plain_state)
    assert_same(frame2, plain2, 2)
    sampler.started = False  # the resumed run resets its envs
    for _ in range(5):
        tree = sampler.collect()
        frame2.record_batch(tree)
        plain2.record_batch(tree)
        assert_same(frame2, plain2, 2)


def test_not_a_stack_is_refused():
    sampler, frame, _ = pair(T=2, B=1, N=6, k=3, lengths=[(5,)])
    with pytest.raises(ReplayError, match="record_batch\\(sample_tree\\)"):
        frame.record_batch()
    channel_last = sample_tree(2, 1, np.zeros((2, 3, 3), np.uint8))
    with pytest.raises(ConfigError, match="first axis"):
        build_frame_replay_tree(channel_last, 6, frame_stack=3)
    with pytest.raises(ConfigError, match="frame_stack must be"):
        build_frame_replay_tree(sampler.tree, 6, frame_stack=0)
    whole = plain_replay_tree(2, 1, 6, np.zeros((3, 2, 3), np.uint8))
    replay = UniformReplay(whole, 1, np.random.default_rng(0), frame_stack=3)
    with pytest.raises(ConfigError, match="build_frame_replay_tree"):
        replay.record_batch(sampler.collect())
    with pytest.raises(ConfigError, match="must exceed frame_stack"):
        UniformReplay(
            build_frame_replay_tree(sampler.tree, 2, frame_stack=3),
            1,
            np.random.default_rng(0),
            frame_stack=3,
        )


def test_zero_padding_is_refused():
    """padding_type='zero' stacks cannot be rebuilt from one frame: an error."""
    envs = [make_stacked(3, (4,), padding_type="zero")]
    sampler = StackSampler(envs, 2)
    tree = build_frame_replay_tree(sampler.tree, 8, frame_stack=3)
    replay = UniformReplay(tree, 1, np.random.default_rng(0), frame_stack=3)
    replay.record_batch(sampler.collect())  # the replay's first row: not checked
    with pytest.raises(ReplayError, match="padding_type='reset'"):
        for _ in range(3):
            replay.record_batch(sampler.collect())


def test_atari_replay_bytes_per_step():
    """(4, 84, 84) stacks, 200k steps: at most 7.8 kB per step, table included
    (allocated lazily: nothing is written)."""
    tree = sample_tree(32, 8, np.zeros((4, 84, 84), np.uint8))
    frame_tree = build_frame_replay_tree(tree, 25_000, frame_stack=4)
    replay = UniformReplay(frame_tree, 32, np.random.default_rng(0), frame_stack=4)
    held = sum(leaf.nbytes for _, leaf in frame_tree.items_flat())
    held += replay.storage.final_observations.nbytes
    assert held / (replay.storage.capacity * 8) <= 7_800


def test_memory_is_one_frame_per_step():
    sampler, frame, plain = pair(T=4, B=2, N=400, k=4, lengths=[(5,)])
    frame_obs = frame.storage.tree[fields.OBSERVATION].nbytes
    plain_obs = plain.storage.tree[fields.OBSERVATION].nbytes
    assert frame_obs * 4 == plain_obs
    assert frame.storage.final_observations.observations.shape[1:] == (2, 3)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("process", [False, True])
def test_cages_and_sampler(process):
    """A FeedForwardSampler over serial and process cages of real
    FrameStackObservation envs: the frame replay equals the plain one."""
    k, T, B, N = 4, 5, 3, 25
    factory = partial(make_stacked, k, (6, -4, 9))
    if process:
        cage = ProcessCage(
            factory,
            B,
            options=CageOptions(seed=3),
            layout=ProcessLayout(envs_per_worker=1),
            start_method="fork",
        )
    else:
        cage = SerialCage(factory, B, options=CageOptions(seed=3))
    storage = "shared" if process else "local"
    try:
        handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=1), B)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        tree = sample_tree_from_examples(
            cage.example, example, T, B, storage, final_observation=True
        )
        frame_tree = build_frame_replay_tree(tree, N, frame_stack=k)
        rng = np.random.default_rng
        frame = UniformReplay(frame_tree, 4, rng(0), n_step=3, frame_stack=k)
        plain_tree = plain_replay_tree(T, B, N, cage.example[fields.OBSERVATION])
        plain = UniformReplay(plain_tree, 4, rng(0), n_step=3)
        sampler = FeedForwardSampler(cage, handler, tree)
        for _ in range(12):
            batch, _ = sampler.collect_batch()
            frame.record_batch(batch)
            plain.record_batch(batch)
            assert_same(frame, plain, 3)
        assert frame.storage.steps_recorded == 12 * T
    finally:
        cage.close()
        tree.close()


@pytest.mark.parametrize("corrupt", ["middle", "final", "reset"])
def test_stacks_that_do_not_roll_are_refused(corrupt):
    """A stack that is not the previous one shifted (or a final observation
    that is not, or a reset stack that is not its frame repeated): an error,
    and the replay is left as it was."""
    lengths = [(50,)] if corrupt == "middle" else [(3,)]
    sampler, frame, _ = pair(T=4, B=2, N=12, k=3, lengths=lengths)
    frame.record_batch(sampler.collect())
    tree = sampler.collect()
    before = frame.storage.size
    observation = tree[fields.OBSERVATION]
    if corrupt == "middle":  # step 2 of env 1 continues the episode of step 1
        observation[2, 1] = observation[2, 1] ^ np.uint8(1)
        match = "row 2, env 1 is not the one before it shifted"
    elif corrupt == "final":
        t, b = np.argwhere(tree[fields.TERMINATED].to_ndarray())[0]
        final = tree[fields.FINAL_OBSERVATION]
        final[t, b] = final[t, b] ^ np.uint8(1)
        match = f"final observation at row {t}, env {b}"
    else:
        t, b = np.argwhere(tree[fields.TERMINATED].to_ndarray())[0]
        observation[t + 1, b, 0] = observation[t + 1, b, 0] ^ np.uint8(1)
        match = "reset frame repeated"
    with pytest.raises(ReplayError, match=match):
        frame.record_batch(tree)
    assert frame.storage.size == before
