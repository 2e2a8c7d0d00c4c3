"""Every gymnasium MuJoCo v5 env trains out of the box (the ``mujoco`` extra).

No wrapper: float64 observations, normalized as they arrive. One PPO
iteration (feed-forward; recurrent on one env) and a few SAC updates per env,
in serial cages, and both in a process cage; HalfCheetah's PPO in a serial
cage is the fast case of the default run, the rest is slow (CI runs it).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.mujoco_training import MUJOCO_V5, ppo_iteration, sac_updates

pytest.importorskip("mujoco")

pytestmark = pytest.mark.timeout(300)

FAST = "HalfCheetah-v5"


def slow_unless_fast(env_ids: tuple[str, ...]) -> list:
    return [
        env_id if env_id == FAST else pytest.param(env_id, marks=pytest.mark.slow)
        for env_id in env_ids
    ]


@pytest.mark.parametrize("env_id", slow_unless_fast(MUJOCO_V5))
def test_one_ppo_iteration(env_id):
    result = ppo_iteration(env_id)
    assert result["observation_dtype"] == np.float64  # the env's, as stored
    assert result["changed"] and result["env_steps"] == 64
    assert result["normalized_count"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("env_id", MUJOCO_V5)
def test_a_few_sac_updates(env_id):
    result = sac_updates(env_id)
    assert result["observation_dtype"] == np.float64
    assert result["changed"] and result["env_steps"] == 64


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["Hopper-v5", "Ant-v5"])
def test_one_recurrent_ppo_iteration(env_id):
    result = ppo_iteration(env_id, recurrent=True)
    assert result["changed"] and result["env_steps"] == 64


@pytest.mark.slow
def test_ppo_and_sac_in_process_cages_with_float32_storage():
    result = ppo_iteration(FAST, parallel="process", observation_dtype=np.float32)
    assert result["observation_dtype"] == np.float32
    assert result["changed"]
    result = sac_updates(FAST, parallel="process")
    assert result["observation_dtype"] == np.float64
    assert result["changed"]
