"""Negative env indices in the adapters count from the end, as in DummyVecEnv (issue 26).

SB3's ``env_method(..., indices=[-1])`` through make_sb3_vec_env changed
env 1 of 4 (the last env of the main process's share) or failed inside a
process cage without a share.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from parllel.cages import CageOptions, ProcessLayout
from parllel.errors import EnvIndexError
from parllel.interop import VectorEnvCage, make_sb3_vec_env
from tests.helpers.envs import CountingEnv

N_ENVS = 4
LAYOUTS = {
    "serial": {"parallel": False},
    "workers": {
        "parallel": True,
        "start_method": "fork",
        "layout": ProcessLayout(n_workers=2),
    },
    "main-share": {
        "parallel": True,
        "start_method": "fork",
        "layout": ProcessLayout(n_workers=2, main_process_envs=2),
    },
}
INDICES = [[-1], -1, [-4, -1], [0, -2, 3], None]


def make_wrapped_counting() -> gym.Env:
    """A CountingEnv behind a TimeLimit (its attributes live on the inner env)."""
    return gym.wrappers.TimeLimit(CountingEnv(), max_episode_steps=100)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sb3_negative_indices_reach_the_envs_dummy_vec_env_reaches(layout):
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    reference = vec_env.DummyVecEnv([make_wrapped_counting] * N_ENVS)
    ours = make_sb3_vec_env(make_wrapped_counting, N_ENVS, **LAYOUTS[layout])
    try:
        for k, indices in enumerate(INDICES):
            for venv in (reference, ours):
                venv.set_attr("min_length", 20 + k, indices=indices)
                venv.env_method(
                    "set_wrapper_attr", "max_length", 30 + k, indices=indices
                )
            assert ours.get_attr("min_length") == reference.get_attr("min_length")
            assert ours.get_attr("max_length", indices) == reference.get_attr(
                "max_length", indices
            )
            assert ours.env_method(
                "get_wrapper_attr", "max_length", indices=indices
            ) == reference.env_method("get_wrapper_attr", "max_length", indices=indices)
            assert ours.env_is_wrapped(
                gym.wrappers.TimeLimit, indices
            ) == reference.env_is_wrapped(gym.wrappers.TimeLimit, indices)
        assert ours.get_attr("max_length") == [34] * N_ENVS  # indices None: all
        for bad in ([N_ENVS], [-N_ENVS - 1]):
            with pytest.raises(IndexError):
                reference.env_method("get_wrapper_attr", "max_length", indices=bad)
            with pytest.raises(EnvIndexError, match="out of range"):
                ours.env_method("get_wrapper_attr", "max_length", indices=bad)
            with pytest.raises(IndexError):
                ours.get_attr("max_length", bad)
            with pytest.raises(IndexError):
                ours.set_attr("max_length", 1, bad)
    finally:
        reference.close()
        ours.close()


def test_vector_env_cage_counts_negative_indices_from_the_end():
    vector_env = SyncVectorEnv(
        [make_wrapped_counting] * N_ENVS, autoreset_mode=AutoresetMode.SAME_STEP
    )
    with VectorEnvCage(vector_env, options=CageOptions(seed=0)) as cage:
        cage.set_attr("max_length", [10, 11, 12, 13])
        cage.set_attr("max_length", 99, env_indices=[-1])
        assert cage.get_attr("max_length") == [10, 11, 12, 99]
        assert cage.get_attr("max_length", env_indices=[-4, -2]) == [10, 12]
        assert cage.call("get_wrapper_attr", "max_length", env_indices=[-3]) == [11]
        assert cage.apply(lambda env: env.unwrapped.max_length, env_indices=[-1]) == [
            99
        ]
        with pytest.raises(EnvIndexError, match=r"\[-5\] out of range"):
            cage.get_attr("max_length", env_indices=[-5])
