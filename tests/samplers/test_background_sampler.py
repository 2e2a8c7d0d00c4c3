"""BackgroundSampler: bitwise equality with the synchronous sampler, lag, faults, cleanup."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

from parllel import fields
from parllel.arrays.shared_memory import list_segments
from parllel.errors import (
    BackgroundSamplerError,
    ConfigError,
    PolicyLagError,
    TreeRingError,
)
from parllel.samplers.background import BackgroundSampler
from tests.helpers.background_helpers import (
    build_failing_sampler,
    build_raising,
    build_random_sampler,
    build_torch_sampler,
    build_worker_pid_sampler,
    learner_update,
    make_linear_handler,
    snapshot,
)

BATCHES = 5


def episodes(completed) -> list[dict]:
    return [vars(traj).copy() for traj in completed]


def assert_same(expected: list, actual: list) -> None:
    assert len(expected) == len(actual)
    for n, (a, b) in enumerate(zip(expected, actual)):
        assert a.keys() == b.keys()
        for path in a:
            np.testing.assert_array_equal(
                a[path], b[path], err_msg=f"batch {n}, {path}"
            )


def process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return any(
                line.split()[1:2] == ["Z"]
                for line in status
                if line.startswith("State")
            )
    except FileNotFoundError:
        return True


def wait_gone(pids) -> None:
    while not all(process_gone(pid) for pid in pids):  # pytest-timeout guards a hang
        time.sleep(0.01)


# -- bitwise equality with the synchronous sampler -------------------------------
def test_max_lag_0_random_agent_batches_equal_the_synchronous_sampler():
    sampler = build_random_sampler(seed=3)
    expected, expected_episodes = [], []
    for _ in range(BATCHES):
        tree, completed = sampler.collect_batch()
        expected.append(snapshot(tree))
        expected_episodes.append(episodes(completed))
    with BackgroundSampler(build_random_sampler, 3, max_lag=0) as background:
        actual, actual_episodes = [], []
        for n in range(BATCHES):
            batch = background.collect_batch()
            assert batch.batch_index == n and batch.policy_version == 0
            actual.append(snapshot(batch.sample_tree))
            actual_episodes.append(episodes(batch.completed))
    assert_same(expected, actual)
    assert expected_episodes == actual_episodes
    assert any(expected_episodes)  # episodes did end (the test covers resets)


def test_max_lag_0_torch_agent_with_published_weights_equals_the_synchronous_loop():
    """A learner that changes the weights after every batch: the background
    sampler waits for each new version, so every batch is the synchronous one."""
    sampler = build_torch_sampler(seed=1)
    expected = []
    for n in range(BATCHES):
        tree, _ = sampler.collect_batch()
        expected.append(snapshot(tree))
        learner_update(sampler.handler, n)
    learner = make_linear_handler(seed=1)
    weights = learner.share_weights()
    try:
        with BackgroundSampler(
            build_torch_sampler, 1, weights, max_lag=0
        ) as background:
            actual = []
            for n in range(BATCHES):
                batch = background.collect_batch(learner_version=learner.policy_version)
                assert (batch.batch_index, batch.policy_version, batch.lag) == (n, n, 0)
                assert (batch.lag_min, batch.lag_mean) == (0, 0.0)
                actual.append(snapshot(batch.sample_tree))
                # the follower records each step's version; the synchronous
                # sampler's handler follows none, so its tree lacks the field
                versions = actual[-1].pop(
                    f"{fields.AGENT_INFO}.{fields.POLICY_VERSION}"
                )
                assert (versions[: sampler.batch_T] == n).all()
                learner_update(learner, n)
                learner.publish_weights()
    finally:
        weights.close()
    assert_same(expected, actual)
    assert any(np.any(s[fields.ACTION] != expected[0][fields.ACTION]) for s in expected)


@pytest.mark.parametrize("max_lag", [1, 2])
def test_lag_stays_within_max_lag(max_lag):
    learner = make_linear_handler(seed=2)
    weights = learner.share_weights()
    try:
        with BackgroundSampler(
            build_torch_sampler, 2, weights, k=3, max_lag=max_lag
        ) as background:
            for n in range(2 * BATCHES):
                batch = background.collect_batch(learner_version=learner.policy_version)
                assert batch.policy_version >= n - max_lag
                assert 0 <= batch.lag <= max_lag
                learner_update(learner, n)
                learner.publish_weights()
            with pytest.raises(PolicyLagError, match="max_lag"):
                background.collect_batch(learner_version=learner.policy_version + 9)
    finally:
        weights.close()


# -- faults ----------------------------------------------------------------------
def test_builder_error_is_raised_in_the_learner_with_its_traceback():
    with pytest.raises(BackgroundSamplerError, match="cannot build sampler 4") as info:
        BackgroundSampler(build_raising, 4)
    assert "build_raising" in info.value.worker_traceback


def test_env_error_mid_run_is_raised_in_the_learner():
    with BackgroundSampler(build_failing_sampler, 0, max_lag=0) as background:
        with pytest.raises(BackgroundSamplerError, match="failed on purpose"):
            for _ in range(10):
                background.collect_batch()
        with pytest.raises(TreeRingError):
            background.collect_batch()


def test_killed_background_process_raises_and_its_workers_exit():
    pids = mp.get_context("forkserver").Queue()
    background = BackgroundSampler(build_worker_pid_sampler, 0, pids, max_lag=0)
    try:
        background.collect_batch()
        workers = [pids.get(timeout=30), pids.get(timeout=30)]
        assert workers[-1] == background.pid
        os.kill(background.pid, signal.SIGKILL)
        with pytest.raises(BackgroundSamplerError, match="exit code -9"):
            for _ in range(1000):  # the trees already filled come first
                background.collect_batch()
        wait_gone(workers)
    finally:
        background.close()


@pytest.mark.parametrize("how", ["close", "learner raises"])
def test_closing_stops_the_process_and_its_workers_and_frees_memory(how):
    pids = mp.get_context("forkserver").Queue()
    background = BackgroundSampler(build_worker_pid_sampler, 0, pids, max_lag=None)
    owners = [pids.get(timeout=30), pids.get(timeout=30)]
    if how == "close":
        background.collect_batch()
        background.close()
        background.close()  # idempotent
    else:
        with pytest.raises(ValueError, match="update failed"):
            with background:
                background.collect_batch()
                raise ValueError("update failed")
    wait_gone(owners)
    for pid in owners:
        assert not list_segments(pid)
    with pytest.raises(TreeRingError):
        background.collect_batch()


def test_bad_arguments():
    with pytest.raises(ConfigError, match="max_lag"):
        BackgroundSampler(build_random_sampler, 0, max_lag=-1)
    with pytest.raises(ConfigError, match="k >= 2"):
        BackgroundSampler(build_random_sampler, 0, k=1)


def test_use_tree_refuses_a_tree_of_another_layout():
    from parllel.samplers.tree_ring import allocate_like
    from parllel.tree import ArrayDict
    from tests.helpers.background_helpers import T

    sampler = build_random_sampler(seed=0)
    other = ArrayDict(
        {k: v for k, v in sampler.sample_tree.items() if k != fields.PREV_ACTION}
    )
    with pytest.raises(ConfigError, match="fields, shapes"):
        sampler.use_tree(other)
    same = allocate_like(sampler.sample_tree)
    try:
        sampler.use_tree(same)
        tree, _ = sampler.collect_batch()
        assert tree is same and len(tree[fields.REWARD]) == T
    finally:
        same.close()
