"""The seed axis split over CPU devices (the tests run with two, conftest.py)."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np

from parllel.jax.agents import build_actor_critic_agent
from parllel.jax.seed_devices import place_runs, seed_sharding
from parllel.jax.seeds import SeededHandler, SeedStack

OBSERVATION = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def devices_of(leaf: jax.Array) -> set:
    return set(leaf.sharding.device_set)


def test_runs_split_over_the_devices_that_divide_them() -> None:
    assert len(jax.devices()) == 2  # JAX_NUM_CPU_DEVICES=2 from conftest
    assert seed_sharding(3) is None  # 3 runs do not split over 2 devices
    sharding = seed_sharding(4)
    assert sharding is not None
    placed = place_runs(np.arange(8.0).reshape(4, 2), sharding)
    assert devices_of(placed) == set(jax.devices())
    shards = sorted(placed.addressable_shards, key=lambda s: s.device.id)
    np.testing.assert_array_equal(shards[0].data, [[0, 1], [2, 3]])  # runs 0, 1
    np.testing.assert_array_equal(shards[1].data, [[4, 5], [6, 7]])  # runs 2, 3
    assert place_runs("unchanged", None) == "unchanged"


def test_stack_is_split_and_the_handler_acts_on_one_device() -> None:
    agents = [
        build_actor_critic_agent(OBSERVATION, ACTION, seed=s, hidden_sizes=(4,))
        for s in range(2)
    ]
    stack = SeedStack(agents)
    for leaf in jax.tree.leaves(stack.params):
        assert devices_of(leaf) == set(jax.devices())
    for run, agent in enumerate(agents):  # each run's slice is its own agent's
        jax.tree.map(np.testing.assert_array_equal, stack.run_params(run), agent.params)
    handler = SeededHandler(stack, 3, seeds=[0, 1])
    for leaf in jax.tree.leaves(handler._acting_params()):
        assert devices_of(leaf) == {jax.devices()[0]}
    assert handler._acting_params() is handler._acting_params()  # copied once
