"""EnvPoolCage's seeds, resets, refusals and errors (EnvPool 1.2.5's rules)."""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from parllel.cages import CageOptions

envpool = pytest.importorskip("envpool")

from parllel.errors import (  # noqa: E402
    CageStateError,
    ConfigError,
    MissingDependencyError,
)
from parllel.interop import EnvPoolCage, make_envpool_cage  # noqa: E402
from parllel.seeding import Seeds  # noqa: E402
from tests.helpers.cage_helpers import allocate, slots  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# -- seeds ------------------------------------------------------------------------


def test_seeds_are_the_pools_and_a_different_seed_is_refused():
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=7)
    with EnvPoolCage(pool) as cage:
        assert cage.env_seeds == (7, 8, 9)  # EnvPool: env i gets seed + i
    seeds = Seeds.from_master(3, 3).envs
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=list(seeds))
    with EnvPoolCage(
        pool, options=CageOptions(seed=3)
    ) as cage:  # the master of the pool's seeds
        assert cage.env_seeds == seeds
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=7)
    with pytest.raises(ConfigError, match="EnvPool seeds its envs only when"):
        EnvPoolCage(
            pool, options=CageOptions(seed=7)
        )  # a master seed 7 is not seed + i
    with EnvPoolCage(pool, options=CageOptions(seed=[7, 8, 9])) as cage:
        assert cage.env_seeds == (7, 8, 9)


def test_env_offset_takes_the_seeds_of_its_envs():
    with make_envpool_cage(
        "CartPole-v1", 2, options=CageOptions(seed=1, env_offset=2)
    ) as cage:
        assert cage.env_seeds == Seeds.from_master(1, 4).envs[2:]
        assert cage.env_indices == range(2, 4)


def test_unseeded_cage_records_fresh_seeds():
    with (
        make_envpool_cage("CartPole-v1", 2) as a,
        make_envpool_cage("CartPole-v1", 2) as b,
    ):
        assert a.env_seeds != b.env_seeds and len(a.env_seeds) == 2


def test_reset_cannot_reseed_nor_take_options():
    with make_envpool_cage("CartPole-v1", 2, options=CageOptions(seed=0)) as cage:
        obs = np.zeros((2, 4), np.float32)
        with pytest.raises(ConfigError, match="cannot reseed"):
            cage.reset(obs, seeds=[1, 2])
        with pytest.raises(ConfigError, match="take no options"):
            cage.reset(obs, options={"x": 1})
        cage.reset(obs, seeds=[None, None])  # no seed asked for: fine


# -- resets -------------------------------------------------------------------------


def test_partial_reset_equals_envpool_reset_of_those_envs():
    seeds = list(Seeds.from_master(2, 4).envs)
    reference = envpool.make_gymnasium("CartPole-v1", num_envs=4, seed=seeds)
    reference.reset()
    expected, info = reference.reset(np.array([3, 1], np.int32))
    reference.close()
    with make_envpool_cage(
        "CartPole-v1", 4, options=CageOptions(seed=2, keep_infos=True)
    ) as cage:
        obs = np.zeros((4, 4), np.float32)
        cage.reset(obs)
        assert cage.waiting_envs() == []
        before = obs.copy()
        cage.reset(obs, env_indices=[3, -3])  # env 1, counted from the end
        order = {int(e): j for j, e in enumerate(info["env_id"])}
        np.testing.assert_array_equal(obs[3], expected[order[3]])
        np.testing.assert_array_equal(obs[1], expected[order[1]])
        np.testing.assert_array_equal(obs[[0, 2]], before[[0, 2]])
        assert sorted(cage.last_infos.reset) == [1, 3]
        assert "env_id" not in cage.last_infos.reset[1]


