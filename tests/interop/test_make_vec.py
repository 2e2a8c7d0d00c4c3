"""make_vec: a parllel cage behind gymnasium's VectorEnv, exactly SyncVectorEnv."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from parllel.cages import CageOptions, ProcessLayout
from parllel.errors import (
    CageStateError,
    ClosedCageError,
    ConfigError,
    EnvError,
    InvalidActionError,
    ParllelWarning,
)
from parllel.interop import make_vec
from parllel.interop.gymnasium_vector_env import CageVectorEnv
from tests.helpers.envs import CountingEnv
from tests.helpers.interop_envs import (
    CountEnv,
    assert_same,
    make_cartpole,
    make_count_env,
    make_rich_env,
)

MODES = list(AutoresetMode)
PARALLEL = [False, True]


def _run_both(env_fn, mode, parallel, actions, n_envs=4, seed=7, masks=None):
    """Drive SyncVectorEnv and make_vec with the same calls; compare every result."""
    reference = SyncVectorEnv([env_fn] * n_envs, autoreset_mode=mode)
    ours = make_vec(env_fn, n_envs, autoreset_mode=mode, **_layout(parallel))
    try:
        assert_same(reference.reset(seed=seed), ours.reset(seed=seed))
        ends = 0
        done = np.zeros(n_envs, dtype=bool)
        for t, action in enumerate(actions):
            if mode is AutoresetMode.DISABLED and done.any():
                options = {"reset_mask": done.copy()}
                assert_same(
                    reference.reset(options=dict(options)),
                    ours.reset(options=dict(options)),
                )
            expected, actual = reference.step(action), ours.step(action)
            assert_same(expected, actual, f"step {t}")
            done = expected[2] | expected[3]
            ends += int(done.sum())
        return ends
    finally:
        reference.close()
        ours.close()


def _layout(parallel: bool) -> dict:
    """make_vec arguments: serial, or two workers (no layout measurement)."""
    return (
        {"parallel": True, "layout": ProcessLayout(n_workers=2)}
        if parallel
        else {"parallel": False}
    )


def _random_actions(space, steps, seed=0):
    space.seed(seed)
    return [space.sample() for _ in range(steps)]


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_cartpole_equals_sync_vector_env(mode, parallel):
    batch = SyncVectorEnv([make_cartpole] * 4).action_space
    ends = _run_both(make_cartpole, mode, parallel, _random_actions(batch, 120))
    assert ends >= 25  # many episode ends, truncations included (limit 12)


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_dict_observations_and_varied_infos_equal_sync_vector_env(mode, parallel):
    batch = SyncVectorEnv([make_rich_env] * 3).action_space
    ends = _run_both(make_rich_env, mode, parallel, _random_actions(batch, 40), 3)
    assert ends >= 10


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_count_env_infos_of_every_kind_equal_sync_vector_env(mode):
    # strings, nested dicts, keys present only at an episode's end, reset options
    actions = [
        np.array(a) for a in ([0, 0, 1], [1, 0, 2], [0, 2, 0], [2, 1, 1], [0, 0, 0])
    ]
    _run_both(make_count_env, mode, False, actions, n_envs=3)


# -- gymnasium's autoreset semantics, spelled out -------------------------------------
def test_next_step_resets_in_the_step_after_the_end():
    envs = make_vec(make_count_env, 2, parallel=False)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    observations, _ = envs.reset(seed=10)
    assert observations.tolist() == [10, 11]
    observations, rewards, terminated, _, _ = envs.step(np.array([1, 0]))
    assert observations.tolist() == [11, 12] and terminated.tolist() == [True, False]
    # env 0's action is ignored: it resets (no seed: count 0), reward 0, no flags
    observations, rewards, terminated, truncated, infos = envs.step(np.array([2, 0]))
    assert observations.tolist() == [0, 13]
    assert rewards.tolist() == [0.0, 0.0]
    assert not terminated.any() and not truncated.any()
    assert infos["_count"].tolist() == [False, True]  # env 0 got its reset info {}
    envs.close()


def test_same_step_returns_final_observation_and_info():
    envs = make_vec(make_count_env, 2, parallel=False, autoreset_mode="same_step")
    envs.reset(seed=0)
    observations, _, _, truncated, infos = envs.step(np.array([0, 2]))
    assert observations.tolist() == [1, 0]  # env 1 already reset
    assert truncated.tolist() == [False, True]
    assert infos["_final_obs"].tolist() == [False, True]
    assert infos["final_obs"][1] == 2
    assert infos["final_info"]["ended"].tolist() == [False, True]
    assert infos["final_info"]["_ended"].tolist() == [False, True]
    envs.close()


def test_disabled_mode_needs_an_explicit_partial_reset():
    envs = make_vec(make_count_env, 3, parallel=False, autoreset_mode="disabled")
    envs.reset(seed=0)
    envs.step(np.array([0, 1, 0]))
    with pytest.raises(CageStateError, match=r"envs \[1\].*reset_mask"):
        envs.step(np.array([0, 0, 0]))
    observations, infos = envs.reset(
        seed=[None, 40, None], options={"reset_mask": np.array([False, True, False])}
    )
    assert observations.tolist() == [1, 40, 3]  # other envs keep their observation
    observations, *_ = envs.step(np.array([0, 0, 0]))
    assert observations.tolist() == [2, 41, 4]
    envs.close()


@pytest.mark.parametrize(
    "mask, error",
    [
        ([True, False], TypeError),
        (np.array([True, False, True]), ValueError),
        (np.array([1, 0]), TypeError),
        (np.array([False, False]), ValueError),
    ],
)
def test_bad_reset_mask_is_refused_like_gymnasium(mask, error):
    envs = make_vec(make_count_env, 2, parallel=False, autoreset_mode="disabled")
    with pytest.raises(error, match="reset_mask"):
        envs.reset(options={"reset_mask": mask})
    envs.close()


# -- seeds, options, copies ----------------------------------------------------------
def test_reset_seed_gives_env_i_the_seed_plus_i():
    envs = make_vec(make_cartpole, 3, parallel=False)
    observations, _ = envs.reset(seed=100)
    for i in range(3):
        single, _ = make_cartpole().reset(seed=100 + i)
        np.testing.assert_array_equal(observations[i], single)
    envs.close()


def test_make_vec_seed_is_used_by_the_first_reset_only():
    envs = make_vec(make_count_env, 2, parallel=False, seed=5)
    assert envs.reset()[0].tolist() == [5, 6]
    assert envs.reset()[0].tolist() == [0, 0]  # later resets are unseeded
    a, b = (make_vec(make_count_env, 2, parallel=False, seed=5) for _ in range(2))
    assert a.action_space.sample().tolist() == b.action_space.sample().tolist()
    a.close(), b.close(), envs.close()


def test_reset_options_reach_every_env():
    envs = make_vec(make_count_env, 2, parallel=False)
    _, infos = envs.reset(options={"level": 3})
    assert infos["options"]["level"].tolist() == [3, 3]
    envs.close()


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_copy_false_returns_views_that_the_next_step_overwrites(parallel):
    envs = make_vec(make_count_env, 2, copy=False, **_layout(parallel))
    first, _ = envs.reset(seed=0)
    assert first.tolist() == [0, 1]
    envs.step(np.array([0, 0]))
    assert first.tolist() == [1, 2]  # the same memory
    envs.close()
    copying = make_vec(make_count_env, 2, **_layout(parallel))
    first, _ = copying.reset(seed=0)
    copying.step(np.array([0, 0]))
    assert first.tolist() == [0, 1]
    copying.close()


# -- the rest of the VectorEnv interface ------------------------------------------------
@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_spaces_attributes_calls_and_render(parallel):
    reference = SyncVectorEnv([make_cartpole] * 2)
    envs = make_vec(make_cartpole, 2, **_layout(parallel))
    assert isinstance(envs, CageVectorEnv) and envs.num_envs == 2
    assert envs.single_observation_space == reference.single_observation_space
    assert envs.single_action_space == reference.single_action_space
    assert envs.observation_space == reference.observation_space
    assert envs.action_space == reference.action_space
    assert envs.spec.id == "CartPole-v1"
    assert envs.get_attr("gravity") == (9.8, 9.8)
    envs.set_attr("gravity", [1.0, 2.0])
    assert envs.get_attr("gravity") == (1.0, 2.0)
    assert envs.call("get_wrapper_attr", "length") == (0.5, 0.5)
    envs.close()
    reference.close()


def test_render_returns_each_envs_frame():
    envs = make_vec(lambda: CountEnv(render_mode="rgb_array"), 2, parallel=False)
    assert envs.render_mode == "rgb_array"
    envs.reset(seed=3)
    frames = envs.render()
    assert [frame[0, 0, 0] for frame in frames] == [3, 4]
    envs.close()


# -- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_bad_actions_are_refused_with_clear_errors(parallel):
    envs = make_vec(make_cartpole, 3, **_layout(parallel))
    envs.reset(seed=0)
    with pytest.raises(InvalidActionError, match=r"shape \(2,\); expected \(3,\)"):
        envs.step(np.array([0, 1]))
    with pytest.raises(InvalidActionError, match="dtype float64"):
        envs.step(np.array([0.5, 1.0, 0.0]))
    envs.step(np.array([0, 1, 1]))  # nothing was stepped: still usable
    # out of the action space: CartPole's own AssertionError, chained from the
    # EnvError that names the env
    with pytest.raises(AssertionError, match="invalid") as raised:
        envs.step(np.array([0, 1, 7]))
    assert isinstance(raised.value.__cause__, EnvError)
    assert "env 2 raised AssertionError in step" in str(raised.value.__cause__)
    envs.close()


def test_call_order_and_closed_env_errors():
    envs = make_vec(make_cartpole, 2, parallel=False)
    envs.reset(seed=0)
    with pytest.raises(CageStateError, match="without step_async"):
        envs.step_wait()
    envs.step_async(np.array([0, 1]))
    with pytest.raises(CageStateError, match="step_wait"):
        envs.reset()
    envs.step_wait()
    envs.close()
    envs.close()  # idempotent
    with pytest.raises(ClosedCageError, match="closed"):
        envs.step(np.array([0, 1]))
    with pytest.raises(ClosedCageError):
        envs.reset()


def test_bad_configuration_is_refused():
    with pytest.raises(ConfigError, match="autoreset_mode must be one of"):
        make_vec(make_cartpole, 2, parallel=False, autoreset_mode="sometimes")
    with pytest.raises(ConfigError, match="'reset_mode'.*choose the cage's options"):
        make_vec(make_cartpole, 2, parallel=False, reset_mode="wait")
    with pytest.raises(ConfigError, match="'options'.*choose the cage's options"):
        make_vec(make_cartpole, 2, parallel=False, options=CageOptions())


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_an_env_that_raises_names_itself_and_nothing_hangs(parallel):
    envs = make_vec(lambda: CountingEnv(fail_at_step=3), 2, **_layout(parallel))
    envs.reset(seed=0)
    envs.step(np.array([0, 0]))
    envs.step(np.array([0, 0]))  # the probe env took no step of env 0's
    with pytest.raises(RuntimeError, match="failed on purpose") as raised:
        envs.step(np.array([0, 0]))  # the env's own error, chained from EnvError
    assert "env 0" in str(raised.value.__cause__)
    envs.close()


def _limited_cartpole(limit: int):
    return gym.make("CartPole-v1", max_episode_steps=limit)


@pytest.mark.parametrize("parallel", PARALLEL, ids=["serial", "process"])
def test_one_env_function_per_env_like_sync_vector_env(parallel):
    # CleanRL builds env i with make_env(..., i): e.g. other limits per env
    env_fns = [partial(_limited_cartpole, limit) for limit in (5, 9, 13, 500)]
    reference = SyncVectorEnv(env_fns)
    ours = make_vec(env_fns, 4, **_layout(parallel))
    try:
        assert_same(reference.reset(seed=1), ours.reset(seed=1))
        for t, actions in enumerate(_random_actions(reference.action_space, 40)):
            assert_same(reference.step(actions), ours.step(actions), f"step {t}")
        assert ours.get_attr("_max_episode_steps") == (5, 9, 13, 500)
    finally:
        reference.close()
        ours.close()


@pytest.mark.parametrize(
    "env_fn, match",
    [
        ("CartPole-v1", "env_fn must be a callable that builds one env"),
        (gym.make("CartPole-v1"), "got TimeLimit"),
        ([make_cartpole] * 3, "3 env functions for n_envs=2"),
        ([make_cartpole, "x"], "factory 1 must be callable"),
    ],
)
def test_what_is_not_an_env_function_is_refused(env_fn, match):
    with pytest.raises(ConfigError, match=match):
        make_vec(env_fn, 2, parallel=False)


def test_stepping_before_the_first_reset_is_refused():
    envs = make_vec(make_cartpole, 2, parallel=False)
    with pytest.raises(CageStateError, match=r"call reset\(\) before the first step"):
        envs.step(np.array([0, 1]))
    envs.close()


class NeedsConfiguring(gym.Env):
    """Steps only after ``set_attr("ready", True)`` (as gymnasium's own vector
    env tests configure envs after construction)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.ready = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if not self.ready:
            raise RuntimeError("configure me with set_attr('ready', True) first")
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 1.0, False, False, {}


def test_an_env_configured_after_construction_gets_a_default_layout():
    """The layout timing cannot step it: a warning and the default layout;
    the envs see nothing before the user's set_attr and reset."""
    with pytest.warns(ParllelWarning, match="could not time the envs"):
        envs = make_vec(NeedsConfiguring, 2, parallel="process", start_method="fork")
    try:
        envs.set_attr("ready", True)
        observations, _ = envs.reset(seed=0)
        _, rewards, *_ = envs.step(np.array([0, 1]))
        assert observations.shape == (2, 1) and rewards.tolist() == [1.0, 1.0]
    finally:
        envs.close()


def test_an_explicit_layout_builds_no_timing_env(recwarn):
    envs = make_vec(
        NeedsConfiguring,
        2,
        parallel="process",
        layout=ProcessLayout(n_workers=1),
        start_method="fork",
    )
    try:
        assert not [w for w in recwarn if issubclass(w.category, ParllelWarning)]
        envs.set_attr("ready", True)
        envs.reset(seed=0)
    finally:
        envs.close()
