"""Cages: same results serially and in processes; episodes; faults; clean-up."""

from __future__ import annotations

import os
import signal
import time
from functools import partial

import numpy as np
import pytest

from parllel import fields
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage, TrajInfo
from parllel.cages.cage import CageState
from parllel.errors import (
    CageStateError,
    ClosedCageError,
    ConfigError,
    EnvError,
    InvalidActionError,
    SpaceMismatchError,
    WorkerDiedError,
)
from tests.helpers.cage_helpers import allocate, run, slots
from tests.helpers.envs import CountingEnv

T = 12


def fork_cage(factory, n_envs, **kwargs):
    """ProcessCage started with fork (fast in tests; forkserver is tested separately)."""
    return ProcessCage(factory, n_envs, start_method="fork", **kwargs)


def assert_same(a, b):
    assert a[0].keys() == b[0].keys()
    for key in a[0]:
        np.testing.assert_array_equal(a[0][key], b[0][key], err_msg=key)
    assert [t.to_dict() for t in a[1]] == [t.to_dict() for t in b[1]]


@pytest.mark.parametrize(
    "env_kwargs",
    [
        {},
        {"terminal": False},
        {"observation": "dict"},
        {"action": "box"},
        {"action": "dict", "observation": "dict"},
    ],
    ids=["box-discrete", "truncating", "dict-obs", "box-action", "dict-dict"],
)
def test_process_equals_serial_for_any_grouping(env_kwargs):
    factory = partial(CountingEnv, **env_kwargs)
    with SerialCage(factory, 5, options=CageOptions(seed=3)) as cage:
        reference = run(cage, T)
    layouts = [
        {"layout": ProcessLayout(envs_per_worker=2)},
        {"layout": ProcessLayout(envs_per_worker=5)},
        {"layout": ProcessLayout(main_process_envs=2)},
    ]
    for layout in layouts:
        with fork_cage(factory, 5, options=CageOptions(seed=3), **layout) as cage:
            assert_same(run(cage, T), reference)


def test_forkserver_and_spawn_give_the_same_batches():
    with SerialCage(CountingEnv, 3, options=CageOptions(seed=1)) as cage:
        reference = run(cage, 6)
    for method in ("forkserver", "spawn"):
        with ProcessCage(
            CountingEnv,
            3,
            options=CageOptions(seed=1),
            layout=ProcessLayout(envs_per_worker=2),
            start_method=method,
        ) as cage:
            assert_same(run(cage, 6), reference)


def test_auto_reset_keeps_final_observation_and_statistics():
    with SerialCage(
        partial(CountingEnv, terminal=False), 2, options=CageOptions(seed=0)
    ) as cage:
        arrays, trajs = run(cage, T)
    obs = arrays[fields.OBSERVATION][1:]  # padded: row 0 is the leading padding
    final = arrays[fields.FINAL_OBSERVATION]
    done = arrays[fields.TERMINATED] | arrays[fields.TRUNCATED]
    assert not arrays[fields.TERMINATED].any() and done.any()
    for t, b in zip(*np.nonzero(done)):
        # the final observation ends the episode; the next slot starts a new one
        assert final[t, b, 2] > 0 and obs[t + 1, b, 2] == 0
        assert obs[t + 1, b, 1] == final[t, b, 1] + 1
    assert len(trajs) == done.sum()
    first = next(tr for tr in trajs if tr.env_index == 0)
    rewards = arrays[fields.REWARD][: first.length, 0]
    assert first.truncated and not first.terminated
    assert first.return_ == pytest.approx(rewards.sum(), rel=1e-5)
    discounts = 0.99 ** np.arange(first.length)
    assert first.discounted_return == pytest.approx(
        (discounts * rewards).sum(), rel=1e-5
    )
    assert first.extra["note"] == "text"  # non-numeric info reaches TrajInfo


def test_env_info_keys_with_dots_are_stored():
    with SerialCage(CountingEnv, 2, options=CageOptions(seed=0)) as cage:
        arrays, _ = run(cage, T)
    done = arrays[fields.TERMINATED] | arrays[fields.TRUNCATED]
    step_t = np.where(
        done,
        arrays[fields.FINAL_OBSERVATION][..., 2],
        arrays[fields.OBSERVATION][2:, :, 2],
    )
    np.testing.assert_array_equal(arrays["env_info.t"], step_t)
    assert set(np.unique(arrays["env_info.ale.lives"]).tolist()) <= {1, 2, 3}


