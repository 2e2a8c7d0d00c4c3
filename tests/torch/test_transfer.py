"""Host-device transfers (parllel.torch.transfer), on the CPU with the CUDA code path.

The page-locking registry runs with fake register/unregister calls, the
event with a fake that logs, and copies are logged by wrapping the one
function every copy goes through: the order of copies and waits, one copy
per leaf per step, bit-identical batches and unregistering on close are
checked without a GPU.
"""

from __future__ import annotations

import gc

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from parllel import fields
from parllel.cages import SerialCage
from parllel.errors import ConfigError
from parllel.patterns import build_sample_tree
from parllel.samplers import AlternatingSampler, FeedForwardSampler
from parllel.torch import TorchHandler, transfer
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic
from parllel.torch.transfer import (
    PAGE,
    PinnedMemory,
    Transfer,
    _uncovered,
    batch_to_device,
    root_array,
)

T, B = 6, 4


class FakeCuda:
    """Records register/unregister calls; ``fail`` makes registering fail."""

    def __init__(self, fail: int = 0) -> None:
        self.registered: dict[int, int] = {}
        self.calls: list[tuple[str, int, int]] = []
        self.fail = fail

    def register(self, pointer: int, size: int) -> int:
        assert pointer % PAGE == 0 and size % PAGE == 0 and size > 0
        assert pointer not in self.registered
        if self.fail:
            return self.fail
        self.registered[pointer] = size
        self.calls.append(("register", pointer, size))
        return 0

    def unregister(self, pointer: int) -> int:
        del self.registered[pointer]
        self.calls.append(("unregister", pointer, 0))
        return 0

    def memory(self) -> PinnedMemory:
        return PinnedMemory(self.register, self.unregister)


class LogEvent:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def record(self, stream=None) -> None:
        self.log.append("record")

    def synchronize(self) -> None:
        self.log.append("wait")


def pointer(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_pin_registers_each_owner_once_and_close_unregisters_everything():
    cuda = FakeCuda()
    memory = cuda.memory()
    big = np.zeros(5 * PAGE, np.uint8)
    other = np.zeros(3 * PAGE, np.uint8)
    memory.pin(big[10:20])
    memory.pin(big[3 * PAGE :])  # the same owner: nothing new
    memory.pin(other.reshape(3, PAGE)[1])
    assert len(cuda.registered) == 2
    assert memory.nbytes >= big.nbytes + other.nbytes
    for array in (big, other):  # every byte of each owner is covered
        start, end = pointer(array), pointer(array) + array.nbytes
        assert any(lo <= start and end <= hi for lo, hi in memory.ranges)
    memory.close()
    assert cuda.registered == {} and memory.ranges == []
    memory.close()  # idempotent
    assert [call[0] for call in cuda.calls].count("unregister") == 2


def test_owners_sharing_pages_register_only_the_pages_not_yet_registered():
    cuda = FakeCuda()
    memory = cuda.memory()
    buffer = bytearray(4 * PAGE)
    whole = np.frombuffer(buffer, np.uint8)
    inner = np.frombuffer(buffer, np.uint8, count=PAGE, offset=PAGE)
    assert root_array(inner) is inner  # its own owner, inside `whole`
    memory.pin(inner)
    memory.pin(whole)  # only the pages around `inner` are new
    assert len(cuda.registered) >= 2
    assert memory.nbytes == sum(cuda.registered.values())
    memory.close()
    assert cuda.registered == {}


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(1, 10)).map(
            lambda r: (r[0] * PAGE, (r[0] + r[1]) * PAGE)
        ),
        max_size=8,
    )
)
def test_registered_ranges_stay_disjoint_and_cover_every_request(requests):
    ranges: list[tuple[int, int]] = []
    for lo, hi in requests:
        for piece in _uncovered(lo, hi, ranges):
            ranges.append(piece)
        ranges.sort()
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert end <= start
    covered = {page for lo, hi in ranges for page in range(lo, hi, PAGE)}
    wanted = {page for lo, hi in requests for page in range(lo, hi, PAGE)}
    assert covered == wanted


def test_a_refused_registration_names_the_fix():
    memory = FakeCuda(fail=2).memory()
    with pytest.raises(ConfigError, match="pin_memory=False"):
        memory.pin(np.zeros(PAGE, np.uint8))
    memory.close()


def test_a_collected_registry_unregisters_its_memory():
    cuda = FakeCuda()
    memory = cuda.memory()
    memory.pin(np.zeros(2 * PAGE, np.uint8))  # the registry keeps it alive
    assert cuda.registered
    del memory
    gc.collect()
    assert cuda.registered == {}


# -- the handler's path ------------------------------------------------------------
def make_env() -> gym.Env:
    return gym.make("CartPole-v1", disable_env_checker=True)


