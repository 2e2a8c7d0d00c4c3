"""The probe env: a cage's own envs see nothing before the caller's first reset.

The example step comes from one more env built by the factory (reset with
env 0's seed, stepped once, closed) in the process that builds env 0.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from parllel import fields
from parllel.cages import (
    CageOptions,
    ProcessCage,
    ProcessLayout,
    SerialCage,
    build_cage,
)
from parllel.errors import ConfigError, EnvError
from parllel.seeding import env_seed
from tests.helpers.cage_helpers import allocate, run, slots
from tests.helpers.call_log_env import BuiltLog

SEED = 21
LAYOUTS = {
    "serial": {"parallel": "serial"},
    "two_workers": {
        "parallel": "process",
        "start_method": "fork",
        "layout": ProcessLayout(n_workers=2),
    },
    "main_and_worker": {
        "parallel": "process",
        "start_method": "fork",
        "layout": ProcessLayout(n_workers=1, main_process_envs=1),
    },
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_envs_see_nothing_before_the_first_reset(layout):
    with build_cage(
        BuiltLog(max_count=5), 3, options=CageOptions(seed=SEED), **LAYOUTS[layout]
    ) as cage:
        assert cage.get_attr("calls") == [["init"]] * 3
        cage.set_attr("max_count", [2, 3, 4])  # after construction, as gymnasium's
        assert cage.example[fields.ENV_INFO] == {"count": 1}
        run(cage, 6)
        calls = cage.get_attr("calls")
    for i, env_calls in enumerate(calls):  # each env's own seed, at its first reset
        assert env_calls[:2] == ["init", ("reset", env_seed(SEED, i))]
        assert [call[0] for call in env_calls[2:]].count("step") >= 4


def test_the_probe_env_is_built_reset_with_env_0s_seed_stepped_once_and_closed():
    factory = BuiltLog(max_count=5)
    with SerialCage(factory, 3, options=CageOptions(seed=SEED)) as cage:
        assert len(factory.built) == 4  # once more than n_envs
        *envs, probe = factory.built
        assert [env.calls for env in envs] == [["init"]] * 3
        assert probe.calls[:2] == ["init", ("reset", env_seed(SEED, 0))]
        assert probe.calls[2][0] == "step" and probe.calls[3:] == ["close"]
        assert cage.example[fields.OBSERVATION].tolist() == [1.0]
        assert cage.example[fields.ACTION] == probe.calls[2][1]


def test_the_probe_action_is_the_same_in_every_layout():
    actions = []
    for layout in LAYOUTS.values():
        with build_cage(
            BuiltLog(max_count=5), 3, options=CageOptions(seed=SEED), **layout
        ) as cage:
            actions.append(cage.example[fields.ACTION])
    assert actions == [actions[0]] * len(actions)


def test_a_factory_returning_the_same_env_is_refused_without_closing_it():
    factory = BuiltLog(max_count=5)
    env = factory()
    with pytest.raises(ConfigError, match="each call must build a new env"):
        SerialCage(lambda: env, 1)
    assert env.calls == ["init", "close"]  # closed with the failed cage, not probed


def test_probe_errors_name_the_probe():
    # no max_count: the probe env's step raises
    with pytest.raises(EnvError, match="env 0 raised AttributeError in its probe step"):
        SerialCage(BuiltLog(), 2)


@pytest.mark.parametrize("layout", ["serial", "two_workers"])
def test_without_a_probe_no_env_code_runs_and_the_example_is_zeros(layout):
    factory = BuiltLog()
    kwargs = LAYOUTS[layout]
    with build_cage(
        factory, 2, options=CageOptions(seed=SEED, probe=False), **kwargs
    ) as cage:
        if layout == "serial":
            assert len(factory.built) == 2
        assert cage.get_attr("calls") == [["init"]] * 2
        example = cage.example
        assert example[fields.OBSERVATION].tolist() == [0.0]
        assert example[fields.ENV_INFO] == {} and example[fields.REWARD] == 0


def test_process_cage_probe_is_built_in_worker_0_when_the_main_process_steps_none():
    # a factory that only works in a worker process
    with ProcessCage(
        _worker_only_factory,
        2,
        layout=ProcessLayout(n_workers=2),
        options=CageOptions(seed=SEED),
        start_method="fork",
    ) as cage:
        assert cage.get_attr("calls") == [["init"]] * 2


def _worker_only_factory():
    import multiprocessing as mp

    if mp.parent_process() is None:
        raise RuntimeError("built in the main process")
    return BuiltLog(max_count=5)()


def test_knights_archers_zombies_through_the_adapter_equals_the_bare_env():
    kaz = pytest.importorskip("pettingzoo.butterfly.knights_archers_zombies_v11")
    from parllel.multiagent.parallel_env import ParallelEnvAdapter

    def make():
        return ParallelEnvAdapter(kaz.parallel_env())

    T = 60
    bare = make()
    space = bare.action_space
    space.seed(0)
    actions = [space.sample() for _ in range(T)]
    expected = [bare.reset(seed=11)[0]]
    for action in actions:
        observation, reward, terminated, truncated, _ = bare.step(action)
        expected.append((observation, np.float32(reward)))
        assert not (terminated or truncated)
    bare.close()
    with (
        SerialCage(make, 1, options=CageOptions(seed=[11])) as cage,
        allocate(cage, T) as tree,
    ):
        for t, action in enumerate(actions):
            tree.action[t] = action[None]
        cage.reset(tree.observation[0])
        np.testing.assert_array_equal(tree.observation[0][0], expected[0])
        for t in range(T):
            cage.step(tree.action[t], slots(tree, t))
            observation, reward = expected[t + 1]
            np.testing.assert_array_equal(
                tree.observation[t + 1][0], observation, err_msg=f"step {t}"
            )
            assert tree.reward[t][0] == reward, f"step {t}"


def test_box2d_env_0_equals_a_fresh_env():
    # a Box2D world survives reset(seed=...): a probe step in env 0 showed
    # after its first episode
    pytest.importorskip("Box2D")
    T = 200
    with SerialCage(
        lambda: gym.make("BipedalWalker-v3"), 2, options=CageOptions(seed=[5, 6])
    ) as cage:
        arrays, trajs = run(cage, T)
    assert [traj.env_index for traj in trajs].count(0) >= 1
    observations = arrays["observation"][1:]  # after the padding row
    fresh = gym.make("BipedalWalker-v3")
    observation, _ = fresh.reset(seed=5)
    np.testing.assert_array_equal(observations[0, 0], observation)
    for t in range(T):
        observation, reward, terminated, truncated, _ = fresh.step(
            arrays["action"][t, 0]
        )
        if terminated or truncated:  # the cage's auto reset
            observation, _ = fresh.reset()
        np.testing.assert_array_equal(
            observations[t + 1, 0], observation, err_msg=f"step {t}"
        )
        assert arrays["reward"][t, 0] == np.float32(reward), f"step {t}"