@pytest.mark.parametrize("process", [False, True])
def test_wait_reset_idles_finished_envs(process):
    factory = partial(CountingEnv, min_length=2, max_length=2)
    make = (
        partial(fork_cage, layout=ProcessLayout(envs_per_worker=1))
        if process
        else SerialCage
    )
    with make(factory, 2, options=CageOptions(seed=0, reset_mode="wait")) as cage:
        with allocate(cage, 4) as tree:
            tree.action[:] = 1
            cage.reset(tree.observation[0])
            for t in range(4):
                cage.step(tree.action[t], slots(tree, t))
            assert tree.terminated[1].all() and not tree.terminated[2:].any()
            assert not tree.reward[2:].any()  # idle envs report nothing
            assert cage.waiting_envs() == [0, 1]
            cage.reset(tree.observation[0], env_indices=[1])
            assert cage.waiting_envs() == [0]
            assert tree.observation[0, 1, 1] == 1  # second episode of env 1


def test_seeding_is_deterministic_and_distinct_per_env():
    with SerialCage(
        partial(CountingEnv, min_length=1, max_length=50),
        4,
        options=CageOptions(seed=7),
    ) as cage:
        a, _ = run(cage, T)
    with SerialCage(
        partial(CountingEnv, min_length=1, max_length=50),
        4,
        options=CageOptions(seed=7),
    ) as cage:
        b, _ = run(cage, T)
    with SerialCage(
        partial(CountingEnv, min_length=1, max_length=50),
        4,
        options=CageOptions(seed=8),
    ) as cage:
        c, _ = run(cage, T)
    np.testing.assert_array_equal(a[fields.TERMINATED], b[fields.TERMINATED])
    assert not np.array_equal(a[fields.OBSERVATION], c[fields.OBSERVATION])
    tags = a[fields.OBSERVATION][1, :, 0]
    assert len(set(tags.tolist())) == 4  # every env got its own seed


def test_env_error_in_worker_carries_index_and_traceback():
    factory = partial(CountingEnv, fail_at_step=3)
    with fork_cage(
        factory, 4, options=CageOptions(seed=0), layout=ProcessLayout(envs_per_worker=2)
    ) as cage:
        with allocate(cage, 5) as tree:
            cage.reset(tree.observation[0])
            start = time.monotonic()
            with pytest.raises(EnvError) as info:
                for t in range(5):
                    cage.step(tree.action[t], slots(tree, t))
            assert time.monotonic() - start < 10
            assert info.value.env_index in range(4)
            assert "failed on purpose" in str(info.value)
            assert "Traceback" in info.value.worker_traceback


def test_env_error_in_serial_cage():
    with SerialCage(
        partial(CountingEnv, fail_at_step=2),
        2,
        options=CageOptions(seed=0, env_offset=10),
    ) as cage:
        with allocate(cage, 3) as tree:
            cage.reset(tree.observation[0])
            with pytest.raises(EnvError, match="env 10"):
                for t in range(3):
                    cage.step(tree.action[t], slots(tree, t))


def test_sigkilled_worker_raises_promptly():
    with fork_cage(
        CountingEnv,
        4,
        options=CageOptions(seed=0),
        layout=ProcessLayout(envs_per_worker=2),
    ) as cage:
        with allocate(cage, 4) as tree:
            cage.reset(tree.observation[0])
            cage.step(tree.action[0], slots(tree, 0))
            os.kill(cage.worker_pids[1], signal.SIGKILL)
            start = time.monotonic()
            with pytest.raises(WorkerDiedError, match="signal 9") as info:
                cage.step(tree.action[1], slots(tree, 1))
            assert time.monotonic() - start < 5
            assert info.value.env_indices == (2, 3)
            assert cage.closed


def test_dead_worker_is_restarted_on_request():
    factory = partial(
        CountingEnv, die_at_step=4
    )  # every env process dies at its 4th step
    with fork_cage(
        factory,
        2,
        options=CageOptions(seed=0),
        layout=ProcessLayout(envs_per_worker=1),
        on_worker_death="restart",
    ) as cage:
        with allocate(cage, 8) as tree:
            cage.reset(tree.observation[0])
            lost = []
            for t in range(8):
                lost += [
                    tr for tr in cage.step(tree.action[t], slots(tree, t)) if tr.lost
                ]
            assert {tr.env_index for tr in lost} == {0, 1}
            assert all(tr.truncated for tr in lost)
            for b in (0, 1):  # where a worker died: truncated, then a fresh episode
                steps = np.nonzero(tree.truncated[:, b])[0]
                assert len(steps) and all(
                    tree.observation[t + 1, b, 2] == 0 for t in steps
                )


def test_close_releases_everything_and_is_idempotent():
    cage = fork_cage(
        CountingEnv,
        4,
        options=CageOptions(seed=0),
        layout=ProcessLayout(envs_per_worker=2),
    )
    pids = cage.worker_pids
    cage.close()
    cage.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert cage.state is CageState.CLOSED
    with allocate(SerialCage(CountingEnv, 4), 2) as tree:
        with pytest.raises(ClosedCageError):
            cage.step(tree.action[0], slots(tree, 0))