def leaf_count(tree) -> int:
    return (
        len([leaf for _, leaf in tree.items_flat()])
        if hasattr(tree, "items_flat")
        else 1
    )


def collect(sampler_type, make_transfer, batches: int = 2):
    """Batches (copies) of a sampler over two serial cages, the copies one
    handler step makes (input and output leaves), and the owners of the
    buffers the handler reads and writes."""
    cages = [
        SerialCage(make_env, B // 2, seed=0),
        SerialCage(make_env, B // 2, seed=0, env_offset=B // 2),
    ]
    torch.manual_seed(0)
    spaces = cages[0].spaces
    agent = ActorCriticAgent(*build_actor_critic(spaces.observation, spaces.action))
    handler = TorchHandler(agent, B, seed=0, transfer=make_transfer())
    tree = build_sample_tree(cages, handler, T)
    try:
        sampler = sampler_type(cages, handler, tree)
        out = []
        for _ in range(batches):
            batch, _ = sampler.collect_batch()
            out.append(
                {
                    key: np.array(batch[key].to_ndarray())
                    for key in (fields.OBSERVATION, fields.ACTION, fields.REWARD)
                }
            )
            out[-1]["value"] = np.array(batch.agent_info.value.to_ndarray())
        seen = [fields.OBSERVATION, fields.ACTION, fields.AGENT_INFO]
        if fields.PREV_ACTION in tree:
            seen += [fields.PREV_ACTION, fields.PREV_REWARD]
        owners = {
            pointer(root_array(leaf.to_ndarray()))
            for key in seen
            for _, leaf in (
                tree[key].items_flat()
                if hasattr(tree[key], "items_flat")
                else [(key, tree[key])]
            )
        }
        inputs = leaf_count(tree[fields.OBSERVATION])
        if fields.PREV_ACTION in tree:
            inputs += leaf_count(tree[fields.PREV_ACTION]) + 1
        outputs = leaf_count(tree[fields.ACTION]) + leaf_count(tree[fields.AGENT_INFO])
        return out, inputs + outputs, owners
    finally:
        handler.close()
        tree.close()
        for cage in cages:
            cage.close()


@pytest.mark.parametrize("sampler_type", [FeedForwardSampler, AlternatingSampler])
def test_the_cuda_path_on_the_cpu_copies_once_per_leaf_then_waits(
    sampler_type, monkeypatch
):
    log: list[str] = []
    real_copy = transfer._copy_leaf

    def logged_copy(out, value, non_blocking):
        log.append("copy")
        assert non_blocking
        real_copy(out, value, non_blocking)

    reference, _, _ = collect(sampler_type, lambda: Transfer("cpu"))
    monkeypatch.setattr(transfer, "_copy_leaf", logged_copy)
    cuda = FakeCuda()

    def staged() -> Transfer:
        return Transfer(
            "cpu",
            copy_inputs=True,
            pin_memory=True,
            event=LogEvent(log),
            pinned=cuda.memory(),
        )

    log.clear()
    batches, copies, owners = collect(sampler_type, staged)
    # bit for bit the batches of the zero-copy CPU path
    for ours, theirs in zip(batches, reference):
        for key in ours:
            np.testing.assert_array_equal(ours[key], theirs[key])
    # every handler step: one copy per input and output leaf (never per env),
    # then the event is recorded and waited on before the slots are read; the
    # alternating sampler steps each half on its own: twice the waits
    steps = "".join("c" if entry == "copy" else entry[0] for entry in log)
    acts = steps.split("rw")
    assert acts[-1] == ""
    halves = 2 if sampler_type is AlternatingSampler else 1
    assert acts[:-1] == ["c" * copies] * (2 * T * halves)
    # the buffers the handler touched were registered, and all are unregistered
    assert cuda.registered == {}
    spans = [(p, p + size) for kind, p, size in cuda.calls if kind == "register"]
    for owner in owners:
        assert any(lo <= owner < hi for lo, hi in spans)


def test_batch_to_device_copies_each_leaf_once_and_leaves_device_leaves_alone(
    monkeypatch,
):
    copies: list[torch.Tensor] = []
    real_copy = transfer._copy_leaf

    def logged_copy(out, value, non_blocking):
        copies.append(value)
        assert non_blocking
        real_copy(out, value, non_blocking)

    monkeypatch.setattr(transfer, "_copy_leaf", logged_copy)
    batch = {"a": torch.ones(3), "b": {"c": torch.zeros(2, 2)}, "d": None}
    assert batch_to_device(batch, None) is batch
    same = batch_to_device(batch, "cpu")
    assert same["a"] is batch["a"] and same["b"]["c"] is batch["b"]["c"]
    assert copies == []
    moved = batch_to_device(batch, "meta")
    assert moved["a"].device.type == "meta" and moved["b"]["c"].shape == (2, 2)
    assert moved["d"] is None
    assert len(copies) == 2
