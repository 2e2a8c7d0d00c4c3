"""make_vec against SyncVectorEnv where they once differed (issue 26, defects 6 and 7).

Final observations as the envs return them, ``np_random_seed``, spaces
without fixed shape (Text, Sequence, Graph, OneOf), and errors that are
instances of the exception types gymnasium raises.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from parllel.cages import ProcessLayout
from parllel.errors import (
    CageStateError,
    ClosedCageError,
    DynamicSpaceError,
    EnvError,
    InvalidActionError,
)
from parllel.interop import make_vec
from tests.helpers.interop_envs import DynamicEnv, make_cartpole

PARALLEL = [False, True]
IDS = ["serial", "process"]


def _layout(parallel: bool) -> dict:
    return (
        {"parallel": True, "layout": ProcessLayout(n_workers=2)}
        if parallel
        else {"parallel": False}
    )


def make_blackjack() -> gym.Env:
    """Tuple observations of Python ints; episodes of a few steps."""
    return gym.make("Blackjack-v1")


def make_frozen_lake() -> gym.Env:
    """Discrete observations as Python ints."""
    return gym.make("FrozenLake-v1")


def _final_observations(envs: gym.vector.VectorEnv, steps: int) -> list:
    envs.action_space.seed(1)
    envs.reset(seed=5)
    finals = []
    for _ in range(steps):
        *_, infos = envs.step(envs.action_space.sample())
        if "final_obs" in infos:
            finals += list(infos["final_obs"][infos["_final_obs"]])
    return finals


@pytest.mark.parametrize("parallel", PARALLEL, ids=IDS)
@pytest.mark.parametrize("make_env", [make_blackjack, make_frozen_lake])
def test_final_observations_keep_the_env_types(make_env, parallel):
    mode = AutoresetMode.SAME_STEP
    reference = SyncVectorEnv([make_env] * 2, autoreset_mode=mode)
    ours = make_vec(make_env, 2, autoreset_mode=mode, **_layout(parallel))
    try:
        expected, actual = (
            _final_observations(reference, 30),
            _final_observations(ours, 30),
        )
        assert len(expected) >= 3
        assert expected == actual
        # an int stays an int (not np.int64), a tuple of ints too
        assert [repr(x) for x in expected] == [repr(x) for x in actual]
    finally:
        reference.close()
        ours.close()


@pytest.mark.parametrize("parallel", PARALLEL, ids=IDS)
def test_np_random_seed_is_the_envs_seeds(parallel):
    reference = SyncVectorEnv([make_cartpole] * 3)
    ours = make_vec(make_cartpole, 3, **_layout(parallel))
    try:
        for envs in (reference, ours):
            envs.reset(seed=42)
            assert envs.np_random_seed == (42, 43, 44)
            envs.reset()
            assert envs.np_random_seed == (42, 43, 44)
        assert len(ours.np_random) == 3
        assert all(isinstance(rng, np.random.Generator) for rng in ours.np_random)
    finally:
        reference.close()
        ours.close()


KINDS = ["text", "sequence", "graph", "oneof"]


def _assert_same_run(reference, ours, steps=9):
    reference.action_space.seed(3)
    ours.action_space.seed(3)
    assert data_equivalence(reference.reset(seed=1), ours.reset(seed=1))
    for t in range(steps):
        actions = reference.action_space.sample()
        assert data_equivalence(ours.action_space.sample(), actions)
        expected, actual = reference.step(actions), ours.step(actions)
        assert data_equivalence(expected, actual), f"step {t}"


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("kind", KINDS)
def test_spaces_without_fixed_shape_equal_sync_vector_env(kind, mode):
    def env_fn():
        return DynamicEnv(kind)

    reference = SyncVectorEnv([env_fn] * 3, autoreset_mode=AutoresetMode(mode))
    ours = make_vec(env_fn, 3, parallel=False, autoreset_mode=mode)
    try:
        assert ours.single_observation_space == reference.single_observation_space
        assert ours.observation_space == reference.observation_space
        assert ours.action_space == reference.action_space
        _assert_same_run(reference, ours)
    finally:
        reference.close()
        ours.close()


def make_text_env() -> gym.Env:
    return DynamicEnv("text")


def make_graph_observing_env() -> gym.Env:
    return DynamicEnv("graph", fixed_actions=True)


def test_process_cages_refuse_actions_without_fixed_shape():
    with pytest.raises(DynamicSpaceError) as caught:
        make_vec(make_text_env, 2, parallel=True, layout=ProcessLayout(n_workers=2))
    # gymnasium's own words (its tests skip such spaces on them), and a TypeError
    assert isinstance(caught.value, TypeError)
    assert (
        "has a dynamic shape so its not possible to make a static shared memory."
        in (str(caught.value))
    )
    assert "parallel=False" in str(caught.value)


def test_process_cages_carry_observations_without_fixed_shape():
    reference = SyncVectorEnv([make_graph_observing_env] * 2)
    ours = make_vec(
        make_graph_observing_env, 2, parallel=True, layout=ProcessLayout(n_workers=2)
    )
    try:
        _assert_same_run(reference, ours, steps=6)
    finally:
        reference.close()
        ours.close()


# -- exception types ----------------------------------------------------------------------
class ValueErrorEnv(gym.Env):
    """Raises ValueError in its second step (the first one is fine)."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return 0, {}

    def step(self, action):
        self.steps += 1
        if self.steps > 1:
            raise ValueError("no second step")
        return 0, 0.0, False, False, {}


@pytest.mark.parametrize("parallel", PARALLEL, ids=IDS)
def test_errors_are_also_gymnasiums_exception_types(parallel):
    envs = make_vec(ValueErrorEnv, 4, **_layout(parallel))
    try:
        envs.reset()
        with pytest.raises(TypeError) as scalar:  # as SyncVectorEnv raises
            envs.step(0)
        assert isinstance(scalar.value, InvalidActionError)
        with pytest.raises(ValueError, match=r"expected \(4,\)"):
            envs.step(np.zeros(3, np.int64))
        with pytest.raises(gym.error.NoAsyncCallError) as no_call:
            envs.step_wait()
        assert isinstance(no_call.value, CageStateError)
        envs.step_async(np.zeros(4, np.int64))
        with pytest.raises(gym.error.AlreadyPendingCallError):
            envs.reset()
        envs.step_wait()
        # the env's own ValueError, as SyncVectorEnv lets it through, chained
        # from parllel's EnvError (which names the env)
        with pytest.raises(ValueError, match="no second step") as raised:
            envs.step(np.zeros(4, np.int64))
        assert type(raised.value) is ValueError
        assert isinstance(raised.value.__cause__, EnvError)
        assert "env 0" in str(raised.value.__cause__)
    finally:
        envs.close()
    with pytest.raises(gym.error.ClosedEnvironmentError) as closed:
        envs.reset()
    assert isinstance(closed.value, ClosedCageError)
