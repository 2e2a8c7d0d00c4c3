"""make_sb3_vec_env: a parllel cage behind SB3's VecEnv, exactly DummyVecEnv."""

from __future__ import annotations

from collections import OrderedDict

import gymnasium as gym
import numpy as np
import pytest

sb3_vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
DummyVecEnv = sb3_vec_env.DummyVecEnv
VecFrameStack = sb3_vec_env.VecFrameStack
VecMonitor = sb3_vec_env.VecMonitor
VecNormalize = sb3_vec_env.VecNormalize

from parllel.cages import ProcessLayout  # noqa: E402
from parllel.errors import (  # noqa: E402
    CageStateError,
    ClosedCageError,
    EnvAttributeError,
    InvalidActionError,
)
from parllel.interop import make_sb3_vec_env  # noqa: E402
from parllel.interop.sb3_vec_env import CageSB3VecEnv  # noqa: E402
from tests.helpers.interop_envs import (  # noqa: E402
    CountEnv,
    assert_same,
    imports_sb3_or_torch,
    make_cartpole,
    make_count_env,
    make_dict_action_env,
    make_rich_env,
    make_tuple_action_env,
)

PARALLEL = [False, True]


def _layout(parallel: bool) -> dict:
    """Arguments for serial, or two workers (no layout measurement)."""
    return (
        {"parallel": True, "layout": ProcessLayout(n_workers=2)}
        if parallel
        else {"parallel": False}
    )


def _stacked(space, n_envs):
    return np.stack([space.sample() for _ in range(n_envs)])


def _listed(space, n_envs):
    return [space.sample() for _ in range(n_envs)]


def _run_both(
    env_fn,
    parallel,
    steps,
    n_envs=4,
    wrap=lambda venv: venv,
    seed=3,
    actions_of=_stacked,
):
    """Drive DummyVecEnv and make_sb3_vec_env alike; compare every result.

    ``actions_of(action_space, n_envs)`` makes each step's actions.
    """
    reference = wrap(DummyVecEnv([env_fn] * n_envs))
    ours = wrap(make_sb3_vec_env(env_fn, n_envs, **_layout(parallel)))
    try:
        assert reference.seed(seed) == ours.seed(seed)
        assert_same(reference.reset(), ours.reset())
        assert_same(reference.reset_infos, ours.reset_infos)
        reference.action_space.seed(0)
        ends = 0
        for t in range(steps):
            actions = actions_of(reference.action_space, n_envs)
            expected, actual = reference.step(actions), ours.step(actions)
            # VecMonitor's episode time "t" is wall-clock time
            assert_same(expected, actual, f"step {t}", skip=("t",))
            assert_same(reference.reset_infos, ours.reset_infos)
            ends += int(expected[2].sum())
        return ends
    finally:
        reference.close()
        ours.close()


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_cartpole_equals_dummy_vec_env(parallel):
    assert _run_both(make_cartpole, parallel, 100) >= 25


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_dict_observations_equal_dummy_vec_env(parallel):
    assert _run_both(make_rich_env, parallel, 40, n_envs=3) >= 10


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_dict_observations_are_ordered_dicts_like_dummy_vec_env(parallel):
    reference = DummyVecEnv([make_rich_env] * 2)
    ours = make_sb3_vec_env(make_rich_env, 2, **_layout(parallel))
    actions = np.zeros((2, 2), np.float32)
    try:
        for expected, actual in [
            (reference.reset(), ours.reset()),
            (reference.step(actions)[0], ours.step(actions)[0]),
        ]:
            assert type(actual) is type(expected) is OrderedDict
            assert list(actual) == list(expected)
    finally:
        reference.close()
        ours.close()


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
@pytest.mark.parametrize(
    "env_fn", [make_dict_action_env, make_tuple_action_env], ids=["dict", "tuple"]
)
def test_dict_and_tuple_actions_as_lists_equal_dummy_vec_env(env_fn, parallel):
    # SB3 passes one action per env: a list of dicts / tuples
    assert _run_both(env_fn, parallel, 12, n_envs=3, actions_of=_listed) == 12


def test_actions_that_are_not_one_per_env_are_refused():
    venv = make_sb3_vec_env(make_dict_action_env, 2, parallel=False)
    venv.reset()
    with pytest.raises(InvalidActionError, match="3 actions for 2 envs"):
        venv.step([venv.action_space.sample() for _ in range(3)])
    with pytest.raises(TypeError, match="one action per env"):
        venv.step(venv.action_space.sample())  # one dict, not a list of them
    with pytest.raises(TypeError, match=r"action\[1\] must be a dict"):
        venv.step([venv.action_space.sample(), 1])
    venv.close()


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_terminal_observations_keep_the_env_types(parallel):
    def terminal_observations(venv):
        venv.seed(0)
        venv.reset()
        found = []
        for _ in range(8):
            *_, infos = venv.step(np.array([1, 0]))
            found += [
                repr(i["terminal_observation"])
                for i in infos
                if "terminal_observation" in i
            ]
        venv.close()
        return found

    expected = terminal_observations(DummyVecEnv([make_count_env] * 2))
    ours = make_sb3_vec_env(make_count_env, 2, **_layout(parallel))
    assert expected == terminal_observations(ours) == ["1"] * 8  # ints, not np.int64


def test_infos_of_every_kind_equal_dummy_vec_env():
    assert _run_both(make_count_env, False, 30, n_envs=3) >= 5