def test_exception_inside_context_manager_cleans_up():
    with pytest.raises(KeyError):
        with fork_cage(CountingEnv, 2, options=CageOptions(seed=0)) as cage:
            pids = cage.worker_pids
            raise KeyError("user bug")
    time.sleep(0.1)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_bad_actions_and_call_order():
    with SerialCage(CountingEnv, 3, options=CageOptions(seed=0)) as cage:
        with allocate(cage, 2) as tree:
            cage.reset(tree.observation[0])
            with pytest.raises(InvalidActionError, match=r"shape \(3,\)"):
                cage.step(np.zeros(2, np.int64), slots(tree, 0))
            with pytest.raises(InvalidActionError, match="dtype"):
                cage.step(np.zeros(3, np.float32), slots(tree, 0))
            cage.step_async(tree.action[0], slots(tree, 0))
            with pytest.raises(CageStateError, match="await_step"):
                cage.step_async(tree.action[0], slots(tree, 0))
            cage.await_step()
            with pytest.raises(CageStateError, match="nothing is pending"):
                cage.await_step()


def test_stepping_before_reset_is_refused():
    with SerialCage(CountingEnv, 1) as cage:
        with allocate(cage, 1) as tree:
            with pytest.raises(CageStateError, match="reset"):
                cage.step(tree.action[0], slots(tree, 0))


def test_process_cage_needs_shared_buffers():
    with fork_cage(CountingEnv, 2, options=CageOptions(seed=0)) as cage:
        with allocate(cage, 2, storage="local") as tree:
            with pytest.raises(ConfigError, match="observation"):
                cage.reset(tree.observation[0])


def _unpicklable_factory():
    import threading

    lock = threading.Lock()
    return lambda: (lock, CountingEnv())[1]


def test_unpicklable_factory_fails_at_construction():
    with pytest.raises(ConfigError, match="cannot be pickled"):
        ProcessCage(_unpicklable_factory(), 1)


def _mixed_factory(counter=[0]):  # noqa: B006 (state on purpose: second env differs)
    counter[0] += 1
    return CountingEnv(action="box" if counter[0] % 2 == 0 else "discrete")


def test_envs_with_different_spaces_fail():
    with pytest.raises(SpaceMismatchError, match="action space"):
        SerialCage(_mixed_factory, 2)


def test_bad_config_is_refused():
    with pytest.raises(ConfigError):
        SerialCage(CountingEnv, 0)
    with pytest.raises(ConfigError):
        SerialCage(CountingEnv, 1, options=CageOptions(reset_mode="never"))
    with pytest.raises(ConfigError):
        ProcessCage(CountingEnv, 2, layout=ProcessLayout(main_process_envs=2))
    with pytest.raises(ConfigError):
        ProcessCage(CountingEnv, 2, on_worker_death="ignore")


@pytest.mark.parametrize("process", [False, True])
def test_env_access(process):
    make = (
        partial(fork_cage, layout=ProcessLayout(envs_per_worker=2, main_process_envs=1))
        if process
        else SerialCage
    )
    with make(CountingEnv, 4, options=CageOptions(seed=0)) as cage:
        assert cage.get_attr("min_length") == [3, 3, 3, 3]
        cage.set_attr("min_length", [1, 2, 3, 4])
        assert cage.get_attr("min_length") == [1, 2, 3, 4]
        cage.set_attr("max_length", 9, env_indices=[3])
        assert cage.call("_action_value", 2.5, env_indices=[0, 3]) == [2.5, 2.5]
        assert cage.get_attr("max_length") == [7, 7, 7, 9]
        assert [frame.shape for frame in cage.render()] == [(2, 2, 3)] * 4


def test_custom_traj_info_reads_env_info():
    class LivesInfo(TrajInfo):
        def step(self, observation, action, reward, terminated, truncated, env_info):
            super().step(observation, action, reward, terminated, truncated, env_info)
            self.extra["min_lives"] = min(
                self.extra.get("min_lives", 9), env_info["ale.lives"]
            )

    with SerialCage(
        CountingEnv, 2, options=CageOptions(seed=0, traj_info_type=LivesInfo)
    ) as cage:
        _, trajs = run(cage, T)
    assert trajs and all(tr.extra["min_lives"] in (1, 2, 3) for tr in trajs)


class _QuietCountingEnv(CountingEnv):
    """CountingEnv with empty info dicts: episodes come back through shared memory."""

    def step(self, action):
        observation, reward, terminated, truncated, _ = super().step(action)
        return observation, reward, terminated, truncated, {}


def test_episode_statistics_through_shared_memory_equal_serial():
    factory = partial(_QuietCountingEnv, min_length=1, max_length=3, terminal=False)
    with SerialCage(factory, 6, options=CageOptions(seed=2)) as cage:
        reference = run(cage, T)
    assert len(reference[1]) > 6  # several episodes end in the same step
    for layout in (
        {"layout": ProcessLayout(envs_per_worker=3)},
        {"layout": ProcessLayout(main_process_envs=2, n_workers=1)},
    ):
        with fork_cage(factory, 6, options=CageOptions(seed=2), **layout) as cage:
            assert_same(run(cage, T), reference)
