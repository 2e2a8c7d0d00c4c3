"""The adapters' envs see nothing before the first reset: exactly SyncVectorEnv / DummyVecEnv.

Box2D worlds survive ``reset(seed=...)``, so an env that took a probe step
before the caller's first reset drifts from gymnasium's own vector env
within a few dozen steps; an env that needs ``set_attr`` before it can step
(gymnasium's autoreset tests) failed the probe step.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from parllel.cages import CageOptions, SerialCage
from parllel.interop import VectorEnvCage, make_sb3_vec_env, make_vec
from parllel.seeding import env_seed
from tests.helpers.cage_helpers import run
from tests.helpers.call_log_env import BuiltLog, CallLogEnv
from tests.helpers.interop_envs import assert_same
from tests.interop.test_make_vec import _layout, _random_actions
from tests.interop.test_make_vec import _run_both as run_make_vec_and_sync

pytest.importorskip("Box2D")

SAME = AutoresetMode.SAME_STEP
MODES = [AutoresetMode.NEXT_STEP, SAME]
PARALLEL = [False, True]
# Box2D walkers in worker processes take ~5 s a test: those variants are slow;
# the serial ones and the process variants of the set_attr test run by default
PARALLEL_SLOW_PROCESS = [
    pytest.param(False, id="serial"),
    pytest.param(True, id="process", marks=pytest.mark.slow),
]


def make_walker():
    return gym.make("BipedalWalker-v3")


@pytest.mark.parametrize("mode", MODES, ids=["next_step", "same_step"])
@pytest.mark.parametrize("parallel", PARALLEL_SLOW_PROCESS)
def test_bipedal_walker_equals_sync_vector_env(mode, parallel):
    space = gym.spaces.Box(-1, 1, (2, 4), np.float32)
    actions = _random_actions(space, 200)
    run_make_vec_and_sync(make_walker, mode, parallel, actions, n_envs=2, seed=3)


@pytest.mark.parametrize("parallel", PARALLEL_SLOW_PROCESS)
def test_bipedal_walker_equals_dummy_vec_env(parallel):
    sb3_vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    reference = sb3_vec_env.DummyVecEnv([make_walker] * 2)
    ours = make_sb3_vec_env(make_walker, 2, **_layout(parallel))
    try:
        assert reference.seed(3) == ours.seed(3)
        assert_same(reference.reset(), ours.reset())
        for t, action in enumerate(
            _random_actions(gym.spaces.Box(-1, 1, (2, 4), np.float32), 200)
        ):
            assert_same(reference.step(action), ours.step(action), f"step {t}")
    finally:
        reference.close()
        ours.close()


def _count_env():
    return CallLogEnv()


@pytest.mark.parametrize("mode", MODES, ids=["next_step", "same_step"])
@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_set_attr_before_the_first_reset_like_gymnasiums_autoreset_tests(
    mode, parallel
):
    reference = SyncVectorEnv([_count_env] * 3, autoreset_mode=mode)
    ours = make_vec(_count_env, 3, autoreset_mode=mode, **_layout(parallel))
    try:
        assert ours.get_attr("calls") == (["init"],) * 3  # nothing before set_attr
        for venv in (reference, ours):
            venv.set_attr("max_count", [2, 3, 3])
        assert_same(reference.reset(seed=5), ours.reset(seed=5))
        for t in range(8):
            action = np.array([t % 3, 1, 2])
            assert_same(reference.step(action), ours.step(action), f"step {t}")
        assert ours.get_attr("calls") == reference.get_attr("calls")
    finally:
        reference.close()
        ours.close()


@pytest.mark.parametrize("adapter", ["make_vec", "make_sb3_vec_env"])
def test_the_adapters_build_no_probe_env(adapter):
    factory = BuiltLog()
    build = make_vec if adapter == "make_vec" else make_sb3_vec_env
    venv = build(factory, 3, parallel=False)
    try:
        assert [env.calls for env in factory.built] == [["init"]] * 3
    finally:
        venv.close()


def _seeded_action_space_walker():
    # gymnasium's tests (make_env(..., seed=123)): the factory seeds the space
    env = make_walker()
    env.action_space.seed(123)
    return env


@pytest.mark.parametrize("parallel", PARALLEL_SLOW_PROCESS)
def test_action_space_samples_equal_sync_vector_env(parallel):
    reference = SyncVectorEnv([_seeded_action_space_walker] * 2)
    ours = make_vec(_seeded_action_space_walker, 2, **_layout(parallel))
    try:
        for space in ("action_space", "single_action_space"):
            expected = [getattr(reference, space).sample() for _ in range(50)]
            actual = [getattr(ours, space).sample() for _ in range(50)]
            assert_same(expected, actual, space)
    finally:
        reference.close()
        ours.close()


def test_action_space_seeded_by_make_vec_equals_a_seeded_sync_vector_env():
    reference = SyncVectorEnv([make_walker] * 2)
    reference.action_space.seed(9)
    ours = make_vec(make_walker, 2, parallel=False, seed=9)
    try:
        expected = [reference.action_space.sample() for _ in range(50)]
        assert_same(expected, [ours.action_space.sample() for _ in range(50)])
    finally:
        reference.close()
        ours.close()


# -- VectorEnvCage: a probe env from env_fns[0] -------------------------------------


def test_vector_env_cage_leaves_a_sync_vector_env_alone_before_the_first_reset():
    factory = BuiltLog(max_count=4)
    venv = SyncVectorEnv([factory] * 3, autoreset_mode=AutoresetMode.SAME_STEP)
    with VectorEnvCage(venv, options=CageOptions(seed=4)) as cage:
        assert [env.calls for env in venv.envs] == [["init"]] * 3
        probe = factory.built[-1]  # built after the vector env's envs, then closed
        seed_0 = env_seed(4, 0)
        assert probe.calls[:2] == ["init", ("reset", seed_0)]
        assert probe.calls[-1] == "close" and len(probe.calls) == 4
        assert set(cage.example["env_info"]) == {"count"}
        run(cage, 6)
        assert [env.calls[1] for env in venv.envs] == [
            ("reset", env_seed(4, i)) for i in range(3)
        ]


def test_vector_env_cage_over_bipedal_walker_equals_serial_cage():
    mode = AutoresetMode.SAME_STEP
    with SerialCage(make_walker, 2, options=CageOptions(seed=8)) as cage:
        expected = run(cage, 80)
    venv = SyncVectorEnv([make_walker] * 2, autoreset_mode=mode)
    with VectorEnvCage(venv, options=CageOptions(seed=8)) as cage:
        actual = run(cage, 80)
    for key in expected[0]:
        np.testing.assert_array_equal(actual[0][key], expected[0][key], err_msg=key)


def test_a_first_reset_of_some_envs_resets_all_and_keeps_the_others_seeds():
    venv = SyncVectorEnv([BuiltLog(max_count=4)] * 2, autoreset_mode=SAME)
    with VectorEnvCage(venv, options=CageOptions(seed=4)) as cage:
        observation = np.zeros((2, 1), np.float32)
        cage.reset(observation, env_indices=[1])  # gymnasium needs a full reset
        assert cage.waiting_envs() == [0]
        cage.reset(observation, env_indices=[0])
        seeds = [env_seed(4, i) for i in range(2)]
        assert [env.calls[1:] for env in venv.envs] == [
            [("reset", seeds[0]), ("reset", seeds[0])],
            [("reset", seeds[1])],
        ]