@pytest.mark.parametrize(
    "wrap",
    [
        VecNormalize,
        VecMonitor,
        lambda venv: VecFrameStack(venv, 3),
        lambda venv: VecNormalize(VecFrameStack(VecMonitor(venv), 2)),
    ],
    ids=["normalize", "monitor", "framestack", "all"],
)
def test_wrappers_see_what_they_see_on_dummy_vec_env(wrap):
    _run_both(make_cartpole, False, 60, wrap=wrap)


def test_dict_observations_under_vec_normalize_and_monitor():
    def wrap(venv):
        return VecNormalize(VecMonitor(venv), norm_obs_keys=["pos"])

    _run_both(make_rich_env, False, 30, n_envs=3, wrap=wrap)


# -- SB3's VecEnv scenarios ------------------------------------------------------------
def test_terminal_observation_and_time_limit_flag():
    venv = make_sb3_vec_env(make_count_env, 2, parallel=False, seed=0)
    assert venv.reset().tolist() == [0, 1]
    observations, rewards, dones, infos = venv.step(np.array([2, 1]))
    assert observations.tolist() == [0, 0] and dones.tolist() == [True, True]
    assert rewards.dtype == np.float32 and rewards.tolist() == [2.0, 1.0]
    assert [info["terminal_observation"] for info in infos] == [1, 2]
    assert [info["TimeLimit.truncated"] for info in infos] == [True, False]
    observations, _, dones, infos = venv.step(np.array([0, 0]))
    assert not dones.any() and "terminal_observation" not in infos[0]
    venv.close()


def test_seeding_makes_resets_reproducible():
    def first_observations(seed):
        venv = make_sb3_vec_env(make_cartpole, 3, parallel=False)
        venv.seed(seed)
        observations = venv.reset()
        venv.close()
        return observations

    np.testing.assert_array_equal(first_observations(1), first_observations(1))
    assert not np.array_equal(first_observations(1), first_observations(2))
    seeded = make_sb3_vec_env(make_count_env, 2, parallel=False, seed=7)
    assert seeded.reset().tolist() == [7, 8]
    assert seeded.reset().tolist() == [0, 0]  # seeds are used once
    seeded.close()


def test_per_env_reset_options():
    venv = make_sb3_vec_env(make_count_env, 3, parallel=False)
    venv.set_options([{"level": 1}, {}, {"level": 1}])
    venv.reset()
    assert venv.reset_infos == [
        {"options": {"level": 1}},
        {},
        {"options": {"level": 1}},
    ]
    venv.reset()
    assert venv.reset_infos == [{}, {}, {}]  # options are used once
    venv.close()


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_custom_calls(parallel):
    venv = make_sb3_vec_env(make_cartpole, 3, **_layout(parallel))
    assert isinstance(venv, CageSB3VecEnv)
    assert venv.get_attr("gravity") == [9.8] * 3
    venv.set_attr("custom", 5, indices=[0, 2])
    assert venv.get_attr("custom", indices=[0, 2]) == [5, 5]
    with pytest.raises(EnvAttributeError, match="env 1: .* has no attribute 'custom'"):
        venv.get_attr("custom", indices=1)
    assert venv.env_method("get_wrapper_attr", "length", indices=[1]) == [0.5]
    spec_ids = [spec.id for spec in venv.env_method("get_wrapper_attr", "spec")]
    assert spec_ids == ["CartPole-v1"] * 3
    assert venv.env_is_wrapped(gym.wrappers.TimeLimit) == [True] * 3
    assert venv.env_is_wrapped(gym.wrappers.RecordVideo, indices=[0]) == [False]
    if parallel:  # what the workers ran did not drag SB3 (and torch) into them
        assert venv.cage.apply(imports_sb3_or_torch) == [False] * 3
    venv.close()


def test_get_images():
    venv = make_sb3_vec_env(
        lambda: CountEnv(render_mode="rgb_array"), 2, parallel=False
    )
    venv.seed(4)
    venv.reset()
    assert [image[0, 0, 0] for image in venv.get_images()] == [4, 5]
    venv.close()
    plain = make_sb3_vec_env(make_count_env, 2, parallel=False)
    with pytest.warns(UserWarning, match="render mode"):
        assert plain.get_images() == [None, None]
    plain.close()


# -- bad input ---------------------------------------------------------------------------
def test_bad_actions_and_call_order():
    venv = make_sb3_vec_env(make_cartpole, 2, parallel=False)
    venv.reset()
    with pytest.raises(InvalidActionError, match="expected"):
        venv.step(np.array([0, 1, 1]))
    with pytest.raises(InvalidActionError, match="dtype"):
        venv.step(np.array([0.2, 1.0]))
    with pytest.raises(CageStateError, match="without step_async"):
        venv.step_wait()
    venv.step_async(np.array([0, 1]))
    with pytest.raises(CageStateError, match="step_wait"):
        venv.reset()
    venv.step_wait()
    venv.close()
    venv.close()
    with pytest.raises(ClosedCageError):
        venv.step(np.array([0, 1]))


def test_set_attr_sets_the_users_outermost_env():
    # _max_episode_steps of gym.make's TimeLimit: episodes get shorter, as with
    # DummyVecEnv (the adapter's own wrapper must not take the attribute)
    def episode_lengths(venv):
        venv.set_attr("_max_episode_steps", 3)
        venv.reset()
        dones = [venv.step(np.zeros(2, np.int64))[2] for _ in range(6)]
        venv.close()
        return np.array(dones).tolist()

    expected = episode_lengths(DummyVecEnv([make_cartpole] * 2))
    assert expected == episode_lengths(
        make_sb3_vec_env(make_cartpole, 2, parallel=False)
    )
    assert [True, True] in expected
