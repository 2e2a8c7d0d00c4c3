"""Replies and requests of any size cross the pipes between processes (issue 26).

A worker used to send its replies before it released ``work_done`` while
the main process read the pipe only after acquiring it, and the main
process sent its requests before releasing ``command_ready`` while the
worker read them only after: anything larger than a pipe's buffer (~250 KB)
hung both sides for good. Each test here hung on that code (pytest-timeout
turns the hang into a failure).
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np
import pytest

from parllel import fields
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.samplers.background import BackgroundSampler
from tests.helpers.big_reply_envs import (
    FRAME_SHAPE,
    TEN_MB,
    build_big_episode_sampler,
    pattern,
    tagged_envs,
)
from tests.helpers.cage_helpers import allocate

N_ENVS = 4
MB = 1_000_000

# workers only, and the main process's share (env 0) next to workers
CAGES = {
    "workers": partial(
        ProcessCage, layout=ProcessLayout(envs_per_worker=2), start_method="fork"
    ),
    "main-share": partial(
        ProcessCage,
        layout=ProcessLayout(main_process_envs=1, n_workers=2),
        start_method="fork",
    ),
}


@pytest.fixture(params=list(CAGES))
def make_cage(request):
    return CAGES[request.param]


def reversed_big(env, offset: int) -> np.ndarray:
    """A 10 MB result of ``apply`` (the env's state, reversed, shifted)."""
    return env.big[::-1] + np.uint8(offset)


def checksum(env, array: np.ndarray) -> int:
    """A small result of ``apply`` that proves a 10 MB argument arrived whole."""
    return int(array.sum(dtype=np.int64)) + env.tag


@pytest.mark.timeout(60)
def test_ten_mb_replies_through_call_get_attr_render_and_apply(make_cage):
    with make_cage(
        tagged_envs(N_ENVS, state_bytes=TEN_MB), N_ENVS, options=CageOptions(seed=0)
    ) as cage:
        for i, blob in enumerate(cage.call("blob", TEN_MB)):
            np.testing.assert_array_equal(blob, pattern(TEN_MB, i))
        for i, big in enumerate(cage.get_attr("big", env_indices=[3, 1])):
            np.testing.assert_array_equal(big, pattern(TEN_MB, [3, 1][i]))
        frames = cage.render()
        assert [frame.shape for frame in frames] == [FRAME_SHAPE] * N_ENVS
        assert [int(frame[0, 0, 0]) for frame in frames] == list(range(N_ENVS))
        assert [f.shape for f in cage.call("render", env_indices=[2])] == [FRAME_SHAPE]
        for i, result in enumerate(cage.apply(reversed_big, 1)):
            np.testing.assert_array_equal(result, pattern(TEN_MB, i)[::-1] + 1)
        # the workers are still in step with the main process afterwards
        assert cage.get_attr("tag") == list(range(N_ENVS))


@pytest.mark.timeout(60)
def test_ten_mb_arguments_and_values_reach_the_workers(make_cage):
    with make_cage(tagged_envs(N_ENVS), N_ENVS, options=CageOptions(seed=0)) as cage:
        values = [pattern(TEN_MB, 10 + i) for i in range(N_ENVS)]
        cage.set_attr("big", values)
        for i, big in enumerate(cage.get_attr("big")):
            np.testing.assert_array_equal(big, values[i])
        argument = pattern(TEN_MB, 5)
        total = int(argument.sum(dtype=np.int64))
        assert cage.apply(checksum, argument) == [total + i for i in range(N_ENVS)]
        small = [list(blob) for blob in cage.call("blob", 3)]
        assert small == [list(pattern(3, i)) for i in range(N_ENVS)]


def step_slots(tree, t: int) -> dict:
    """Step slots without env-info slots (every info entry is kept as it is)."""
    return {
        fields.OBSERVATION: tree.observation[t + 1],
        fields.REWARD: tree.reward[t],
        fields.TERMINATED: tree.terminated[t],
        fields.TRUNCATED: tree.truncated[t],
        fields.FINAL_OBSERVATION: tree.final_observation[t],
    }


@pytest.mark.timeout(60)
def test_megabyte_step_and_reset_infos_are_kept_and_reach_episodes(make_cage):
    factories = tagged_envs(N_ENVS, info_bytes=MB, final_info_bytes=MB)
    with make_cage(
        factories, N_ENVS, options=CageOptions(seed=0, keep_infos=True)
    ) as cage:
        tree = allocate(cage, 3)
        try:
            cage.reset(tree.observation[0])
            for i in range(N_ENVS):
                reset_blob = cage.last_infos.reset[i]["reset_blob"]
                np.testing.assert_array_equal(reset_blob, pattern(MB, i))
            completed = []
            for t in range(3):
                completed += cage.step(tree.action[t], step_slots(tree, t))
                for i in range(N_ENVS):
                    blob = cage.last_infos.step[i]["blob"]
                    np.testing.assert_array_equal(blob, pattern(MB, t + 1))
        finally:
            tree.close()
        # the episodes' last infos reach their TrajInfos (Episodes replies)
        assert sorted(traj.env_index for traj in completed) == list(range(N_ENVS))
        for traj in completed:
            final = traj.extra["final_blob"]
            np.testing.assert_array_equal(final, pattern(MB, traj.env_index))


class ScriptedBalancer:
    """Proposes the planned move after step ``n`` (``plan[n]``)."""

    def __init__(self, plan: dict[int, tuple[int, int, int]]) -> None:
        self.plan = plan
        self.steps = 0

    def propose(self, seconds, counts):
        self.steps += 1
        return self.plan.get(self.steps)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("main_process_envs", [0, 1])
def test_envs_with_ten_mb_state_move_between_processes(main_process_envs):
    # processes in env order; moves both ways, through every neighbour pair
    plan = {1: (1, 0, 1), 2: (0, 1, 1), 3: (2, 1, 1), 4: (1, 2, 1)}
    n_workers = 3 - (main_process_envs > 0)
    with ProcessCage(
        tagged_envs(6, state_bytes=TEN_MB),
        6,
        options=CageOptions(seed=0),
        layout=ProcessLayout(
            main_process_envs=main_process_envs,
            n_workers=n_workers,
            rebalance=ScriptedBalancer(plan),
        ),
        start_method="fork",
    ) as cage:
        with SerialCage(tagged_envs(6), 6, options=CageOptions(seed=0)) as serial:
            reference = allocate(serial, 5, storage="local")
            tree = allocate(cage, 5)
            try:
                for stepped, out in ((serial, reference), (cage, tree)):
                    stepped.reset(out.observation[0])
                    for t in range(5):
                        stepped.step(out.action[t], step_slots(out, t))
                np.testing.assert_array_equal(
                    tree.observation.padded_ndarray(),
                    reference.observation.padded_ndarray(),
                )
            finally:
                tree.close()
                reference.close()
        assert cage._balancer is not None  # every move happened
        assert cage.get_attr("tag") == list(range(6))
        for i, big in enumerate(cage.get_attr("big")):
            np.testing.assert_array_equal(big, pattern(TEN_MB, i))


# -- in the background sampler's process ---------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("main_share", [False, True], ids=["workers", "main-share"])
def test_big_episode_infos_reach_the_learner_from_a_background_sampler(main_share):
    # the cage's workers reply to the background process with 3 MB episodes,
    # which sends ~18 MB per batch on to the learner
    size = 3 * MB
    background = BackgroundSampler(
        build_big_episode_sampler, 0, size, main_share, max_lag=0
    )
    try:
        for _ in range(2):
            completed = background.collect_batch().completed
            assert sorted(traj.env_index for traj in completed) == [0, 0, 1, 1, 2, 2]
            for traj in completed:
                final = traj.extra["final_blob"]
                np.testing.assert_array_equal(final, pattern(size, traj.env_index))
    finally:
        # meanwhile the background process filled the next tree and blocks
        # sending its batch message: close() must not wait close_timeout (30 s)
        start = time.monotonic()
        background.close()
        closing = time.monotonic() - start
    assert closing < 10
