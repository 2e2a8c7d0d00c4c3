"""Resuming a replay saved with its contents once episodes have ended (issue #29).

A replay's checkpoint holds one final-observation row per stored step that
ended an episode, so its table has as many rows as the run had episode ends,
not as many as a fresh replay's. The checks a runner makes before loading
(:func:`~parllel.runners.checkpoints.restore_objects`) must accept any row
count and still refuse rows of another shape or dtype.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from parllel.errors import CheckpointMismatchError
from parllel.replays import PrioritizedReplay, UniformReplay
from parllel.runners.checkpoints import restore_objects
from parllel.runners.off_policy import ReplayCheckpoint
from tests.helpers.replay_helpers import (
    SCRIPTED_ENDS,
    ScriptedSampler,
    assert_equal_trees,
    build_replay_tree,
)

T, B, N = 4, 2, 12


def filled_replay(kind=UniformReplay, batches=7, dict_obs=False, seed=0):
    """A replay of ``batches`` scripted batches (episodes of 1 to 5 steps)."""
    tree = build_replay_tree(T, B, N, dict_obs, final_slot=True)
    sampler = ScriptedSampler(tree, SCRIPTED_ENDS[:B], dict_obs=dict_obs)
    replay = kind(tree, 4, np.random.default_rng(seed), n_step=2)
    sampler.record_into(replay, batches)
    return replay


def restore(replay, state):
    """Check and load ``state`` as a runner's resume does."""
    restore_objects(
        Path("checkpoint_000000000056.pt"),
        {"objects": {"replay": state}, "config": {}},
        {"replay": ReplayCheckpoint(replay, include_contents=True)},
        {},
        None,
    )


@pytest.mark.parametrize("dict_obs", [False, True])
@pytest.mark.parametrize("kind", [UniformReplay, PrioritizedReplay])
def test_contents_with_episode_ends_resume_into_a_fresh_replay(kind, dict_obs):
    saved = filled_replay(kind, dict_obs=dict_obs)
    state = ReplayCheckpoint(saved, include_contents=True).state_dict()
    ends = state["storage"]["contents"]["final_observations"]["rows"]
    assert len(ends) > 0  # the table's rows differ from a fresh replay's (none)

    fresh = filled_replay(kind, batches=0, dict_obs=dict_obs, seed=5)
    restore(fresh, state)

    assert len(fresh) == len(saved) > 0
    assert_equal_trees(fresh.state_dict(include_contents=True), state)


@pytest.mark.parametrize("batches", [0, 2])
def test_a_replay_with_other_episode_ends_resumes_too(batches):
    """The current replay may itself hold episode ends (fewer than saved)."""
    state = ReplayCheckpoint(filled_replay(), include_contents=True).state_dict()
    current = filled_replay(batches=batches, seed=3)
    restore(current, state)
    assert_equal_trees(current.state_dict(include_contents=True), state)


def _tampered(change):
    state = ReplayCheckpoint(filled_replay(), include_contents=True).state_dict()
    table = state["storage"]["contents"]["final_observations"]
    change(table)
    return state


@pytest.mark.parametrize(
    "change, words",
    [
        (
            lambda table: table.update(observations=table["observations"][:, :2]),
            ["'storage.contents.final_observations.observations'", "(2,)", "(3,)"],
        ),
        (
            lambda table: table.update(
                observations=table["observations"].astype(np.float64)
            ),
            ["dtype float64 in the checkpoint, float32"],
        ),
        (
            lambda table: table.update(envs=table["envs"].astype(np.int32)),
            ["'storage.contents.final_observations.envs'", "dtype int32"],
        ),
        (
            lambda table: table.update(rows=table["rows"][:-1]),
            ["count different numbers of items", "damaged"],
        ),
    ],
    ids=["item-shape", "observation-dtype", "index-dtype", "ragged-columns"],
)
def test_final_observation_rows_of_another_kind_are_refused(change, words):
    fresh = filled_replay(batches=0)
    with pytest.raises(CheckpointMismatchError) as refused:
        restore(fresh, _tampered(change))
    for word in words:
        assert word in str(refused.value)
    assert len(fresh) == 0  # nothing was loaded


@pytest.mark.parametrize("kind", [UniformReplay, PrioritizedReplay])
def test_the_resume_check_compares_with_views_not_a_copy_of_the_replay(kind):
    """A 1M-step Atari replay is 7.3 GB: the check before loading must not
    copy it (it compares with views of the rows; the state saved stays a copy)."""
    replay = filled_replay(kind)
    checkpoint = ReplayCheckpoint(replay, include_contents=True)
    rows = replay.storage.rows
    viewed = checkpoint.state_for_check()["storage"]["contents"]
    saved = checkpoint.state_dict()["storage"]["contents"]
    for name in ("reward", "action"):
        assert np.shares_memory(viewed[name], np.asarray(rows[name]))
        assert not np.shares_memory(saved[name], np.asarray(rows[name]))
    calls = []
    real = checkpoint.state_dict
    checkpoint.state_dict = lambda: calls.append(1) or real()
    state = filled_replay(kind, seed=1).state_dict(include_contents=True)
    restore_objects(
        Path("checkpoint_000000000056.pt"),
        {"objects": {"replay": state}, "config": {}},
        {"replay": checkpoint},
        {},
        None,
    )
    assert calls == []  # the copying state_dict was never called