def test_step_before_reset_and_wait_mode_are_refused():
    with make_envpool_cage("CartPole-v1", 2, options=CageOptions(seed=0)) as cage:
        tree = allocate(cage, 1, storage="local")
        with pytest.raises(CageStateError, match="before its first reset"):
            cage.step(tree.action[0], slots(tree, 0))
        tree.close()
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=2)
    with pytest.raises(ConfigError, match="reset_mode='wait'"):
        EnvPoolCage(pool, options=CageOptions(reset_mode="wait"))
    pool.close()


# -- what is refused ----------------------------------------------------------------


def test_pools_the_cage_cannot_step_are_refused():
    with pytest.raises(ConfigError, match="make_gymnasium"):
        EnvPoolCage(gym.make("CartPole-v1"))
    dm_pool = envpool.make_dm("CartPole-v1", num_envs=2)
    with pytest.raises(ConfigError, match="dm_env API"):
        EnvPoolCage(dm_pool)
    dm_pool.close()
    async_pool = envpool.make_gymnasium("CartPole-v1", num_envs=4, batch_size=2)
    with pytest.raises(ConfigError, match="asynchronous"):
        EnvPoolCage(async_pool)
    assert not async_pool.closed  # a refused pool is left to its owner
    async_pool.close()
    closed = envpool.make_gymnasium("CartPole-v1", num_envs=2)
    closed.close()
    with pytest.raises(ConfigError, match="closed"):
        EnvPoolCage(closed)
    # env_type="gym" is EnvPool's gymnasium API in 1.2.5: accepted
    with EnvPoolCage(envpool.make("CartPole-v1", env_type="gym", num_envs=2)):
        pass


def test_make_envpool_cage_refuses_what_it_sets_itself():
    for key in ("num_envs", "batch_size", "env_seed", "env_type"):
        with pytest.raises(ConfigError, match="sets"):
            make_envpool_cage("CartPole-v1", 2, **{key: 1})


@pytest.mark.parametrize(
    "task_id, suggestion",
    [("ALE/Pong-v5", "did you mean 'Pong-v5'"), ("Hoper-v4", "'Hopper-v4'")],
)
def test_an_unknown_task_id_is_refused_with_the_closest_ones(task_id, suggestion):
    # gymnasium's ALE ids (make_atari_env's) carry a prefix EnvPool's lack
    with pytest.raises(ConfigError, match=f"EnvPool has no task.*{suggestion}"):
        make_envpool_cage(task_id, 2, options=CageOptions(seed=0))


def test_env_access_beyond_render_is_refused():
    with make_envpool_cage("CartPole-v1", 2, options=CageOptions(seed=0)) as cage:
        with pytest.raises(ConfigError, match="C\\+\\+"):
            cage.get_attr("gravity")
        with pytest.raises(ConfigError, match="C\\+\\+"):
            cage.set_attr("gravity", 1.0)
    pool = envpool.make_gymnasium("Pong-v5", num_envs=2, render_mode="rgb_array")
    with EnvPoolCage(pool) as cage:
        cage.reset(np.zeros((2, 4, 84, 84), np.uint8))
        frames = cage.render(env_indices=[1])
        assert len(frames) == 1 and frames[0].ndim == 3
    assert pool.closed  # the cage closed its pool


def test_missing_envpool_names_the_extra(monkeypatch):
    for name in list(sys.modules):
        if name == "envpool" or name.startswith(
            ("envpool.", "parllel.interop.envpool")
        ):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "envpool", None)
    import parllel.interop as interop

    for name in ("EnvPoolCage", "make_envpool_cage"):
        with pytest.raises(
            MissingDependencyError, match=r'pip install -e "\.\[envpool\]"'
        ):
            getattr(interop, name)


def test_vector_env_cage_refuses_an_envpool_and_names_envpool_cage():
    from parllel.interop import VectorEnvCage

    pool = envpool.make_gymnasium("CartPole-v1", num_envs=2)
    with pytest.raises(ConfigError, match="EnvPoolCage"):
        VectorEnvCage(pool)
    assert not pool.closed  # left to its owner
    pool.close()
