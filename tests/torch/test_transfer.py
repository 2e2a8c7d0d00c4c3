"""Host-device transfers (parllel.torch.transfer), on the CPU with the CUDA code path.

The CUDA runtime is a fake that enforces the driver's rules
(tests/helpers/fake_cudart.py): overlapping registrations fail, copies into
page-locked memory land only when waited for, unregistering memory a copy
still writes is a violation. Copies are routed through it by wrapping the
one function every copy goes through: the order of copies and waits, one
copy per leaf per step, bit-identical batches, shared registrations between
handlers and unregistering on close and collection are checked without a
GPU.
"""

from __future__ import annotations

import gc

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel import fields
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.errors import ArrayClosedError
from parllel.samplers import AlternatingSampler, FeedForwardSampler
from parllel.torch import TorchHandler, transfer
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic
from parllel.torch.page_locks import PAGE
from parllel.torch.transfer import Transfer, batch_to_device
from tests.helpers.fake_cudart import FakeCudart

T, B = 6, 4


@pytest.fixture
def cuda(monkeypatch) -> FakeCudart:
    """A fake CUDA runtime, installed as the process's."""
    return FakeCudart().install(monkeypatch)


def pointer(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


# -- the handler's path ------------------------------------------------------------
def make_env() -> gym.Env:
    return gym.make("CartPole-v1", disable_env_checker=True)


def leaf_count(tree) -> int:
    return (
        len([leaf for _, leaf in tree.items_flat()])
        if hasattr(tree, "items_flat")
        else 1
    )


def collect(sampler_type, make_transfer, batches: int = 2, handlers: int = 1):
    """Batches (copies) of a sampler over two serial cages, the copies one
    handler step makes (input and output leaves), and the first row of the
    buffers the handler reads and writes. With ``handlers=2`` a second
    handler (an evaluation handler's place) steps the same tree in turn."""
    cages = [
        SerialCage(make_env, B // 2, options=CageOptions(seed=0)),
        SerialCage(make_env, B // 2, options=CageOptions(seed=0, env_offset=B // 2)),
    ]
    torch.manual_seed(0)
    spaces = cages[0].spaces
    agent = ActorCriticAgent(*build_actor_critic(spaces.observation, spaces.action))
    built = [
        TorchHandler(agent, B, seed=0, transfer=make_transfer())
        for _ in range(handlers)
    ]
    tree = build_sample_tree(cages, built[0], T)
    try:
        samplers = [sampler_type(cages, handler, tree) for handler in built]
        out = []
        for index in range(batches):
            batch, _ = samplers[index % handlers].collect_batch()
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
        rows = {
            pointer(leaf.to_ndarray()[0])
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
        return out, inputs + outputs, rows
    finally:
        for handler in built:
            handler.close()
        tree.close()
        for cage in cages:
            cage.close()


@pytest.mark.parametrize("sampler_type", [FeedForwardSampler, AlternatingSampler])
def test_the_cuda_path_on_the_cpu_copies_once_per_leaf_then_waits(sampler_type, cuda):
    reference, _, _ = collect(sampler_type, lambda: Transfer("cpu"))
    cuda.log.clear()
    batches, copies, rows = collect(sampler_type, cuda.transfer)
    # bit for bit the batches of the zero-copy CPU path
    for ours, theirs in zip(batches, reference):
        for key in ours:
            np.testing.assert_array_equal(ours[key], theirs[key])
    # every handler step: one copy per input and output leaf (never per env),
    # then the event is recorded and waited on before the slots are read; the
    # alternating sampler steps each half on its own: twice the waits
    log = [entry for entry in cuda.log if entry != "sync"]
    steps = "".join("c" if entry == "copy" else entry[0] for entry in log)
    acts = steps.split("rw")
    assert acts[-1] == ""
    halves = 2 if sampler_type is AlternatingSampler else 1
    assert acts[:-1] == ["c" * copies] * (2 * T * halves)
    # the views the handler reused were page-locked; all are unlocked at
    # close, after a synchronize, with no copy in flight
    assert cuda.registered == {} and cuda.violations == []
    spans = [(p, p + size) for kind, p, size in cuda.calls if kind == "register"]
    for row in rows:
        assert any(lo <= row < hi for lo, hi in spans)


def test_two_handlers_on_one_tree_share_its_page_locks(cuda):
    """An evaluation handler beside a training one: the second locks the
    pages the first holds without registering them again (the driver
    refuses an overlapping registration with 712)."""
    collect(FeedForwardSampler, cuda.transfer, 4, handlers=2)
    assert any(kind == "register" for kind, _, _ in cuda.calls)
    assert cuda.registered == {} and cuda.violations == []


def test_the_policies_of_a_policy_mapping_share_its_buffers_page_locks(cuda):
    from gymnasium import spaces

    from parllel.multiagent.policy_mapping import PolicyMapping

    n_envs, n_agents = 3, 2
    box = spaces.Box(-1, 1, (4,), np.float32)
    handlers = []
    for seed in range(2):
        torch.manual_seed(seed)
        agent = ActorCriticAgent(*build_actor_critic(box, spaces.Discrete(2)))
        handlers.append(
            TorchHandler(agent, n_envs * n_agents, transfer=cuda.transfer())
        )
    mapping = PolicyMapping(handlers, n_envs=n_envs, n_agents=n_agents)
    mapping.assign(1, [1, 0])
    example = mapping.example_outputs(np.zeros((n_agents, 4), np.float32))
    observation = np.random.default_rng(0).random((n_envs, n_agents, 4), np.float32)
    action = np.zeros((n_envs, *example.action.shape), example.action.dtype)
    info = {
        key: np.zeros((n_envs, *np.shape(value)), np.asarray(value).dtype)
        for key, value in example.agent_info.items()
    }
    for _ in range(3):
        mapping.step(observation, None, None, out_action=action, out_agent_info=info)
    assert cuda.registered  # locked from the second step on, shared
    handlers[0].close()
    handlers[1].close()
    assert cuda.registered == {} and cuda.violations == []


def test_close_waits_for_copies_in_flight_before_unlocking(cuda):
    """An exception (or a time-box alarm) between a copy and its wait: close
    synchronizes the device before it unregisters the pages."""
    slots = np.zeros((2, 1024), np.float32)
    moved = cuda.transfer()
    moved.pin(slots)
    moved.to_host(torch.from_numpy(slots[0]), torch.ones(1024))  # no wait
    assert slots[0, 0] == 0  # still in flight
    moved.close()
    assert cuda.violations == [] and cuda.registered == {}
    assert slots[0, 0] == 1
    assert cuda.log.index("sync") < len(cuda.log)


def test_a_copy_to_the_device_lands_before_it_is_read_even_in_a_locked_page(
    cuda: FakeCudart, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU the fake device's memory is host memory, and a fresh input
    tensor can share a page with a locked sample-tree buffer (whole pages are
    registered): an input copy deferred until the wait was read by the agent
    before it landed (a batch mismatch that came and went with the heap's
    layout). On a GPU the kernels that read it run after it in stream order,
    so the fake never defers a copy to the device."""
    buffer = np.zeros(2 * PAGE // 4, np.float32)
    moved = cuda.transfer()
    moved.pin(buffer)
    landing = torch.from_numpy(buffer[PAGE // 4 : PAGE // 4 + 4])  # a locked page
    assert cuda.is_locked(landing)
    monkeypatch.setattr(torch, "empty_like", lambda leaf, device=None: landing)
    on_device = moved.to_device({"observation": torch.arange(4.0)})
    assert on_device["observation"].tolist() == [0.0, 1.0, 2.0, 3.0]
    moved.close()
    assert cuda.violations == [] and cuda.registered == {}


def test_a_closed_handler_refuses_to_step_and_locks_nothing(cuda):
    box = gym.spaces.Box(-1, 1, (4,), np.float32)
    agent = ActorCriticAgent(*build_actor_critic(box, gym.spaces.Discrete(2)))
    handler = TorchHandler(agent, 2, transfer=cuda.transfer())
    observation = np.zeros((2, 4), np.float32)
    action = np.zeros(2, np.int64)
    info = {
        key: np.zeros((2, *np.shape(value)), np.asarray(value).dtype)
        for key, value in handler.example_outputs(observation[0]).agent_info.items()
    }
    for _ in range(2):
        handler.step(observation, None, None, out_action=action, out_agent_info=info)
    assert cuda.registered
    handler.close()
    assert cuda.registered == {}
    with pytest.raises(ArrayClosedError, match="build a new handler"):
        handler.step(observation, None, None, out_action=action, out_agent_info=info)
    with pytest.raises(ArrayClosedError):
        handler.transfer.pin(observation)
    assert cuda.registered == {}
    handler.close()  # idempotent


def test_a_collected_handler_unlocks_its_memory_after_a_sync(cuda):
    box = gym.spaces.Box(-1, 1, (4,), np.float32)
    agent = ActorCriticAgent(*build_actor_critic(box, gym.spaces.Discrete(2)))
    handler = TorchHandler(agent, 2, transfer=cuda.transfer())
    observation = np.zeros((2, 4), np.float32)
    action = np.zeros(2, np.int64)
    info = {
        key: np.zeros((2, *np.shape(value)), np.asarray(value).dtype)
        for key, value in handler.example_outputs(observation[0]).agent_info.items()
    }
    for _ in range(2):
        handler.step(observation, None, None, out_action=action, out_agent_info=info)
    assert cuda.registered
    cuda.log.clear()
    del handler
    gc.collect()
    assert cuda.registered == {} and cuda.violations == []
    assert cuda.log[0] == "sync"


def test_arrays_passed_fresh_each_step_are_not_kept_locked(cuda):
    box = gym.spaces.Box(-1, 1, (4,), np.float32)
    agent = ActorCriticAgent(*build_actor_critic(box, gym.spaces.Discrete(2)))
    handler = TorchHandler(agent, 2, transfer=cuda.transfer())
    example = handler.example_outputs(np.zeros(4, np.float32))
    for _ in range(20):
        observation = np.zeros((2, 4 * PAGE), np.float32)[:, :4]  # a fresh buffer
        action = np.zeros(2, np.int64)
        info = {
            key: np.zeros((2, *np.shape(value)), np.asarray(value).dtype)
            for key, value in example.agent_info.items()
        }
        handler.step(observation, None, None, out_action=action, out_agent_info=info)
    assert cuda.registered == {}
    handler.close()


def test_a_missing_wait_is_seen_as_stale_actions(cuda):
    """The race a missing wait opens: the fake delivers copies into locked
    memory only at a wait, so actions read before it are stale."""

    class NoWait(Transfer):
        def wait(self) -> None:
            pass

    reference, _, _ = collect(FeedForwardSampler, lambda: Transfer("cpu"))
    batches, _, _ = collect(
        FeedForwardSampler, lambda: NoWait("cpu", copy_inputs=True, pin_memory=True)
    )
    assert any(
        not np.array_equal(ours[fields.ACTION], theirs[fields.ACTION])
        for ours, theirs in zip(batches, reference)
    )


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
