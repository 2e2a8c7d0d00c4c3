"""get_attr / set_attr / call reach wrapped envs as gymnasium's wrapper rules say."""

from __future__ import annotations

import threading
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.errors import ConfigError, EnvAttributeError, EnvError
from tests.helpers.cage_helpers import allocate, slots
from tests.helpers.envs import CountingEnv

N_ENVS = 4


def make_cartpole():
    """CartPole as gym.make builds it: TimeLimit(OrderEnforcing(PassiveEnvChecker(...)))."""
    return gym.make("CartPole-v1")


def make_wrapped_counting():
    """A CountingEnv behind a TimeLimit wrapper (its methods live on the inner env)."""
    return gym.wrappers.TimeLimit(CountingEnv(), max_episode_steps=100)


def make_with_lock_attribute():
    """An env holding an attribute that cannot be pickled back to the main process."""
    env = CountingEnv()
    env.lock = threading.Lock()
    return env


# every place an env can live: this process, the main share of a process cage
# (env 0 and 1) next to workers (envs 2 and 3), workers only (forkserver)
CAGES = {
    "serial": SerialCage,
    "main-share-and-workers": partial(
        ProcessCage,
        start_method="fork",
        layout=ProcessLayout(main_process_envs=2, envs_per_worker=1),
    ),
    "workers-forkserver": partial(ProcessCage, layout=ProcessLayout(envs_per_worker=2)),
}


@pytest.fixture(params=list(CAGES))
def make_cage(request):
    return CAGES[request.param]


def test_get_attr_reaches_the_unwrapped_env(make_cage):
    with make_cage(make_cartpole, N_ENVS, options=CageOptions(seed=0)) as cage:
        assert cage.get_attr("gravity") == [9.8] * N_ENVS
        assert cage.get_attr("gravity", env_indices=[3, 0]) == [9.8, 9.8]
        # an attribute of the outermost wrapper is found there first
        assert cage.get_attr("_max_episode_steps") == [500] * N_ENVS


def test_set_attr_sets_where_the_attribute_is_defined(make_cage):
    with make_cage(make_cartpole, N_ENVS, options=CageOptions(seed=0)) as cage:
        cage.set_attr("gravity", [1.0, 2.0, 3.0, 4.0])
        assert cage.get_attr("gravity") == [1.0, 2.0, 3.0, 4.0]
        # on the unwrapped CartPoleEnv, where the physics reads it
        unwrapped = cage.get_attr("unwrapped")
        assert [env.gravity for env in unwrapped] == [1.0, 2.0, 3.0, 4.0]
        cage.set_attr("gravity", 7.5, env_indices=[1, 2])
        assert cage.get_attr("gravity") == [1.0, 7.5, 7.5, 4.0]
        # a wrapper's attribute stays on the wrapper
        cage.set_attr("_max_episode_steps", 9)
        assert cage.get_attr("_max_episode_steps") == [9] * N_ENVS
        # a name nobody defines is created on the outermost wrapper
        cage.set_attr("tag", "new")
        assert cage.get_attr("tag") == ["new"] * N_ENVS
        assert [hasattr(env, "tag") for env in cage.get_attr("unwrapped")] == [
            False
        ] * N_ENVS


def _first_observation_after_one_step(cage) -> np.ndarray:
    with allocate(cage, 1) as tree:
        cage.reset(tree.observation[0])
        cage.step(tree.action[0], slots(tree, 0))  # action 0 (zeros) for all
        return np.array(tree.observation[1])


def test_set_attr_changes_what_the_env_does(make_cage):
    with make_cage(make_cartpole, N_ENVS, options=CageOptions(seed=0)) as cage:
        default = _first_observation_after_one_step(cage)
    with make_cage(make_cartpole, N_ENVS, options=CageOptions(seed=0)) as cage:
        cage.set_attr("gravity", 50.0, env_indices=[1, 3])
        changed = _first_observation_after_one_step(cage)
    np.testing.assert_array_equal(changed[[0, 2]], default[[0, 2]])
    # the pole's angular velocity (index 3) feels the stronger gravity
    assert (np.abs(changed[[1, 3], 3] - default[[1, 3], 3]) > 1e-3).all()


def test_call_reaches_methods_of_the_inner_env(make_cage):
    with make_cage(make_wrapped_counting, N_ENVS, options=CageOptions(seed=0)) as cage:
        assert cage.call("_action_value", 2.5) == [2.5] * N_ENVS
        assert cage.call("_action_value", 1.0, env_indices=[3]) == [1.0]
        # a non-callable attribute is read, as gymnasium's vector envs do
        assert cage.call("max_length") == [7] * N_ENVS
        frames = cage.render()
        assert [frame.shape for frame in frames] == [(2, 2, 3)] * N_ENVS


def test_missing_attribute_names_the_env(make_cage):
    with make_cage(make_cartpole, N_ENVS, options=CageOptions(seed=0)) as cage:
        for index in (0, 3):
            with pytest.raises(EnvAttributeError, match="'gravty'") as info:
                cage.get_attr("gravty", env_indices=[index])
            assert info.value.env_index == index
            assert isinstance(info.value, AttributeError)
            assert "CartPoleEnv" in str(info.value)
        with pytest.raises(EnvAttributeError, match="'no_method'"):
            cage.call("no_method", 1)
        assert cage.get_attr("gravity") == [9.8] * N_ENVS  # still usable


def test_a_raising_method_is_an_env_error(make_cage):
    with make_cage(make_wrapped_counting, N_ENVS, options=CageOptions(seed=0)) as cage:
        with pytest.raises(EnvError, match="_action_value") as info:
            cage.call("_action_value", None, env_indices=[3])
        assert info.value.env_index == 3
        assert "TypeError" in str(info.value)


def test_unpicklable_reply_from_a_worker_is_an_error_not_a_death():
    with ProcessCage(
        make_with_lock_attribute,
        2,
        start_method="fork",
        layout=ProcessLayout(main_process_envs=1),
    ) as cage:
        assert cage.get_attr("lock", env_indices=[0])[0].acquire()  # main share
        with pytest.raises(EnvError, match="cannot be pickled"):
            cage.get_attr("lock", env_indices=[1])
        assert cage.get_attr("max_length") == [7, 7]  # the worker lives on
        with allocate(cage, 2) as tree:
            cage.reset(tree.observation[0])
            cage.step(tree.action[0], slots(tree, 0))


def test_set_attr_with_a_value_per_env_of_the_wrong_length_names_the_call():
    with SerialCage(make_cartpole, N_ENVS, options=CageOptions(seed=0)) as cage:
        with pytest.raises(ConfigError) as info:
            cage.set_attr("gravity", [1.0, 2.0])
        message = str(info.value)
        assert "set_attr('gravity', values): got 2 values for 4 envs" in message
        assert "one value per env" in message
        assert cage.get_attr("gravity") == [9.8] * N_ENVS  # nothing was set
