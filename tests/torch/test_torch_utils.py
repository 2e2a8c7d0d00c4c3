"""numpy_to_torch_tree: zero-copy views over sample trees; device moves and checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError
from parllel.torch import TorchHandler, export_policy, load_policy
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.utils import (
    check_device,
    numpy_to_torch_tree,
    torch_to_numpy_tree,
    tree_index,
    tree_to_device,
)
from parllel.tree import ArrayDict


def test_numpy_to_torch_tree_is_zero_copy_over_shared_arrays():
    tree = ArrayDict(
        {
            fields.OBSERVATION: {
                "pixels": Array((4, 2), (3, 3), np.uint8, storage="shared", padding=1),
                "vector": Array((4, 2), (5,), np.float32, storage="shared", padding=1),
            },
            fields.REWARD: Array((4, 2), (), np.float32, storage="shared"),
            fields.DONE: Array((4, 2), (), np.bool_),
        }
    )
    with tree:
        torch_tree = numpy_to_torch_tree(tree)
        assert isinstance(torch_tree, ArrayDict)
        vector = torch_tree[fields.OBSERVATION]["vector"]
        assert isinstance(vector, torch.Tensor)
        assert vector.shape == (4, 2, 5)  # batch window, no padding rows
        assert torch_tree[fields.DONE].dtype == torch.bool
        # writes through the arrays are seen by the tensors and back
        tree[fields.REWARD][1, 0] = 3.0
        assert torch_tree[fields.REWARD][1, 0] == 3.0
        torch_tree[fields.OBSERVATION]["pixels"][0, 1, 2, 2] = 7
        assert tree[fields.OBSERVATION]["pixels"][0, 1, 2, 2] == 7
        # tree_index keeps nesting and indexes every leaf
        columns = tree_index(torch_tree, (slice(None), torch.tensor([1])))
        assert columns[fields.OBSERVATION]["pixels"].shape == (4, 1, 3, 3)
        del torch_tree, vector, columns


def test_plain_dicts_and_device_moves():
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": (np.zeros(2),)}
    tensors = numpy_to_torch_tree(arrays)
    assert isinstance(tensors["b"], tuple)
    moved = tree_to_device(tensors, "cpu")
    assert moved["a"] is tensors["a"]  # already there: no copy
    back = torch_to_numpy_tree(moved)
    assert np.shares_memory(back["a"], arrays["a"])


def _actor_critic() -> tuple:
    import gymnasium as gym

    from parllel.torch.models import build_actor_critic

    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    return build_actor_critic(space, gym.spaces.Discrete(2))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_a_cuda_device_without_cuda_is_refused_up_front_naming_the_fix():
    model, distribution = _actor_critic()
    optimizer = torch.optim.Adam(model.parameters())
    evaluator = ActorCriticEvaluator(model, distribution)
    agent = ActorCriticAgent(model, distribution)
    for build in (
        lambda: ActorCriticAgent(model, distribution, device="cuda"),
        lambda: TorchHandler(agent, 2, device="cuda:0"),
        lambda: PPO(evaluator, optimizer, device="cuda"),
        lambda: check_device("cuda"),
    ):
        with pytest.raises(ConfigError, match=r"no CUDA device.*pass device='cpu'"):
            build()
    assert check_device("cpu") == torch.device("cpu")


def test_pin_memory_on_a_cpu_handler_is_refused_naming_the_fix():
    model, distribution = _actor_critic()
    agent = ActorCriticAgent(model, distribution)
    with pytest.raises(ConfigError, match="leave pin_memory out"):
        TorchHandler(agent, 2, pin_memory=True)
    TorchHandler(agent, 2, pin_memory=False).close()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_load_policy_on_cuda_without_cuda_is_refused(tmp_path):
    model, distribution = _actor_critic()
    path = export_policy(tmp_path / "policy.pt", ActorCriticAgent(model, distribution))
    with pytest.raises(ConfigError, match="no CUDA device"):
        load_policy(path, device="cuda")
    assert load_policy(path).device == torch.device("cpu")
