"""What adapters need from a cage: next_step resets, kept infos, reset seeds and
options, functions run on the envs; serial and process cages agree exactly."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from parllel import fields
from parllel.cages import (
    CageOptions,
    PerEnvFactories,
    ProcessCage,
    ProcessLayout,
    SerialCage,
)
from parllel.cages.env_info import KeptInfos
from parllel.errors import ConfigError, EnvError
from parllel.tree import ArrayDict, buffer_from_example
from tests.helpers.interop_envs import CountEnv, make_count_env

LAYOUTS = {
    "serial": lambda **kw: SerialCage(make_count_env, 4, **kw),
    "workers": lambda **kw: ProcessCage(
        make_count_env, 4, layout=ProcessLayout(n_workers=2), **kw
    ),
    "main+worker": lambda **kw: ProcessCage(
        make_count_env, 4, layout=ProcessLayout(n_workers=1, main_process_envs=2), **kw
    ),
}


def _slots(cage):
    storage = "shared" if cage.needs_shared_memory else "local"
    tree = ArrayDict(
        {
            key: buffer_from_example(value, (cage.n_envs,), storage)
            for key, value in {
                fields.ACTION: np.int64(0),
                fields.OBSERVATION: np.int64(0),
                fields.REWARD: np.float64(0),
                fields.TERMINATED: False,
                fields.TRUNCATED: False,
                fields.FINAL_OBSERVATION: np.int64(0),
            }.items()
        }
    )
    return tree


def _script(cage):
    """Reset with seeds and options, then step a fixed action script; record all."""
    tree = _slots(cage)
    record = []
    cage.reset(tree.observation, seeds=[10, None, 30, 40], options={"o": 1})
    record.append(("reset", tree.observation.to_ndarray().tolist(), cage.last_infos))
    for actions in ([0, 1, 2, 0], [0, 0, 0, 1], [2, 0, 1, 0], [0, 0, 0, 0]):
        tree.action[:] = actions
        trajs = cage.step(tree.action, tree)
        record.append(
            (
                tree.observation.to_ndarray().tolist(),
                tree.reward.to_ndarray().tolist(),
                tree.terminated.to_ndarray().tolist(),
                tree.truncated.to_ndarray().tolist(),
                tree.final_observation.to_ndarray().tolist(),
                cage.last_infos,
                [(t.env_index, t.length, t.terminated, t.truncated) for t in trajs],
            )
        )
    cage.reset(tree.observation, [1, 3], seeds=[7, 9])
    record.append(("partial", tree.observation.to_ndarray().tolist(), cage.last_infos))
    tree.close()
    return record


@pytest.mark.parametrize("reset_mode", ["auto", "wait", "next_step"])
def test_every_layout_keeps_the_same_infos_and_results(reset_mode):
    records = {}
    for name, build in LAYOUTS.items():
        cage = build(options=CageOptions(reset_mode=reset_mode, keep_infos=True))
        records[name] = _script(cage)
        cage.close()
    assert records["workers"] == records["serial"]
    assert records["main+worker"] == records["serial"]


def test_next_step_mode_resets_a_finished_env_instead_of_stepping_it():
    cage = SerialCage(
        make_count_env, 2, options=CageOptions(reset_mode="next_step", keep_infos=True)
    )
    tree = _slots(cage)
    cage.reset(tree.observation, seeds=[5, 6])
    tree.action[:] = [1, 0]
    (traj,) = cage.step(tree.action, tree)
    assert traj.env_index == 0 and traj.terminated and traj.length == 1
    assert tree.observation.to_ndarray().tolist() == [6, 7]  # the final observation
    assert cage.last_infos.step[0]["ended"] is True
    tree.action[:] = [2, 0]  # env 0's action is ignored
    assert cage.step(tree.action, tree) == []
    assert tree.observation.to_ndarray().tolist() == [0, 8]
    assert tree.reward.to_ndarray().tolist() == [0.0, 0.0]
    assert not tree.terminated.to_ndarray().any()
    assert not tree.truncated.to_ndarray().any()
    assert 0 not in cage.last_infos.step and 1 in cage.last_infos.step
    tree.close()
    cage.close()


def test_auto_reset_keeps_the_step_and_the_reset_info():
    cage = SerialCage(make_count_env, 1, options=CageOptions(keep_infos=True))
    tree = _slots(cage)
    cage.reset(tree.observation, options={"x": 1})
    assert cage.last_infos == KeptInfos(step={}, reset={0: {"options": {"x": 1}}})
    tree.action[:] = [2]
    cage.step(tree.action, tree)
    kept = cage.last_infos
    assert kept.step[0]["ended"] is True and kept.step[0]["count"] == 1
    assert kept.reset == {}  # CountEnv's reset info without options is empty
    tree.close()
    cage.close()


def test_stepping_before_the_first_reset_is_refused_in_next_step_mode():
    cage = SerialCage(make_count_env, 1, options=CageOptions(reset_mode="next_step"))
    tree = _slots(cage)
    with pytest.raises(Exception, match="before its first reset"):
        cage.step(tree.action, tree)
    tree.close()
    cage.close()


def test_last_infos_needs_keep_infos_and_seeds_must_fit():
    cage = SerialCage(make_count_env, 2)
    with pytest.raises(ConfigError, match="keep_infos=True"):
        cage.last_infos  # noqa: B018
    tree = _slots(cage)
    with pytest.raises(ConfigError, match="3 seeds for 2 reset envs"):
        cage.reset(tree.observation, seeds=[1, 2, 3])
    with pytest.raises(ConfigError, match="one seed"):
        cage.reset(tree.observation, [0], seeds=[1, 2])
    with pytest.raises(ConfigError, match="options must be a dict"):
        cage.reset(tree.observation, options=[1])
    tree.close()
    cage.close()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_apply_runs_a_function_on_each_env_where_it_lives(layout):
    cage = LAYOUTS[layout]()
    tree = _slots(cage)
    cage.reset(tree.observation, seeds=[1, 2, 3, 4])

    def count_plus(env, extra, scale=1):
        return env.unwrapped.count * scale + extra

    assert cage.apply(count_plus, 100) == [101, 102, 103, 104]
    assert cage.apply(count_plus, 0, scale=10, env_indices=[3, 0]) == [40, 10]
    assert cage.apply(setattr, "count", 50, env_indices=[2]) == [None]
    assert cage.apply(lambda env: env.count) == [1, 2, 50, 4]
    with pytest.raises(EnvError, match="env 1 raised ZeroDivisionError"):
        cage.apply(lambda env: 1 / (env.count - 2))
    tree.close()
    cage.close()


def test_count_env_reset_echoes_options():
    assert CountEnv().reset(options={"a": 1}) == (0, {"options": {"a": 1}})


def _count_env_from(start: int):
    env = CountEnv()
    env.start = start  # tells the envs apart
    return env


@pytest.mark.parametrize("layout", ["serial", "process"])
def test_per_env_factories_build_each_env_with_its_own(layout):
    factories = PerEnvFactories([partial(_count_env_from, i * 10) for i in range(4)])
    if layout == "serial":
        cage = SerialCage(factories, 2, options=CageOptions(env_offset=2))
    else:
        cage = ProcessCage(
            factories,
            2,
            options=CageOptions(env_offset=2),
            layout=ProcessLayout(n_workers=1),
        )
    assert cage.apply(lambda env: env.start) == [20, 30]
    cage.close()
    with pytest.raises(ConfigError, match="4 env factories for envs 3..4"):
        SerialCage(factories, 2, options=CageOptions(env_offset=3))


class Float32RewardEnv(CountEnv):
    """CountEnv with np.float32 rewards of 0.1, ending after 1000 steps."""

    def step(self, action):
        count, _, _, _, info = super().step(0)
        return count, np.float32(0.1), False, count >= 1000, info


@pytest.mark.parametrize("traj_info_type", ["plain", "subclass"])
def test_episode_returns_add_float32_rewards_in_float64(traj_info_type):
    from parllel.cages import TrajInfo

    class Counting(TrajInfo):
        def step(self, *args):
            super().step(*args)

    kind = TrajInfo if traj_info_type == "plain" else Counting
    cage = SerialCage(Float32RewardEnv, 1, options=CageOptions(traj_info_type=kind))
    tree = _slots(cage)
    cage.reset(tree.observation)
    trajs = []
    for _ in range(1000):
        trajs += cage.step(tree.action, tree)
    (traj,) = trajs
    expected = 0.0
    for _ in range(1000):
        expected += float(np.float32(0.1))
    assert type(traj.return_) is float and traj.return_ == expected
    tree.close()
    cage.close()
