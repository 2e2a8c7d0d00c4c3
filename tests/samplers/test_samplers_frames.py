"""One stored frame per step in the on-policy sample tree (``frame_stack=k``).

Every test runs a sampler over ``FrameStackObservation`` envs twice, with a
tree of whole stacks and with ``frame_stack=k``, the same seeds and a
deterministic agent that reads whole stacks: the stacks the agent sees,
PPO's minibatch stacks, the stored frames, values (bootstrap, final),
advantages and returns must be equal bit for bit, at episode starts,
truncations and batch boundaries.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.agents import NumpyHandler
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.errors import ConfigError, EnvError, ShapeError
from parllel.frame_stacks.replay import build_frame_replay_tree
from parllel.replays import UniformReplay
from parllel.samplers import (
    FeedForwardSampler,
    RecurrentSampler,
    sample_tree_from_examples,
)
from parllel.samplers.tree_ring import allocate_like
from parllel.torch.algos import PPO
from parllel.torch.algos.batch import PolicyBatch
from parllel.torch.algos.frame_batch import FrameStacks
from parllel.torch.algos.vtrace_correction import VTraceCorrection
from parllel.torch.utils import numpy_to_torch_tree
from parllel.transforms import NormalizeObservations
from tests.helpers.frame_envs import episode_lengths, make_stacked, step_example
from tests.helpers.frame_sampling import (
    FlatEvaluator,
    StackAgent,
    build_pair,
    close_side,
    stacks_from_frames,
)

COMPARED = (
    fields.ACTION, fields.REWARD, fields.TERMINATED, fields.TRUNCATED, fields.DONE,
    fields.BOOTSTRAP_VALUE, fields.FINAL_VALUE, fields.ADVANTAGE, fields.RETURN,
)  # fmt: skip


def assert_same_batch(plain: tuple, frame: tuple, k: int, seed: int = 0) -> None:
    """The frame side's batch equals the plain side's, bit for bit."""
    _, whole, plain_agent, _ = plain
    _, tree, frame_agent, _ = frame
    assert len(plain_agent.seen) == len(frame_agent.seen)
    for ours, theirs in zip(frame_agent.seen, plain_agent.seen):
        np.testing.assert_array_equal(ours, theirs)
    T = whole[fields.REWARD].shape[0]
    observation = whole[fields.OBSERVATION].padded[0 : T + 1]  # [T + 1, B, k, ...]
    frames = tree[fields.FRAMES].to_ndarray()
    np.testing.assert_array_equal(frames[k - 1 :], observation[:, :, -1])
    depth = tree[fields.FRAME_DEPTH].to_ndarray()
    np.testing.assert_array_equal(stacks_from_frames(frames, depth, k), observation[:T])
    for name in COMPARED:
        np.testing.assert_array_equal(
            tree[name].to_ndarray(), whole[name].to_ndarray(), err_msg=name
        )
    for path, leaf in whole[fields.AGENT_INFO].items_flat():
        np.testing.assert_array_equal(
            tree[fields.AGENT_INFO][path].to_ndarray(), leaf.to_ndarray()
        )
    # PPO's minibatches: stacks gathered for the samples taken
    ours = PolicyBatch.from_sample_tree(numpy_to_torch_tree(tree), False)
    theirs = PolicyBatch.from_sample_tree(numpy_to_torch_tree(whole), False)
    ours, theirs = ours.flatten_samples(), theirs.flatten_samples()
    assert isinstance(ours.observation, FrameStacks)
    assert ours.observation.frames.shape[0] == k + T  # one frame per step
    index = torch.randperm(
        len(theirs.action), generator=torch.Generator().manual_seed(seed)
    )
    for chunk in index.chunk(2):
        assert torch.equal(
            ours.select(chunk).observation, theirs.select(chunk).observation
        )
    assert torch.equal(ours.observation.all(), theirs.observation)


def run_pair(plain: tuple, frame: tuple, k: int, batches: int) -> tuple[int, int]:
    """Collect and compare ``batches`` batches; return the number of
    terminated and truncated steps seen."""
    ends = np.zeros(2, int)
    for i in range(batches):
        plain[0].collect_batch()
        frame[0].collect_batch()
        assert_same_batch(plain, frame, k, seed=i)
        tree = plain[1]
        ends += [
            tree[name].to_ndarray().sum()
            for name in (fields.TERMINATED, fields.TRUNCATED)
        ]
    return int(ends[0]), int(ends[1])


lengths_strategy = episode_lengths(longest=6)


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(1, 4),
    T=st.integers(1, 5),
    B=st.integers(1, 3),
    lengths=lengths_strategy,
    batches=st.integers(1, 4),
    decorrelation=st.integers(0, 3),
)
def test_frame_tree_equals_whole_stacks(k, T, B, lengths, batches, decorrelation):
    factory = partial(make_stacked, k, lengths)
    plain, frame = build_pair(factory, B, T, k, decorrelation_steps=decorrelation)
    try:
        run_pair(plain, frame, k, batches)
    finally:
        close_side(plain)
        close_side(frame)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "sampler,process",
    [("feedforward", True), ("alternating", False), ("alternating", True)],
)
def test_cages_and_samplers(sampler, process):
    """Process cages (workers write the staging slots in shared memory) and
    the alternating sampler (its halves act and step in turn)."""
    factory = partial(make_stacked, 4, (3, -2, 5, -7))
    plain, frame = build_pair(
        factory, 4, 3, 4, sampler=sampler, process=process, decorrelation_steps=2
    )
    try:
        run_pair(plain, frame, 4, 6)
    finally:
        close_side(plain)
        close_side(frame)


def test_use_tree_carries_the_staged_observation():
    """A background sampler's trees take turns: the next tree starts from
    the staged observation of the last."""
    factory = partial(make_stacked, 3, (4, -3))
    plain, frame = build_pair(factory, 2, 3, 3)
    other = allocate_like(frame[1])
    try:
        sampler, first = frame[0], frame[1]
        for i in range(6):
            tree = (first, other)[i % 2]
            sampler.use_tree(tree)
            plain[0].collect_batch()
            sampler.collect_batch()
            assert_same_batch(plain, (sampler, tree, frame[2], []), 3, seed=i)
    finally:
        close_side(plain)
        close_side(frame)
        other.close()


@pytest.mark.parametrize("minibatches", [1, 2, 4])
def test_ppo_updates_equal_whole_stacks(minibatches):
    """PPO on the frame tree takes exactly the steps it takes on whole stacks."""
    k = 3
    factory = partial(make_stacked, k, (2, -3))
    plain, frame = build_pair(factory, 2, 4, k)
    try:
        plain[0].collect_batch()
        frame[0].collect_batch()
        results = []
        for side in (plain, frame):
            torch.manual_seed(0)
            evaluator = FlatEvaluator(k * 2 * 3)
            optimizer = torch.optim.Adam(evaluator.parameters(), lr=1e-2)
            ppo = PPO(evaluator, optimizer, epochs=2, minibatches=minibatches)
            torch.manual_seed(1)
            metrics = ppo.optimize(side[1])
            results.append(
                (metrics, [p.detach().clone() for p in evaluator.parameters()])
            )
        (plain_metrics, plain_params), (metrics, params) = results
        np.testing.assert_equal(metrics, plain_metrics)
        for ours, theirs in zip(params, plain_params):
            assert torch.equal(ours, theirs)
        with pytest.raises(ConfigError, match="VTraceCorrection"):
            PPO(
                evaluator,
                optimizer,
                correction=VTraceCorrection(gamma=0.9, trace_lambda=0.8),
            ).optimize(frame[1])
    finally:
        close_side(plain)
        close_side(frame)


def test_sample_tree_bytes_per_step():
    """(4, 84, 84) uint8 stacks, [128, 8]: at most 7.8 kB of observation per step."""
    observation = np.zeros((4, 84, 84), np.uint8)
    env_example = step_example(observation)
    agent = StackAgent()
    example = NumpyHandler(agent, 1).example_outputs(observation)
    tree = sample_tree_from_examples(
        env_example, example, 128, 8, "local", frame_stack=4
    )
    names = (
        fields.OBSERVATION, fields.FINAL_OBSERVATION, fields.FRAMES, fields.FRAME_DEPTH,
    )  # fmt: skip
    held = sum(tree[name].nbytes for name in names)
    assert held / (128 * 8) <= 7_800
    assert tree[fields.FINAL_VALUE].shape == (128, 8)


def test_stacks_that_do_not_roll_are_refused():
    """Zero padding (not the reset frame repeated): an error at the first reset."""
    factory = partial(make_stacked, 3, (2,), padding_type="zero")
    plain, frame = build_pair(factory, 1, 4, 3)
    try:
        with pytest.raises(EnvError, match="reset frame repeated"):
            for _ in range(3):
                frame[0].collect_batch()
        with pytest.raises(ConfigError, match="frame_stack"):
            replay_of(plain[1]).record_batch(frame[1])
    finally:
        close_side(plain)
        close_side(frame)


def replay_of(sample_tree):
    """A small frame replay for ``sample_tree`` (whole stacks)."""
    tree = build_frame_replay_tree(sample_tree, 16, frame_stack=3)
    return UniformReplay(tree, 2, np.random.default_rng(0), frame_stack=3)


def test_misuse_is_refused():
    factory = partial(make_stacked, 3, (4,))
    cage = SerialCage(factory, 2, options=CageOptions(seed=0))
    handler = NumpyHandler(StackAgent(), 2)
    try:
        with pytest.raises(ConfigError, match=r"shape \(k, \.\.\.\) = \(4, \.\.\.\)"):
            build_sample_tree(cage, handler, 4, frame_stack=4)
        with pytest.raises(ConfigError, match="frame_stack must be"):
            build_sample_tree(cage, handler, 4, frame_stack=0)
        with pytest.raises(ConfigError, match="recurrent=True or full_size"):
            build_sample_tree(cage, handler, 4, frame_stack=3, full_size=8)
        tree = build_sample_tree(cage, handler, 4, frame_stack=3)
        with pytest.raises(ConfigError, match="RecurrentSampler"):
            RecurrentSampler(cage, handler, tree)
        normalizer = NormalizeObservations(
            {fields.OBSERVATION: np.zeros((4, 2, 3, 2, 3), np.float32)}
        )
        with pytest.raises(ConfigError, match="normalizer"):
            FeedForwardSampler(cage, handler, tree, observation_normalizer=normalizer)
        batch = numpy_to_torch_tree(tree)
        with pytest.raises(ConfigError, match="recurrent PPO"):
            PolicyBatch.from_sample_tree(
                {**batch, fields.ADVANTAGE: batch[fields.FRAME_DEPTH].float(),
                 fields.RETURN: batch[fields.FRAME_DEPTH].float()},
                recurrent=True,
            )  # fmt: skip
        with pytest.raises(ShapeError, match="frame_depth"):
            FrameStacks.from_batch({fields.FRAMES: batch[fields.FRAMES]}, (4, 2))
        tree.close()
    finally:
        cage.close()


def test_dict_observations_are_refused():
    env_example = {
        fields.OBSERVATION: {"image": np.zeros((4, 2, 3), np.uint8)},
        fields.ACTION: np.int64(0),
        fields.REWARD: np.float32(0),
    }
    example = NumpyHandler(StackAgent(), 1).example_outputs(
        np.zeros((4, 2, 3), np.uint8)
    )
    with pytest.raises(ConfigError, match="dict and tuple observations"):
        sample_tree_from_examples(env_example, example, 4, 2, "local", frame_stack=4)


@pytest.mark.parametrize(
    ("observation", "match"),
    [
        (
            np.zeros(4, np.float32),
            r"one vector, not a stack: .*FrameStackObservation\(4\)",
        ),
        (np.zeros((3, 2, 3), np.uint8), r"frame_stack=3 if it stacks 3 frames"),
    ],
)
def test_observations_that_are_not_k_stacks_are_refused(observation, match):
    env_example = {
        fields.OBSERVATION: observation,
        fields.ACTION: np.int64(0),
        fields.REWARD: np.float32(0),
    }
    example = NumpyHandler(StackAgent(), 1).example_outputs(observation)
    with pytest.raises(ConfigError, match=match):
        sample_tree_from_examples(env_example, example, 4, 2, "local", frame_stack=4)
