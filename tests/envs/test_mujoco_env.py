"""make_mujoco_env: HalfCheetah without MuJoCo's settotalmass notice; other
MuJoCo warnings still print."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest

mujoco = pytest.importorskip("mujoco", reason="needs the mujoco extra")

from parllel.envs.mujoco import (  # noqa: E402
    make_mujoco_env,
    muted_settotalmass_warning,
)


@pytest.mark.parametrize("env_id", ["HalfCheetah-v4", "HalfCheetah-v5"])
def test_half_cheetah_is_built_without_a_notice(env_id, capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Python warning either
        for _ in range(2):
            env = make_mujoco_env(env_id, max_episode_steps=5)
            env.reset(seed=0)
            env.close()
    assert "settotalmass" not in capfd.readouterr().err
    assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handler again


def test_gym_make_prints_the_notice_this_mutes(capfd):
    gym.make("HalfCheetah-v5").close()
    assert "settotalmass" in capfd.readouterr().err


def test_other_mujoco_warnings_still_print(capfd):
    with muted_settotalmass_warning():
        mujoco.get_mju_user_warning()("another MuJoCo warning")
    assert capfd.readouterr().err == "WARNING: another MuJoCo warning\n\n"
