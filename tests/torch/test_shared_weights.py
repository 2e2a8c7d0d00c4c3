"""SharedWeights and the TorchHandler's publish / follow / refresh of weights."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest
import torch
from torch import nn

from parllel.errors import ConfigError
from parllel.torch import SharedWeights, TorchHandler
from parllel.torch.weights import agent_modules, module_tensors


def make_tensors(size: int = 1000) -> dict[str, torch.Tensor]:
    return {
        "a": torch.zeros(size),
        "b": torch.zeros(3, 5, dtype=torch.float64),
        "steps": torch.zeros((), dtype=torch.int64),
    }


def fill(tensors: dict[str, torch.Tensor], value: int) -> None:
    for tensor in tensors.values():
        tensor.fill_(value)


def single_value(tensors: dict[str, torch.Tensor]) -> int:
    """The one value every element holds; fails on a mix of versions."""
    values = set()
    for tensor in tensors.values():
        values.update(torch.unique(tensor).tolist())
    assert len(values) == 1, f"torn read: the tensors hold {sorted(values)}"
    return int(values.pop())


def test_versions_start_at_zero_and_count_publishes():
    tensors = make_tensors()
    fill(tensors, 7)
    weights = SharedWeights(tensors)
    try:
        copy = make_tensors()
        assert weights.version == 0
        assert weights.read_into(copy) == 0 and single_value(copy) == 7
        fill(tensors, 8)
        assert weights.publish(tensors) == 1
        assert weights.publish(tensors) == 2
        assert weights.read_into(copy, newer_than=1) == 2 and single_value(copy) == 8
        fill(copy, 0)
        assert weights.read_into(copy, newer_than=2) == 2
        assert single_value(copy) == 0  # not newer: nothing copied
        assert weights.wait_for_version(2) == 2
    finally:
        weights.close()


def test_layout_mismatches_are_named():
    weights = SharedWeights(make_tensors())
    try:
        other = make_tensors()
        other["b"] = torch.zeros(2)
        with pytest.raises(ConfigError, match="'b' has shape"):
            weights.read_into(other)
        del other["b"]
        with pytest.raises(ConfigError, match=r"missing \['b'\]"):
            weights.publish(other)
    finally:
        weights.close()
    with pytest.raises(ConfigError, match="no numpy"):
        SharedWeights({"x": torch.zeros(2, dtype=torch.bfloat16)})


def _publisher(weights: SharedWeights, versions: int, size: int) -> None:
    tensors = make_tensors(size)
    for version in range(1, versions + 1):
        fill(tensors, version)
        weights.publish(tensors)


@pytest.mark.slow
def test_reads_are_never_torn_while_another_process_publishes():
    """Version v fills every element with v: a copy that mixes two versions
    holds two values. The reader copies into strided tensors, slower than the
    publisher writes, so publishes often land in the middle of a copy."""
    versions, size = 500, 200_000
    weights = SharedWeights(make_tensors(size))
    process = mp.get_context("forkserver").Process(
        target=_publisher, args=(weights, versions, size)
    )
    process.start()
    try:
        copy = make_tensors(size)
        copy["a"] = torch.zeros(size * 8)[::8]  # strided: a slow copy
        last, reads = 0, 0
        while last < versions:
            version = weights.read_into(copy)
            assert single_value(copy) == version >= last
            last, reads = version, reads + 1
            assert process.exitcode in (None, 0)
        process.join(30)
        assert process.exitcode == 0 and reads > 1
    finally:
        weights.close()
        process.join(30)


def test_wait_for_version_gives_up_through_check_alive():
    weights = SharedWeights(make_tensors())

    def publisher_gone() -> None:
        raise RuntimeError("publisher gone")

    try:
        with pytest.raises(RuntimeError, match="publisher gone"):
            weights.wait_for_version(1, publisher_gone, poll_seconds=0.01)
    finally:
        weights.close()


# -- TorchHandler -------------------------------------------------------------
class LinearAgent:
    """A tiny deterministic torch agent: action = argmax of a linear layer."""

    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(4, 2), nn.BatchNorm1d(2))

    def initial_state(self, n_envs):
        return None

    def step(self, observation, prev_action, prev_reward, state):
        from parllel.agents import AgentStep

        return AgentStep(self.model(observation).argmax(-1), {})

    def value(self, observation, prev_action, prev_reward, state):
        return self.model(observation)[:, 0]

    def set_mode(self, mode):
        self.model.train(mode == "train")


def test_agent_modules_finds_module_attributes():
    agent = LinearAgent()
    assert agent_modules(agent) == {"model": agent.model}
    assert agent_modules(agent.model) == {"agent": agent.model}
    with pytest.raises(ConfigError, match="no nn.Module"):
        agent_modules(object())
    assert "model.1.running_mean" in module_tensors(agent_modules(agent))


def _follower(weights: SharedWeights, min_version: int, result) -> None:
    handler = TorchHandler(LinearAgent(), n_envs=1)
    handler.follow_weights(weights)
    version = handler.refresh_weights(min_version)
    params = module_tensors(agent_modules(handler.agent))
    result.put((version, {k: v.detach().numpy().copy() for k, v in params.items()}))


def test_handler_publishes_and_a_follower_in_another_process_refreshes():
    torch.manual_seed(0)
    learner = TorchHandler(LinearAgent(), n_envs=1)
    weights = learner.share_weights()
    ctx = mp.get_context("forkserver")
    result = ctx.Queue()
    process = ctx.Process(target=_follower, args=(weights, 2, result))
    process.start()
    try:
        with torch.no_grad():
            for _ in range(2):
                for p in learner.agent.model.parameters():
                    p.add_(1.0)
                learner.agent.model[1].running_mean.add_(0.5)
                learner.publish_weights()
        assert learner.policy_version == 2
        version, params = result.get(timeout=60)
        process.join(30)
        assert version == 2
        expected = module_tensors(agent_modules(learner.agent))
        for key, tensor in expected.items():
            np.testing.assert_array_equal(params[key], tensor.detach().numpy())
    finally:
        weights.close()
        process.join(30)


def test_handler_weight_calls_out_of_order_are_refused():
    handler = TorchHandler(LinearAgent(), n_envs=1)
    assert handler.policy_version is None
    with pytest.raises(ConfigError, match="share_weights"):
        handler.publish_weights()
    with pytest.raises(ConfigError, match="follow_weights"):
        handler.refresh_weights()
    weights = handler.share_weights()
    try:
        with pytest.raises(ConfigError, match="follow_weights"):
            handler.refresh_weights()
    finally:
        weights.close()


def _waiting_reader(weights: SharedWeights, told) -> None:
    told.put("waiting")
    weights.wait_for_version(10**9, poll_seconds=600)


def _sleeping(pid: int) -> bool:
    """The process's main thread sleeps in the kernel (here: in the wait)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "S"
    except FileNotFoundError:
        return False


@pytest.mark.timeout(60)
def test_a_reader_killed_while_waiting_does_not_block_the_publisher():
    """A background sampler's process killed while it waits for the next
    version: the learner's next publish must still return."""
    import os
    import signal

    weights = SharedWeights(make_tensors())
    ctx = mp.get_context("forkserver")
    told = ctx.Queue()
    process = ctx.Process(target=_waiting_reader, args=(weights, told))
    process.start()
    try:
        assert told.get(timeout=30) == "waiting"
        while not _sleeping(process.pid):  # pytest-timeout guards a hang
            pass
        os.kill(process.pid, signal.SIGKILL)
        process.join(30)
        tensors = make_tensors()
        fill(tensors, 3)
        assert weights.publish(tensors) == 1  # used to wait for the dead reader
        assert weights.wait_for_version(1) == 1
    finally:
        weights.close()
        process.join(30)
