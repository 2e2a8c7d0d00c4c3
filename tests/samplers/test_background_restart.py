"""BackgroundSampler(max_restarts=N): a dead background process is replaced.

The process is SIGKILLed between batches (waiting for the learner's weights)
and during one (a worker stalls in an env step until its parent is gone);
training continues over the same trees with consistent batch numbers and
policy versions, the counters say what happened, and nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from parllel import fields
from parllel.arrays.shared_memory import list_segments
from parllel.errors import (
    BackgroundSamplerError,
    ConfigError,
    ParllelWarning,
)
from parllel.samplers.background import BackgroundSampler
from tests.helpers.background_helpers import (
    build_failing_sampler,
    learner_update,
    make_linear_handler,
)
from tests.helpers.background_restart_helpers import (
    T,
    build_following_sampler,
    build_stalling_sampler,
    read_pids,
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_nothing_left(run_dir: Path) -> None:
    """Every background process and cage worker exited; none left a segment."""
    pids = read_pids(run_dir)
    assert pids
    while any(alive(pid) for pid in pids):  # pytest-timeout guards a hang
        time.sleep(0.01)
    for pid in pids:
        assert not list_segments(pid), f"segments of {pid} left"


def wait_for(path: Path) -> None:
    while not path.exists():  # pytest-timeout guards a hang
        time.sleep(0.01)


def first_step(tree) -> np.ndarray:
    """Every env's observation at step 0 (CountingEnv: tag, episode, t, action)."""
    return tree[fields.OBSERVATION].to_ndarray()[0].copy()


@pytest.mark.timeout(60)
def test_killed_between_batches_restarts_and_keeps_the_versions(tmp_path):
    """max_lag=0: killed while it waits for the learner's next weights, no
    batch is lost; the new process starts at the next batch with the newest
    weights, from reset envs."""
    learner = make_linear_handler(seed=1)
    weights = learner.share_weights()
    try:
        with BackgroundSampler(
            build_following_sampler, str(tmp_path), weights, max_lag=0, max_restarts=2
        ) as background:
            killed, reset = None, None
            for n in range(6):
                if killed is None:
                    batch = background.collect_batch(learner.policy_version)
                else:
                    with pytest.warns(ParllelWarning, match="reset"):
                        batch = background.collect_batch(learner.policy_version)
                    assert background.pid != killed
                    # its envs start from reset, as the first process's did
                    assert np.array_equal(first_step(batch.sample_tree), reset)
                    killed = None
                if n == 0:
                    reset = first_step(batch.sample_tree)
                assert (batch.batch_index, batch.policy_version, batch.lag) == (n, n, 0)
                versions = batch.sample_tree[fields.AGENT_INFO][fields.POLICY_VERSION]
                assert (versions.to_ndarray()[:T] == n).all()
                learner_update(learner, n)
                if n in (1, 3):  # it waits for version n + 1: kill it there
                    killed = background.pid
                    os.kill(killed, signal.SIGKILL)
                learner.publish_weights()
            assert (background.restarts, background.dropped_batches) == (2, 0)
    finally:
        weights.close()
    assert len(read_pids(tmp_path)) == 3  # the first process and two restarts
    assert_nothing_left(tmp_path)


@pytest.mark.slow  # ~10 s of process starts; the restart itself is tested above
@pytest.mark.timeout(60)
def test_killed_during_a_batch_drops_it_and_keeps_the_filled_ones(tmp_path):
    """k=3, no lag bound: batch 1 is filled when the process stalls in batch 2
    (env step 2 T + 3, no decorrelation) and is killed; batch 1 still arrives, batch 2 is collected
    again by the new process, from reset envs."""
    with BackgroundSampler(
        build_stalling_sampler,
        str(tmp_path),
        2 * T + 3,
        k=3,
        max_lag=None,
        max_restarts=1,
    ) as background:
        reset = first_step(background.collect_batch().sample_tree)
        wait_for(tmp_path / "stalled")
        os.kill(background.pid, signal.SIGKILL)
        # the learner notices the death at batch 1 or (if batch 1, filled
        # before, comes first) at batch 2, which only a new process can fill
        with pytest.warns(ParllelWarning, match="dropped"):
            batch = background.collect_batch()
            assert batch.batch_index == 1  # filled by the dead process
            assert not np.array_equal(first_step(batch.sample_tree), reset)
            batch = background.collect_batch()
        assert batch.batch_index == 2
        # the new process's first batch: its envs start from reset
        assert np.array_equal(first_step(batch.sample_tree), reset)
        for n in range(3, 6):
            assert background.collect_batch().batch_index == n
        assert (background.restarts, background.dropped_batches) == (1, 1)
    assert len(read_pids(tmp_path)) == 4  # two background processes, two workers
    assert_nothing_left(tmp_path)


@pytest.mark.timeout(60)
def test_dying_more_than_max_restarts_raises_naming_the_count(tmp_path):
    """Envs that exit the (serial-cage) process at their 3rd step: every
    process dies in its first batch; the third death raises."""
    learner = make_linear_handler(seed=1)
    weights = learner.share_weights()
    try:
        background = BackgroundSampler(
            build_following_sampler,
            str(tmp_path),
            weights,
            3,  # die_at_step
            max_lag=None,
            max_restarts=2,
        )
        with background:
            with pytest.warns(ParllelWarning) as warned:
                with pytest.raises(
                    BackgroundSamplerError, match="exit code 17.* after 2 restarts"
                ) as info:
                    background.collect_batch()
            assert info.value.exitcode == 17
            assert len(warned) == 2
            assert (background.restarts, background.dropped_batches) == (2, 2)
    finally:
        weights.close()
    assert len(read_pids(tmp_path)) == 3
    assert_nothing_left(tmp_path)


@pytest.mark.timeout(60)
def test_an_error_raised_by_the_sampler_is_not_restarted():
    with BackgroundSampler(
        build_failing_sampler, 0, max_lag=0, max_restarts=3
    ) as background:
        with pytest.raises(BackgroundSamplerError, match="failed on purpose") as info:
            for _ in range(10):
                background.collect_batch()
        assert info.value.exitcode is None  # raised, not died
        assert background.restarts == 0


def test_max_restarts_must_not_be_negative():
    with pytest.raises(ConfigError, match="max_restarts"):
        BackgroundSampler(build_failing_sampler, 0, max_restarts=-1)
