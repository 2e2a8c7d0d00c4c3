"""Inputs a new user plausibly gets wrong: a misspelt cage option, a PettingZoo
env without its adapter. Each gets an error naming the problem and the fix."""

from __future__ import annotations

import gymnasium as gym
import pytest

from parllel.cages import ProcessCage, ProcessLayout, SerialCage, build_cage
from parllel.errors import ConfigError, EnvError, UnknownOptionError
from parllel.interop import make_vec


def cartpole():
    return gym.make("CartPole-v1")


@pytest.mark.parametrize("parallel", ["serial", "auto", "process"])
def test_a_misspelt_option_is_refused_whatever_the_layout(parallel):
    with pytest.raises(
        UnknownOptionError, match="'n_worker' .*did you mean 'n_workers'"
    ):
        build_cage(cartpole, 2, parallel=parallel, n_worker=2)


@pytest.mark.parametrize("parallel", [False, True])
def test_make_vec_refuses_a_misspelt_option_as_a_type_error(parallel):
    with pytest.raises(TypeError, match="'step_timeot' .*'step_timeout'"):
        make_vec(cartpole, 2, parallel=parallel, step_timeot=5)


def spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env()


@pytest.mark.parametrize("n_envs", [1, 2])
def test_a_pettingzoo_env_without_its_adapter_names_the_adapter(n_envs):
    pytest.importorskip("mpe2")
    with pytest.raises(ConfigError, match="PettingZoo env.*ParallelEnvAdapter"):
        SerialCage(spread, n_envs)


@pytest.mark.timeout(60)
def test_the_worker_reports_the_adapter_hint_too():
    pytest.importorskip("mpe2")
    with pytest.raises(EnvError, match="PettingZoo env.*ParallelEnvAdapter"):
        ProcessCage(spread, 2, layout=ProcessLayout(n_workers=1))


class NotAnEnv:
    observation_space = "Box(4)"
    action_space = gym.spaces.Discrete(2)

    def close(self):
        pass


def test_an_object_without_gymnasium_spaces_is_refused():
    with pytest.raises(ConfigError, match="observation_space is str, not a gymnasium"):
        SerialCage(NotAnEnv, 1)
