"""Agent spaces: one shared space, stacking over agents, and the adapters' errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from parllel import fields
from parllel.cages.env_info import numeric_info_example
from parllel.errors import (
    ConfigError,
    MismatchedAgentsError,
    ShapeError,
)
from parllel.multiagent import (
    make_aec_env_factory,
    make_parallel_env_factory,
    unstack_space,
)
from parllel.multiagent.aec_env import AECEnvAdapter
from parllel.multiagent.parallel_env import ParallelEnvAdapter
from parllel.multiagent.spaces import shared_space, stack_space, write_row
from tests.helpers.ma_envs import DropoutParallelEnv, TurnAECEnv


def test_stack_box_discrete_multidiscrete_dict():
    box = gym.spaces.Box(
        np.array([-1, 0], np.float32), np.array([1, 2], np.float32), dtype=np.float32
    )
    stacked = stack_space(box, 3)
    assert stacked.shape == (3, 2) and stacked.dtype == np.float32
    np.testing.assert_array_equal(stacked.low, [[-1, 0]] * 3)
    np.testing.assert_array_equal(stacked.high, [[1, 2]] * 3)
    assert stack_space(gym.spaces.Discrete(5), 3) == gym.spaces.MultiDiscrete([5] * 3)
    assert stack_space(gym.spaces.Discrete(5), 2).dtype == np.int64
    shifted = stack_space(gym.spaces.Discrete(3, start=1), 2)
    np.testing.assert_array_equal(shifted.start, [1, 1])
    multi = stack_space(gym.spaces.MultiDiscrete([2, 3]), 4)
    assert multi.shape == (4, 2)
    np.testing.assert_array_equal(multi.nvec, [[2, 3]] * 4)
    assert stack_space(gym.spaces.MultiBinary(3), 2).shape == (2, 3)
    mask = gym.spaces.Box(0, 1, (9,), np.int8)
    board = gym.spaces.Box(0, 1, (3, 3, 2), np.int8)
    nested = stack_space(
        gym.spaces.Dict({"observation": board, "action_mask": mask}), 2
    )
    assert nested["observation"].shape == (2, 3, 3, 2)
    assert nested["action_mask"].shape == (2, 9)
    assert nested["action_mask"].dtype == np.int8


def test_stack_rejects_other_spaces_naming_the_leaf():
    with pytest.raises(ConfigError, match="Text"):
        stack_space(gym.spaces.Text(5), 2)
    inner = gym.spaces.Dict({"pos": gym.spaces.Tuple([gym.spaces.Discrete(2)])})
    with pytest.raises(ConfigError, match="'pos'"):
        stack_space(inner, 2)


def test_shared_space_names_the_agents_that_differ():
    spaces = {"a": gym.spaces.Discrete(3), "b": gym.spaces.Discrete(3)}
    spaces["c"] = gym.spaces.Discrete(4)
    assert shared_space(["a", "b"], spaces.__getitem__, "action") == spaces["a"]
    with pytest.raises(ConfigError) as error:
        shared_space(["a", "b", "c"], spaces.__getitem__, "action")
    message = str(error.value)
    assert "'a' has Discrete(3)" in message and "'c' has Discrete(4)" in message
    assert "'b'" not in message  # b agrees with a
    assert isinstance(error.value, ConfigError)
    with pytest.raises(ConfigError, match="no agents"):
        shared_space([], spaces.__getitem__, "action")


def test_real_env_with_differing_spaces_is_refused():
    mpe = pytest.importorskip("mpe2")
    from mpe2 import simple_adversary_v3

    assert mpe is not None
    with pytest.raises(ConfigError, match="adversary_0"):
        ParallelEnvAdapter(simple_adversary_v3.parallel_env())


def test_unknown_agent_in_results_is_named():
    env = ParallelEnvAdapter(DropoutParallelEnv(bad="unknown_agent"))
    env.reset(seed=0)
    with pytest.raises(MismatchedAgentsError, match="purple"):
        env.step(np.zeros(3, np.int64))


def test_missing_flags_of_an_acting_agent_are_named():
    env = ParallelEnvAdapter(DropoutParallelEnv(bad="missing_flags"))
    env.reset(seed=0)
    with pytest.raises(MismatchedAgentsError, match="terminations.*'red'"):
        env.step(np.zeros(3, np.int64))


def test_dict_action_for_a_non_acting_agent_is_named():
    env = ParallelEnvAdapter(DropoutParallelEnv(max_life=5))
    env.reset(seed=1)
    lifetimes = env.env.lifetimes
    first_out = int(np.argmin(lifetimes))
    for _ in range(int(lifetimes.min())):  # every agent acts until the first leaves
        env.step({agent: 0 for agent in env.env.agents})
    gone = env.possible_agents[first_out]
    assert gone not in env.env.agents
    actions = {agent: 0 for agent in env.possible_agents}
    with pytest.raises(MismatchedAgentsError, match=f"'{gone}'"):
        env.step(actions)
    missing = {agent: 0 for agent in env.env.agents[1:]}
    with pytest.raises(MismatchedAgentsError, match=f"'{env.env.agents[0]}'"):
        env.step(missing)
    with pytest.raises(MismatchedAgentsError, match="purple") as error:
        env.step({"purple": 0})
    message = str(error.value)
    assert "the action names" in message and "possible_agents" in message
    assert "env returned" not in message  # the user's action, not the env's
    with pytest.raises(ShapeError, match="one row per agent"):
        env.step(np.zeros(2, np.int64))


def test_an_env_of_the_other_api_names_the_right_adapter():
    with pytest.raises(ConfigError, match="AECEnv; use AECEnvAdapter"):
        ParallelEnvAdapter(TurnAECEnv())
    with pytest.raises(ConfigError, match="ParallelEnv; use ParallelEnvAdapter"):
        AECEnvAdapter(DropoutParallelEnv())
    with pytest.raises(ConfigError, match="make_aec_env_factory"):
        make_parallel_env_factory(TurnAECEnv)()
    with pytest.raises(ConfigError, match="make_parallel_env_factory"):
        make_aec_env_factory(DropoutParallelEnv)()


def test_real_envs_of_the_other_api_are_refused_by_name():
    pytest.importorskip("pettingzoo")
    from pettingzoo.classic import rps_v2, tictactoe_v3

    with pytest.raises(ConfigError, match="tictactoe_v3 is a PettingZoo AECEnv"):
        ParallelEnvAdapter(tictactoe_v3.env())
    with pytest.raises(ConfigError, match="rps_v2 is a PettingZoo ParallelEnv"):
        AECEnvAdapter(rps_v2.parallel_env())


class _DuckAEC:
    """The AEC API without PettingZoo's classes."""

    possible_agents = ["a"]

    def agent_iter(self):
        return iter(())

    def last(self):
        return None


