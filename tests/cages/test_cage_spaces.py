"""Cages over any space: nested Dict/Tuple mixtures, declared-vs-actual checks,
and custom spaces registered with the singledispatch space functions."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.cages.spaces import space_leaves, zero_example
from parllel.errors import InvalidActionError, SpaceMismatchError
from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
from tests.helpers.cage_helpers import allocate, run, slots
from tests.helpers.space_envs import Interval, SpaceEnv, WrongObservationEnv

T = 8
LAYOUTS = (
    {"layout": ProcessLayout(envs_per_worker=2)},
    {"layout": ProcessLayout(main_process_envs=1, n_workers=1)},
)


def fork_cage(factory, n_envs, **kwargs):
    """ProcessCage started with fork (fast in tests)."""
    return ProcessCage(factory, n_envs, start_method="fork", **kwargs)


def assert_same(a, b):
    assert a[0].keys() == b[0].keys()
    for key in a[0]:
        assert a[0][key].dtype == b[0][key].dtype, key
        np.testing.assert_array_equal(a[0][key], b[0][key], err_msg=key)
    assert [t.to_dict() for t in a[1]] == [t.to_dict() for t in b[1]]


def assert_process_equals_serial(factory, n_envs=3, seed=5):
    with SerialCage(factory, n_envs, options=CageOptions(seed=seed)) as cage:
        reference = run(cage, T)
    for layout in LAYOUTS:
        with fork_cage(
            factory, n_envs, options=CageOptions(seed=seed), **layout
        ) as cage:
            assert_same(run(cage, T), reference)
    return reference


def test_blackjack_process_equals_serial():
    reference = assert_process_equals_serial(lambda: gym.make("Blackjack-v1"))
    assert {"observation.0", "observation.1", "observation.2"} <= set(reference[0])


def test_tuple_inside_dict_process_equals_serial():
    observation = gym.spaces.Dict(
        {
            "pair": gym.spaces.Tuple(
                (gym.spaces.Discrete(4), gym.spaces.Box(-1, 1, (2,), np.float32))
            ),
            "bits": gym.spaces.MultiBinary(3),
        }
    )
    action = gym.spaces.Tuple(
        (
            gym.spaces.Discrete(3),
            gym.spaces.Dict({"f": gym.spaces.MultiDiscrete([2, 5])}),
        )
    )
    reference = assert_process_equals_serial(partial(SpaceEnv, observation, action))
    assert "observation.pair.1" in reference[0]
    assert "action.1.f" in reference[0]


# -- property test: any mixture of spaces, serial == process bitwise -----------

_box = st.builds(
    lambda shape, dtype: gym.spaces.Box(
        0 if np.dtype(dtype).kind == "u" else -5, 9, shape, dtype
    ),
    st.lists(st.integers(1, 3), max_size=2).map(tuple),
    st.sampled_from([np.float32, np.float64, np.int32, np.uint8]),
)
_leaf = st.one_of(
    _box,
    st.builds(gym.spaces.Discrete, st.integers(2, 9), start=st.integers(-2, 2)),
    st.lists(st.integers(2, 5), min_size=1, max_size=3).map(gym.spaces.MultiDiscrete),
    st.integers(1, 4).map(gym.spaces.MultiBinary),
)


def _nest(children):
    return st.one_of(
        st.lists(children, min_size=1, max_size=3).map(gym.spaces.Tuple),
        st.dictionaries(st.sampled_from("abcd"), children, min_size=1, max_size=3).map(
            gym.spaces.Dict
        ),
    )


spaces_strategy = st.recursive(_leaf, _nest, max_leaves=6)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(observation=spaces_strategy, action=spaces_strategy)
def test_any_space_mixture_process_equals_serial(observation, action):
    assert_process_equals_serial(partial(SpaceEnv, observation, action))


# -- declared vs actual --------------------------------------------------------


@pytest.mark.parametrize("process", [False, True], ids=["serial", "process"])
@pytest.mark.parametrize(
    ("space", "observation", "leaf", "actual", "declared"),
    [
        (
            gym.spaces.Box(-1, 1, (3,), np.float32),
            np.zeros(3, np.float64),
            "",
            "float64",
            "float32",
        ),
        (
            gym.spaces.Box(-1, 1, (3,), np.float32),
            np.zeros((1, 3), np.float32),
            "",
            "(1, 3)",
            "(3,)",
        ),
        (
            gym.spaces.Dict(
                {"x": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1)))}
            ),
            {"x": (1, np.float64(0.5))},
            "x.1",
            "float64",
            "float32",
        ),
        (
            gym.spaces.Dict({"x": gym.spaces.Discrete(2), "y": gym.spaces.Discrete(2)}),
            {"x": 1},
            "y",
            "missing",
            "",
        ),
    ],
    ids=["dtype", "shape", "nested-leaf", "missing-leaf"],
)
def test_probe_observation_must_match_declared_space(
    process, space, observation, leaf, actual, declared
):
    factory = partial(WrongObservationEnv, space, observation)
    with pytest.raises(SpaceMismatchError) as info:
        if process:
            fork_cage(factory, 2, layout=ProcessLayout(n_workers=1)).close()
        else:
            SerialCage(factory, 2).close()
    message = str(info.value)
    assert "WrongObservationEnv" in message and "env 0" in message
    if leaf:
        assert f"leaf {leaf!r}" in message
    else:  # a space that is not a container: the observation itself, no leaf ''
        assert "): observation has " in message and "''" not in message
    assert actual in message and declared in message
    if actual != "missing":
        assert "wrapper" in message


def test_matching_observations_pass_the_check():
    space = gym.spaces.Dict(
        {"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(-1, 1, (2,), np.float64)}
    )
    factory = partial(WrongObservationEnv, space, {"a": 2, "b": np.zeros(2)})
    with SerialCage(factory, 1) as cage:
        assert cage.example[fields.OBSERVATION]["a"] == 2


def test_zero_example_of_nested_spaces():
    space = gym.spaces.Dict(
        {
            "t": gym.spaces.Tuple(
                (gym.spaces.Discrete(3, start=1), gym.spaces.MultiBinary(2))
            )
        }
    )
    example = zero_example(space)
    assert isinstance(example["t"], tuple)
    assert example["t"][0] == 0 and example["t"][0].dtype == np.int64
    assert example["t"][1].dtype == np.int8 and example["t"][1].shape == (2,)


# -- a custom space, registered in tests/space_envs.py ------------------------------


def _random_batches(cage):
    agent = RandomAgent(cage.spaces.action, seed=4)
    handler = NumpyHandler(agent, cage.n_envs)
    example = handler.example_outputs(cage.example[fields.OBSERVATION])
    tree = sample_tree_from_examples(cage.example, example, T, cage.n_envs)
    sampler = FeedForwardSampler(cage, handler, tree, decorrelation_steps=3, seed=2)
    sampler.reset()
    batch, trajs = sampler.collect_batch()
    arrays = {path: np.array(leaf) for path, leaf in batch.items_flat()}
    tree.close()
    return arrays, trajs


def test_custom_space_registered_by_singledispatch():
    space = Interval(-2.0, 3.0)
    assert zero_example(space) == (np.float32(-2.0), np.float32(-2.0))
    assert [path for path, _ in space_leaves(gym.spaces.Dict({"i": space}))] == [
        "i.0",
        "i.1",
    ]
    factory = partial(SpaceEnv, gym.spaces.Dict({"i": space}), space)
    reference = assert_process_equals_serial(factory)
    assert (reference[0]["observation.i.0"] <= reference[0]["observation.i.1"]).all()
    with SerialCage(factory, 2, options=CageOptions(seed=0)) as cage:
        expected = _random_batches(cage)
    with ProcessCage(
        factory,
        2,
        options=CageOptions(seed=0),
        layout=ProcessLayout(n_workers=1),
        start_method="forkserver",
    ) as cage:
        got = _random_batches(cage)  # the worker registers by importing space_envs
    assert_same(got, expected)
    actions = expected[0]["action.0"], expected[0]["action.1"]
    assert (actions[0] <= actions[1]).all() and actions[0].dtype == np.float32


@pytest.mark.parametrize("process", [False, True], ids=["serial", "process"])
def test_cage_actions_must_be_a_tree_of_views(process):
    action = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3)))
    factory = partial(SpaceEnv, gym.spaces.Discrete(4), action)
    make = (
        partial(fork_cage, layout=ProcessLayout(n_workers=1)) if process else SerialCage
    )
    with make(factory, 2) as cage:
        tree = allocate(cage, 1)
        try:
            cage.reset(tree.observation[0])
            as_tuple = (tree.action["0"][0], tree.action["1"][0])
            with pytest.raises(InvalidActionError, match="got a tuple above leaf '0'"):
                cage.step(as_tuple, slots(tree, 0))
            cage.step(tree.action[0], slots(tree, 0))  # the ArrayDict is fine
        finally:
            tree.close()
