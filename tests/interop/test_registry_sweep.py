"""Registry sweep: gymnasium's classic control, toy text and Box2D envs through make_vec.

Every registered id of those families, serial and in two worker processes,
in both autoreset modes: a few dozen random steps equal ``SyncVectorEnv``'s
bit for bit (observations, rewards, flags and infos). The serial sweep runs
by default, except for the envs that render every step; the rest is slow.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.error import DependencyNotInstalled
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from tests.interop.test_make_vec import _random_actions
from tests.interop.test_make_vec import _run_both as run_make_vec_and_sync

FAMILIES = ("classic_control", "toy_text", "box2d")
ENV_IDS = sorted(
    env_id
    for env_id, spec in gym.registry.items()
    if isinstance(spec.entry_point, str)
    and any(f"gymnasium.envs.{family}" in spec.entry_point for family in FAMILIES)
)
SLOW_SERIAL = {"CarRacing-v3"}  # renders its observation every step
N_ENVS, STEPS, SEED = 3, 40, 17


def _env_fn(env_id: str):
    return lambda: gym.make(env_id)


def _sweep(env_id: str, mode: AutoresetMode, parallel: bool) -> None:
    try:
        env = gym.make(env_id)
    except DependencyNotInstalled as exc:
        pytest.skip(f"{env_id}: {exc}")
    space = batch_space(env.action_space, N_ENVS)
    env.close()
    actions = _random_actions(space, STEPS)
    run_make_vec_and_sync(_env_fn(env_id), mode, parallel, actions, N_ENVS, SEED)


def _cases(parallel: bool):
    for env_id in ENV_IDS:
        for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            slow = parallel or env_id in SLOW_SERIAL
            marks = [pytest.mark.slow] if slow else []
            yield pytest.param(env_id, mode, marks=marks, id=f"{env_id}-{mode.value}")


def test_the_sweep_covers_every_family():
    assert {"CartPole-v1", "FrozenLake-v1", "BipedalWalker-v3"} <= set(ENV_IDS)


@pytest.mark.parametrize(("env_id", "mode"), list(_cases(parallel=False)))
def test_serial_make_vec_equals_sync_vector_env(env_id, mode):
    _sweep(env_id, mode, parallel=False)


@pytest.mark.parametrize(("env_id", "mode"), list(_cases(parallel=True)))
def test_process_make_vec_equals_sync_vector_env(env_id, mode):
    _sweep(env_id, mode, parallel=True)