def test_duck_typed_aec_env_is_recognized_without_pettingzoo_classes():
    with pytest.raises(ConfigError, match="_DuckAEC is a PettingZoo AECEnv"):
        ParallelEnvAdapter(_DuckAEC())


def test_aec_dict_action_must_be_the_movers():
    env = AECEnvAdapter(TurnAECEnv())
    env.reset(seed=0)
    assert env.env.agent_selection == "red"
    with pytest.raises(MismatchedAgentsError, match="'green'"):
        env.step({"red": 0, "green": 1})
    _, _, _, _, info = env.step({"red": 1})
    np.testing.assert_array_equal(info[fields.AGENT_MASK], [True, False, False])


def test_step_after_the_episode_ended_is_refused():
    env = ParallelEnvAdapter(DropoutParallelEnv(max_life=1))
    env.reset(seed=0)
    *_, terminated, truncated, _ = env.step(np.zeros(3, np.int64))
    assert terminated or truncated
    with pytest.raises(ConfigError, match="reset"):
        env.step(np.zeros(3, np.int64))


def test_agent_info_keys_get_declared_dtypes():
    env = ParallelEnvAdapter(DropoutParallelEnv())
    env.reset(seed=0)
    info = env.step(np.zeros(3, np.int64))[-1]
    example = numeric_info_example(info)
    assert example[fields.AGENT_REWARD].dtype == np.float32
    for key in (fields.AGENT_TERMINATED, fields.AGENT_TRUNCATED, fields.AGENT_MASK):
        assert example[key].dtype == np.bool_ and example[key].shape == (3,)
    assert "agent_infos" not in example  # a nested dict: TrajInfo.extra
    overridden = numeric_info_example(info, dtypes={fields.AGENT_REWARD: np.float64})
    assert overridden[fields.AGENT_REWARD].dtype == np.float64


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(np.array([-1, 0], np.float32), np.array([1, 2], np.float32)),
        gym.spaces.Discrete(5),
        gym.spaces.Discrete(3, start=1),
        gym.spaces.MultiDiscrete([2, 3]),
        gym.spaces.MultiBinary(3),
        gym.spaces.Dict(
            {
                "observation": gym.spaces.Box(0, 1, (3, 3, 2), np.int8),
                "action_mask": gym.spaces.Box(0, 1, (9,), np.int8),
            }
        ),
    ],
)
def test_unstack_space_inverts_stack_space(space):
    assert unstack_space(stack_space(space, 3)) == space


def test_unstack_space_needs_an_agent_dimension():
    with pytest.raises(ConfigError, match="no agent dimension"):
        unstack_space(gym.spaces.Discrete(4))


def test_write_row_names_the_agent_and_the_leaf():
    stacked = {"pos": np.zeros((2, 3), np.float32), "mask": np.zeros((2, 4), np.int8)}
    write_row(stacked, 1, {"pos": np.ones(3), "mask": np.ones(4, np.int8)}, "a_1")
    assert stacked["pos"][1].tolist() == [1, 1, 1] and stacked["pos"][0].sum() == 0
    with pytest.raises(ConfigError, match=r"'a_1'.*missing leaves \['mask'\]"):
        write_row(stacked, 0, {"pos": np.ones(3)}, "a_1")
    with pytest.raises(ConfigError, match=r"'a_1'.*unknown leaves \['x'\]"):
        write_row(stacked, 0, {"pos": np.ones(3), "mask": np.ones(4), "x": 0}, "a_1")
    with pytest.raises(ConfigError, match=r"'b'.s observation at 'pos' does not"):
        write_row(stacked, 0, {"pos": np.ones(5), "mask": np.ones(4)}, "b")
