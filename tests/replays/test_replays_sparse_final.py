"""Sparse final observations: sampled transitions against a dense reference.

The replay keeps final observations in a fixed-capacity table instead of a
full-size copy of the observation. These tests record scripted episodes
(``tests.replay_helpers.ScriptedSampler``) while a plain reference keeps every
step with a dense final observation, and compare every stored transition
(n-step returns, bootstrapping of truncated episodes), which steps are
stored (including the documented drop of the oldest steps when the table is
full), prioritized sampling and checkpoints.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.arrays import Array
from parllel.errors import ConfigError, ParllelWarning
from parllel.replays import PrioritizedReplay, UniformReplay
from parllel.replays.final_observations import final_capacity
from parllel.replays.transitions import gather_transitions
from parllel.samplers import sample_tree_from_examples
from parllel.tree import ArrayDict, tree_items
from tests.helpers.frame_envs import step_example
from tests.helpers.replay_helpers import (
    SCRIPTED_ENDS,
    ScriptedSampler,
    build_replay_tree,
    scripted_ends,
)


@dataclass
class DenseReference:
    """Every recorded step, keyed by global step, with a dense final observation."""

    T: int
    B: int
    N: int
    capacity: int  # entries of the replay's final-observation table
    observation: dict = field(default_factory=dict)  # g -> {path: [B, ...]}
    following: dict = field(default_factory=dict)  # g -> observation row g + 1
    final: dict = field(default_factory=dict)  # g -> {path: [B, ...]} (dense)
    reward: dict = field(default_factory=dict)
    terminated: dict = field(default_factory=dict)
    truncated: dict = field(default_factory=dict)
    size: int = 0  # stored steps per env, by the documented policy
    dropped: int = 0  # steps per env dropped early for a full table
    newest: int = -1

    def record(self, tree, first_step: int) -> None:
        """Copy the window the scripted sampler just wrote; update what is stored."""
        observation = list(tree_items(tree[fields.OBSERVATION]))
        final = list(tree_items(tree[fields.FINAL_OBSERVATION]))
        for t in range(self.T):
            g = first_step + t
            self.observation[g] = {p: np.array(leaf[t]) for p, leaf in observation}
            self.following[g] = {p: np.array(leaf[t + 1]) for p, leaf in observation}
            self.final[g] = {p: np.array(leaf[t]) for p, leaf in final}
            self.reward[g] = np.array(tree[fields.REWARD][t])
            self.terminated[g] = np.array(tree[fields.TERMINATED][t])
            self.truncated[g] = np.array(tree[fields.TRUNCATED][t])
        self.newest = first_step + self.T - 1
        self.size = min(self.size + self.T, self.N - 1)
        kept = self.size
        while kept and self.ends(kept) > self.capacity:
            kept -= 1
        self.dropped += self.size - kept
        self.size = kept

    def ends(self, steps: int) -> int:
        """Episode ends in the newest ``steps`` steps of every env."""
        return sum(
            int((self.terminated[g] | self.truncated[g]).sum())
            for g in range(self.newest - steps + 1, self.newest + 1)
        )

    def stored(self) -> set:
        return {
            (g, b)
            for g in range(self.newest - self.size + 1, self.newest + 1)
            for b in range(self.B)
        }

    def transition(self, g: int, b: int, n_step: int, discount: float) -> dict:
        """The n-step transition from step ``g`` of env ``b``, from dense arrays."""
        total, k = 0.0, 0
        while True:
            step = g + k
            total += discount**k * float(self.reward[step][b])
            k += 1
            ended = bool(self.terminated[step][b] or self.truncated[step][b])
            if ended or k == n_step or step + 1 > self.newest:
                break
        last = g + k - 1
        source = self.final[last] if ended else self.following[last]
        return {
            "observation": {p: v[b] for p, v in self.observation[g].items()},
            "next_observation": {p: v[b] for p, v in source.items()},
            "reward": total,
            "n_steps": k,
            "terminated": bool(self.terminated[last][b]),
            "truncated": bool(self.truncated[last][b]),
        }


def _check_batch(batch, reference, n_step, discount, B):
    stored = reference.stored()
    for k, position in enumerate(batch.indices):
        g, b = int(batch.action[k]), int(position) % B
        assert (g, b) in stored
        truth = reference.transition(g, b, n_step, discount)
        for name in ("observation", "next_observation"):
            for path, leaf in tree_items(getattr(batch, name)):
                np.testing.assert_array_equal(leaf[k], truth[name][path], err_msg=name)
        assert batch.n_steps[k] == truth["n_steps"]
        np.testing.assert_allclose(
            batch.reward[k], truth["reward"], rtol=1e-5, atol=1e-5
        )
        assert bool(batch.terminated[k]) == truth["terminated"]
        assert bool(batch.truncated[k]) == truth["truncated"]


def _every_stored(replay):
    storage = replay.storage
    positions = storage.positions_from_age(np.arange(storage.num_transitions))
    return gather_transitions(storage, positions, replay.n_step, replay.discount)


class Run:
    """A replay fed by a scripted sampler, zero-copy or copied in, and its reference."""

    def __init__(
        self, T, B, N, ends, *, capacity=None, copy=False, dict_obs=False,
        final_slot=True, prioritized=False, n_step=1, discount=0.9, seed=0,
    ):  # fmt: skip
        self.T, self.B = T, B
        self.tree = build_replay_tree(T, B, N, dict_obs, final_slot=final_slot)
        self.sample_tree = build_replay_tree(T, B, T, dict_obs) if copy else self.tree
        self.copy = copy
        rewards = np.random.default_rng(seed).normal(size=(T * 64, B))
        self.sampler = ScriptedSampler(
            self.sample_tree,
            ends,
            dict_obs=dict_obs,
            rewards=rewards.astype(np.float32).astype(np.float64),
        )
        kind = PrioritizedReplay if prioritized else UniformReplay
        self.replay = kind(
            self.tree,
            1,
            np.random.default_rng(seed),
            n_step=n_step,
            discount=discount,
            final_observation_capacity=capacity,
        )
        table = self.replay.storage.final_observations
        self.reference = DenseReference(T, B, N, table.capacity)
        self.batches = 0

    def step(self):
        if self.batches:
            self.sample_tree.rotate()  # the sampler's start of a batch
        first = self.sampler.global_step
        self.sampler.collect()
        self.reference.record(self.sample_tree, first)
        self.replay.record_batch(self.sample_tree if self.copy else None)
        self.batches += 1

    def check(self):
        replay, reference = self.replay, self.reference
        assert replay.storage.size == reference.size
        assert replay.storage.steps_dropped_early == reference.dropped
        batch = _every_stored(replay)
        assert {
            (int(batch.action[k]), int(p) % self.B) for k, p in enumerate(batch.indices)
        } == reference.stored()
        _check_batch(batch, reference, replay.n_step, replay.discount, self.B)
        draws = min(8, replay.storage.num_transitions)
        if draws:
            _check_batch(
                replay.sample(draws), reference, replay.n_step, replay.discount, self.B
            )
        if isinstance(replay, PrioritizedReplay):
            everything = np.arange(replay.priorities.size)
            positive = replay.priorities.priorities[everything] > 0
            np.testing.assert_array_equal(
                positive, replay.storage.is_stored(everything)
            )


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 4),
    B=st.integers(1, 3),
    windows=st.integers(1, 4),
    batches=st.integers(1, 12),
    n_step=st.integers(1, 4),
    discount=st.floats(0.0, 1.0),
    ends=scripted_ends(longest=5),
    capacity_choice=st.one_of(st.none(), st.integers(0, 10**6)),
    copy=st.booleans(),
    dict_obs=st.booleans(),
    final_slot=st.booleans(),
    prioritized=st.booleans(),
    seed=st.integers(0, 2**16),
)
@example(  # full_size == T: a prioritized replay never offers the unkept row 0
    T=2, B=1, windows=1, batches=2, n_step=1, discount=0.0,
    ends=[[(1, "term")]] * 3, capacity_choice=None, copy=False, dict_obs=False,
    final_slot=False, prioritized=True, seed=0,
)  # fmt: skip
@example(  # a table of one batch's ends, overflowing at every batch
    T=2, B=2, windows=3, batches=8, n_step=3, discount=0.5,
    ends=[[(1, "trunc")], [(2, "term")], [(1, "term")]], capacity_choice=0,
    copy=True, dict_obs=True, final_slot=True, prioritized=True, seed=1,
)  # fmt: skip
def test_sparse_replay_matches_a_dense_reference(
    T, B, windows, batches, n_step, discount, ends, capacity_choice, copy,
    dict_obs, final_slot, prioritized, seed,
):  # fmt: skip
    N = T * windows
    if N < 2:
        N = 2 * T
    n_step = min(n_step, N - 1)
    capacity = None
    if capacity_choice is not None:  # anywhere from one batch's ends to every step
        low, high = min(T, N - 1) * B, (N - 1) * B
        capacity = low + capacity_choice % (high - low + 1)
    run = Run(
        T, B, N, ends[:B], capacity=capacity, copy=copy, dict_obs=dict_obs,
        final_slot=final_slot, prioritized=prioritized, n_step=n_step,
        discount=discount, seed=seed,
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(batches):
            run.step()
            run.check()
    dropped = [w for w in caught if issubclass(w.category, ParllelWarning)]
    assert len(dropped) == (1 if run.reference.dropped else 0)


def test_a_full_table_drops_the_oldest_steps_and_warns_once():
    # every step ends an episode; the table holds one batch's worth (T * B = 4)
    run = Run(2, 2, 10, [[(1, "trunc")], [(1, "term")]], capacity=4, n_step=3)
    with pytest.warns(ParllelWarning, match="final_observation_capacity"):
        run.step()
        run.step()
    assert run.replay.storage.size == 2 and run.replay.storage.steps_dropped_early == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        for _ in range(6):
            run.step()
            run.check()
    assert len(run.replay) == 4


def test_default_capacity():
    atari = 84 * 84 * 4
    # large observations: one entry per 32 stored steps
    assert final_capacity(None, 1_000_000, 256, atari) == 31_250
    # ... never fewer than 64 MiB hold, nor than one batch can add
    assert final_capacity(None, 10_000, 256, atari) == (64 << 20) // atari
    assert final_capacity(None, 10_000, 4096, atari) == 4096
    # small observations: room for every stored step
    assert final_capacity(None, 400_000, 256, 16) == 400_000
    assert final_capacity(500, 400, 8, 16) == 400  # never more than the steps
    for bad in (7, 2.5, True, "8"):
        with pytest.raises(ConfigError, match="final_observation_capacity"):
            final_capacity(bad, 400, 8, 16)
    with pytest.raises(ConfigError, match=r"\* B = 8"):
        UniformReplay(
            build_replay_tree(4, 2, 8), 4, np.random.default_rng(0),
            final_observation_capacity=7,
        )  # fmt: skip


def test_final_observation_slot_must_fit_the_observation():
    rng = np.random.default_rng(0)
    tree = ArrayDict(dict(build_replay_tree(4, 2, 8, final_slot=True).items()))
    tree[fields.FINAL_OBSERVATION] = Array((4, 2), (3,), np.float64)
    with pytest.raises(ConfigError, match="do not match"):
        UniformReplay(tree, 4, rng)
    tree[fields.FINAL_OBSERVATION] = Array((4, 3), (3,), np.float32)
    with pytest.raises(ConfigError, match=r"\[T, B\] slot"):
        UniformReplay(tree, 4, rng)


def _same_samples(a, b, draws=3):
    for _ in range(draws):
        x, y = a.sample(), b.sample()
        for name in x._fields:
            for (_, left), (_, right) in zip(
                tree_items(getattr(x, name)), tree_items(getattr(y, name))
            ):
                np.testing.assert_array_equal(left, right, err_msg=name)


ENDS_FIXED = SCRIPTED_ENDS[:2]


@pytest.mark.parametrize("prioritized", [False, True])
def test_checkpoint_round_trip_keeps_final_observations(prioritized):
    run = Run(4, 2, 12, ENDS_FIXED, n_step=2, prioritized=prioritized)
    for _ in range(7):
        run.step()
    state = run.replay.state_dict(include_contents=True)
    saved = state["storage"]["contents"]["final_observations"]
    assert len(saved["rows"]) == run.reference.ends(run.reference.size)
    fresh = Run(4, 2, 12, ENDS_FIXED, n_step=2, prioritized=prioritized, seed=5)
    fresh.replay.load_state_dict(state)
    assert len(fresh.replay) == len(run.replay)
    _same_samples(fresh.replay, run.replay)


def test_checkpoint_into_a_smaller_table_drops_the_oldest_steps():
    run = Run(4, 2, 16, ENDS_FIXED, prioritized=True)
    for _ in range(6):
        run.step()
    state = run.replay.state_dict(include_contents=True)
    small = Run(4, 2, 16, ENDS_FIXED, capacity=8, prioritized=True)
    with pytest.warns(ParllelWarning):
        small.replay.load_state_dict(state)
    # the reference's view of the same history with a table of 8 entries
    reference = run.reference
    reference.capacity = 8
    kept = reference.size
    while reference.ends(kept) > 8:
        kept -= 1
    reference.dropped += reference.size - kept
    reference.size = kept
    small.reference = reference
    assert 0 < small.replay.storage.size == kept < run.replay.storage.size
    small.check()


def test_an_image_replay_takes_about_the_observation_storage():
    """84x84x4 uint8: every field the replay holds, per stored step, is at most
    1.05x the observation alone (a full-size final observation made it ~2x)."""
    observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    action_space = gym.spaces.Discrete(6)
    observation = observation_space.sample()
    env_example = step_example(observation)
    T, B, N = 4, 2, 2048  # allocated lazily: the pages are never touched
    handler = NumpyHandler(RandomAgent(action_space), B)
    tree = sample_tree_from_examples(
        env_example, handler.example_outputs(observation), T, B, "local",
        full_size=N, env_info=False, bootstrap=False, final_observation=True,
    )  # fmt: skip
    stored = (N - 1) * B
    replay = UniformReplay(
        tree, 32, np.random.default_rng(0), final_observation_capacity=stored // 32
    )
    assert tree[fields.FINAL_OBSERVATION].full_size == T  # a [T, B] slot
    held = sum(leaf.nbytes for _, leaf in tree.items_flat())
    held += replay.storage.final_observations.nbytes
    assert replay.storage.nbytes <= held
    assert held / stored <= 1.05 * observation.nbytes
