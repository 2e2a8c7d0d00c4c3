"""The slot registry: what workers learn about a cage's slots, and when."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.cages import CageOptions, ProcessCage, SerialCage
from parllel.cages.process.channel import Layout, Views
from parllel.cages.process.slots import SlotRegistry
from parllel.errors import ConfigError
from parllel.tree import ArrayDict, buffer_from_example, tree_items, tree_map
from tests.helpers.cage_helpers import allocate, run
from tests.helpers.envs import CountingEnv

N_ENVS = 3


def _shared(shape=(N_ENVS,), dtype=np.float32):
    return buffer_from_example(np.zeros(shape[1:], dtype), shape[:1], "shared")


def _rebuild(registered, layout: Layout, views: dict[int, np.ndarray]):
    """The tree a worker rebuilds from a Layout and its views."""
    ids = registered.ids
    return tree_map(lambda j: views[int(ids[j])], layout.skeleton)


def test_a_refused_tree_leaves_nothing_half_registered():
    registry = SlotRegistry(N_ENVS)
    good, local = _shared(), np.zeros(N_ENVS, np.float32)
    with pytest.raises(ConfigError, match="observation"):
        registry.register({"observation": local, "reward": good})
    # the same layout again, now valid: its layout and every view are sent
    registered = registry.register({"observation": _shared(), "reward": good})
    kinds = [type(message) for message in registered.messages]
    assert kinds == [Layout, Views]
    assert [view_id for view_id, _ in registered.messages[1].descriptors] == [0, 1]
    assert registered.ids.tolist() == [0, 1]
    good.close()


def test_layouts_keep_dotted_keys_and_sequence_nodes():
    registry = SlotRegistry(N_ENVS)
    leaves = [_shared() for _ in range(4)]
    tree = {
        "out": {
            "env_info": {"ale.lives": leaves[0], "ale": {"lives": leaves[1]}},
            "observation": ArrayDict({"0": leaves[2], "1": leaves[3]}, sequence=True),
        }
    }
    registered = registry.register(tree)
    layout, views_message = registered.messages
    views = {
        view_id: leaves[view_id].to_ndarray()
        for view_id, _ in views_message.descriptors
    }
    rebuilt = _rebuild(registered, layout, views)
    assert rebuilt["out"]["observation"].is_sequence
    assert not rebuilt["out"]["env_info"].is_sequence
    assert set(rebuilt["out"]["env_info"]) == {"ale.lives", "ale"}
    env_info = rebuilt["out"]["env_info"]
    assert np.shares_memory(env_info["ale.lives"], leaves[0].to_ndarray())
    assert np.shares_memory(env_info["ale"]["lives"], leaves[1].to_ndarray())
    original, copy = list(tree_items(tree)), list(tree_items(rebuilt))
    assert [path for path, _ in copy] == [path for path, _ in original]
    for (_, leaf), (_, view) in zip(original, copy):
        assert np.shares_memory(leaf.to_ndarray(), view)
    # a nesting that only differs where dotted paths would agree: a new layout
    flat = registry.register({"out": {"env_info": {"ale": {"lives": leaves[0]}}}})
    nested = registry.register({"out": {"env_info": {"ale.lives": leaves[0]}}})
    assert len({registered.layout_id, flat.layout_id, nested.layout_id}) == 3
    for leaf in leaves:
        leaf.close()


def test_a_cage_recovers_from_a_refused_slot_tree():
    with ProcessCage(
        CountingEnv, N_ENVS, options=CageOptions(seed=0), start_method="fork"
    ) as cage:
        local = allocate(cage, 4, storage="local")
        with pytest.raises(ConfigError):
            cage.reset(local.observation[0])
        arrays, trajs = run(cage, 4)  # same layout, shared slots: workers learn it
    with SerialCage(CountingEnv, N_ENVS, options=CageOptions(seed=0)) as cage:
        reference, reference_trajs = run(cage, 4)
    for key in reference:
        np.testing.assert_array_equal(arrays[key], reference[key], err_msg=key)
    assert [t.to_dict() for t in trajs] == [t.to_dict() for t in reference_trajs]
