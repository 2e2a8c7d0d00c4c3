"""Tuple (and nested) action spaces: random agents, decorrelation, handlers' writers."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent, ScriptedAgent
from parllel.agents.numpy_handler import write_outputs
from parllel.agents.scripted import sample_actions
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.errors import TreeStructureError
from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
from parllel.tree import buffer_from_example
from parllel.tree.nodes import tree_get
from tests.helpers.space_envs import SpaceEnv

OBSERVATION = gym.spaces.Tuple(
    (gym.spaces.Discrete(32), gym.spaces.Discrete(11), gym.spaces.Discrete(2))
)  # like Blackjack-v1
ACTION = gym.spaces.Tuple(
    (
        gym.spaces.Discrete(3, start=1),
        gym.spaces.Dict(
            {
                "force": gym.spaces.Box(-1, 1, (2,), np.float32),
                "keys": gym.spaces.MultiBinary(3),
            }
        ),
        gym.spaces.MultiDiscrete([2, 4]),
    )
)


def test_sample_actions_of_a_tuple_space_are_stacked_per_leaf():
    rng = np.random.default_rng(0)
    actions = sample_actions(ACTION, 5, rng)
    assert isinstance(actions, tuple) and len(actions) == 3
    assert actions[0].shape == (5,) and actions[0].dtype == np.int64
    assert set(actions[0].tolist()) <= {1, 2, 3}
    assert actions[1]["force"].shape == (5, 2) and actions[1]["keys"].dtype == np.int8
    assert actions[2].shape == (5, 2) and (actions[2] < [2, 4]).all()
    for i in range(5):
        one = (actions[0][i], {k: v[i] for k, v in actions[1].items()}, actions[2][i])
        assert ACTION.contains(one)


def test_sample_actions_leave_the_space_generator_alone():
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)  # default path
    space.seed(3)
    expected = space.sample()
    space.seed(3)
    sample_actions(space, 4, np.random.default_rng(0))
    np.testing.assert_array_equal(space.sample(), expected)


def _tuple_slots(n):
    example = ACTION.sample()
    return buffer_from_example(example, (n,)).to_ndarray()


@pytest.mark.parametrize("form", ["tuple", "dict"])
def test_write_outputs_accepts_tuples_and_keyed_dicts(form):
    out = _tuple_slots(4)
    actions = sample_actions(ACTION, 4, np.random.default_rng(1))
    value = actions if form == "tuple" else {str(i): a for i, a in enumerate(actions)}
    write_outputs(out, value)
    np.testing.assert_array_equal(out["0"], actions[0])
    np.testing.assert_array_equal(out["1"]["force"], actions[1]["force"])
    np.testing.assert_array_equal(out["2"], actions[2])


def test_write_outputs_names_a_missing_leaf():
    out = _tuple_slots(2)
    actions = sample_actions(ACTION, 2, np.random.default_rng(1))
    with pytest.raises(TreeStructureError, match=r"'2'.*tuple"):
        write_outputs(out, actions[:2])
    with pytest.raises(TreeStructureError, match=r"'1\.keys'"):
        write_outputs(out, (actions[0], {"force": actions[1]["force"]}, actions[2]))


def test_scripted_agent_returning_a_real_tuple_is_written():
    def policy(observation, prev_action, prev_reward):
        n = len(tree_get(observation, "0"))  # a tuple, or an ArrayDict keyed "0"...
        return (
            np.full(n, 2),
            {"force": np.zeros((n, 2), np.float32), "keys": np.ones((n, 3), np.int8)},
            np.ones((n, 2), np.int64),
        )

    handler = NumpyHandler(ScriptedAgent(policy), n_envs=3)
    with SerialCage(
        partial(SpaceEnv, OBSERVATION, ACTION), 3, options=CageOptions(seed=0)
    ) as cage:
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        tree = sample_tree_from_examples(cage.example, example, 4, 3, storage="local")
        cage.reset(tree.observation[0])
        views = tree.to_ndarray()
        handler.step(
            views.observation[0],
            None,
            None,
            out_action=views.action[0],
            out_agent_info={},
        )
        assert (views.action["0"][0] == 2).all()
        assert (views.action["1"]["keys"][0] == 1).all()


def test_torch_handler_writes_a_tuple_action():
    torch = pytest.importorskip("torch")
    from parllel.torch.transfer import copy_into

    out = {"0": torch.zeros(3), "1": {"a": torch.zeros(3, 2)}}
    copy_into(out, (torch.ones(3), {"a": torch.full((3, 2), 2.0)}))
    assert out["0"].sum() == 3 and out["1"]["a"].sum() == 12
    with pytest.raises(TreeStructureError, match="'1.a'"):
        copy_into(out, (torch.ones(3), {}))


def _collect(cage, T=6, batches=2):
    agent = RandomAgent(cage.spaces.action, seed=4)
    handler = NumpyHandler(agent, cage.n_envs)
    example = handler.example_outputs(cage.example[fields.OBSERVATION])
    tree = sample_tree_from_examples(cage.example, example, T, cage.n_envs)
    sampler = FeedForwardSampler(cage, handler, tree, decorrelation_steps=5, seed=2)
    sampler.reset()
    out = []
    for _ in range(batches):
        batch, _ = sampler.collect_batch()
        out.append({p: np.array(leaf) for p, leaf in batch.items_flat()})
    tree.close()
    return out


def test_random_agent_and_decorrelation_with_tuple_actions_serial_equals_process():
    factory = partial(SpaceEnv, OBSERVATION, ACTION)
    with SerialCage(factory, 3, options=CageOptions(seed=1)) as cage:
        reference = _collect(cage)
    with ProcessCage(
        factory,
        3,
        options=CageOptions(seed=1),
        layout=ProcessLayout(n_workers=1),
        start_method="fork",
    ) as cage:
        batches = _collect(cage)
    for expected, got in zip(reference, batches):
        assert expected.keys() == got.keys()
        assert "action.1.force" in got
        for key in expected:
            np.testing.assert_array_equal(expected[key], got[key], err_msg=key)
