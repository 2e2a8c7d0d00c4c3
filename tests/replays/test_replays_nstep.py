"""n-step returns against a plain Python reference over the true history."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.replays import UniformReplay
from parllel.replays.transitions import gather_transitions
from tests.helpers.replay_helpers import (
    ScriptedSampler,
    build_replay_tree,
    scripted_ends,
    state_of,
)


def reference(history, step, env, n_step, discount, newest):
    """Sum rewards from ``step`` until n steps, an episode end, or the newest step."""
    total, k = 0.0, 0
    while True:
        truth = history[(step + k, env)]
        total += discount**k * truth.reward
        k += 1
        if truth.terminated or truth.truncated or k == n_step or step + k > newest:
            return total, k, truth


@settings(max_examples=40, deadline=None)
@given(
    T=st.integers(1, 4),
    B=st.integers(1, 3),
    laps=st.integers(1, 3),
    batches=st.integers(1, 9),
    n_step=st.integers(1, 5),
    discount=st.floats(0.0, 1.0),
    ends=scripted_ends(longest=6),
    seed=st.integers(0, 2**16),
)
def test_n_step_matches_reference(T, B, laps, batches, n_step, discount, ends, seed):
    N = T * laps + T  # at least two windows
    n_step = min(n_step, N - 1)
    tree = build_replay_tree(T, B, N)
    rewards = np.random.default_rng(seed).normal(size=(T * batches, B))
    sampler = ScriptedSampler(
        tree, ends[:B], rewards=rewards.astype(np.float32).astype(np.float64)
    )
    replay = UniformReplay(tree, 1, np.random.default_rng(0), n_step=n_step)
    sampler.record_into(replay, batches)
    storage = replay.storage
    positions = storage.positions_from_age(np.arange(storage.num_transitions))
    batch = gather_transitions(storage, positions, n_step, discount)
    newest = sampler.global_step - 1
    for k in range(len(positions)):
        env = state_of(batch.observation, k)[0]
        step = int(batch.action[k])
        total, used, last = reference(
            sampler.history, step, env, n_step, discount, newest
        )
        assert batch.n_steps[k] == used
        np.testing.assert_allclose(batch.reward[k], total, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            batch.discount[k], discount**used, rtol=1e-6, atol=1e-30
        )
        assert state_of(batch.next_observation, k) == last.next_observation
        assert bool(batch.terminated[k]) == last.terminated
        assert bool(batch.truncated[k]) == last.truncated
        assert (
            state_of(batch.observation, k) == sampler.history[(step, env)].observation
        )
