"""Every sampler, serial and process cages: fields line up across episodes and batches.

``CountingEnv`` observations are ``[tag, episode, t, last_action]`` and its
reward is ``action + 0.01 * t``, so each field of a batch can be checked
against its neighbours. :class:`CountingAgent` acts from the observation,
records the previous reward and (recurrent variant) its state, a count of
steps since the agent state was last reset, which must equal ``t``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import pytest

from parllel import fields
from parllel.agents import AgentStep, NumpyHandler
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.samplers import (
    AlternatingSampler,
    FeedForwardSampler,
    RecurrentSampler,
    sample_tree_from_examples,
)
from tests.helpers.envs import CountingEnv

T, B = 7, 4


def state_vector(observation):
    """The ``[..., 4]`` counting vector of a Box or Dict observation."""
    return observation["state"] if isinstance(observation, Mapping) else observation


def action_value(action):
    action = np.asarray(action)
    return (
        action.astype(np.float64)
        if action.ndim <= 2 and action.dtype.kind in "iu"
        else action.sum(-1)
    )


class CountingAgent:
    """Deterministic numpy agent; value ``10 + t`` when its state is right."""

    def __init__(self, action: str = "discrete", recurrent: bool = False) -> None:
        self.box = action == "box"
        self.recurrent = recurrent
        self.mode = "sample"

    def initial_state(self, n_envs):
        return np.zeros((n_envs, 1), np.float32) if self.recurrent else None

    def _value(self, o, state):
        value = 10.0 + o[:, 2]
        if state is not None:  # wrong state -> wrong value
            value = value + 100.0 * (state[:, 0] - o[:, 2])
        return value.astype(np.float32)

    def step(self, observation, prev_action, prev_reward, state):
        o = np.asarray(state_vector(observation))
        t, episode = o[:, 2], o[:, 1]
        if self.box:
            action = np.stack([((t % 3) - 1) * 0.5, (episode % 2) * 0.25], -1)
            action = action.astype(np.float32)
        else:
            action = ((t + 2 * episode) % 5).astype(np.int64)
        info = {
            fields.VALUE: self._value(o, state),
            "count": np.zeros(len(o), np.float32) if state is None else state[:, 0],
            "prev_reward_seen": np.zeros(len(o), np.float32)
            if prev_reward is None
            else np.asarray(prev_reward, np.float32),
        }
        return AgentStep(action, info, None if state is None else state + 1)

    def value(self, observation, prev_action, prev_reward, state):
        return self._value(np.asarray(state_vector(observation)), state)

    def set_mode(self, mode):
        self.mode = mode


def make_cage(kind, env_kwargs, n_envs=B, offset=0, reset_mode="auto", seed=5):
    factory = partial(CountingEnv, min_length=2, max_length=5, **env_kwargs)
    options = CageOptions(seed=seed, env_offset=offset, reset_mode=reset_mode)
    if kind == "serial":
        return SerialCage(factory, n_envs, options=options)
    layout = (
        ProcessLayout(main_process_envs=1, n_workers=1)
        if n_envs > 2
        else ProcessLayout()
    )
    return ProcessCage(
        factory, n_envs, layout=layout, options=options, start_method="fork"
    )


def build(sampler_kind, cage_kind, env_kwargs, recurrent, wait_reset=False):
    """(sampler, tree, cages) for one configuration."""
    mode = "wait" if wait_reset else "auto"
    if sampler_kind == "alternating":
        cages = [
            make_cage(cage_kind, env_kwargs, B // 2, 0, mode),
            make_cage(cage_kind, env_kwargs, B // 2, B // 2, mode),
        ]
    else:
        cages = [make_cage(cage_kind, env_kwargs, reset_mode=mode)]
    agent = CountingAgent(env_kwargs.get("action", "discrete"), recurrent)
    handler = NumpyHandler(agent, B)
    example = handler.example_outputs(
        cages[0].example[fields.OBSERVATION],
        cages[0].example[fields.ACTION],
        cages[0].example[fields.REWARD],
    )
    tree = sample_tree_from_examples(
        cages[0].example,
        example,
        T,
        B,
        recurrent=recurrent,
        previous=True,
        wait_reset=wait_reset,
    )
    if sampler_kind == "feedforward":
        sampler = FeedForwardSampler(cages, handler, tree)
    elif sampler_kind == "recurrent":
        sampler = RecurrentSampler(cages, handler, tree, wait_reset=wait_reset)
    else:
        sampler = AlternatingSampler(cages, handler, tree)
    return sampler, tree, cages


def padded_observation(tree):
    """Counting vectors of observation rows ``0 .. T`` (``[T + 1, B, 4]``)."""
    return state_vector(tree.observation).padded_ndarray()[1:]


def check_batch(tree, previous_last, terminal, recurrent, wait_reset=False):
    """Assert every alignment invariant of one batch; return a copy of obs[T]."""
    obs = padded_observation(tree)
    final = state_vector(tree.final_observation).to_ndarray()
    action = action_value(tree.action.padded_ndarray())  # rows -1 .. T
    reward = tree.reward.padded_ndarray()
    prev_action = action_value(tree.prev_action.to_ndarray())
    prev_reward = tree.prev_reward.to_ndarray()
    terminated, truncated = tree.terminated.to_ndarray(), tree.truncated.to_ndarray()
    done = tree.done.to_ndarray()
    info = tree.agent_info
    np.testing.assert_array_equal(done, terminated | truncated)
    assert not (truncated if terminal else terminated).any()
    if previous_last is not None:
        continuing = previous_last[:, 2] > 0 if wait_reset else slice(None)
        np.testing.assert_array_equal(obs[0][continuing], previous_last[continuing])
    if recurrent:
        np.testing.assert_array_equal(
            tree.initial_state.to_ndarray()[:, 0], obs[0, :, 2]
        )
    for b in range(B):
        assert (obs[:, b, 0] == obs[0, b, 0]).all() or wait_reset  # one env per column
        for t in range(T):
            o, n, a = obs[t, b], obs[t + 1, b], action[t + 1, b]
            if wait_reset:
                assert tree.valid[t, b] == (not done[:t, b].any())
                if not tree.valid[t, b]:
                    continue
            assert reward[t + 1, b] == pytest.approx(a + 0.01 * (o[2] + 1), abs=1e-5)
            if o[2] == 0:
                assert prev_action[t, b] == 0 and prev_reward[t, b] == 0
            else:
                assert prev_action[t, b] == pytest.approx(action[t, b])
                assert prev_reward[t, b] == reward[t, b]
            assert info["prev_reward_seen"][t, b] == prev_reward[t, b]
            if recurrent:
                assert info["count"][t, b] == o[2]
            assert info[fields.VALUE][t, b] == 10 + o[2]
            if done[t, b]:
                np.testing.assert_allclose(final[t, b], [o[0], o[1], o[2] + 1, a], 1e-6)
                if wait_reset:
                    np.testing.assert_array_equal(n, final[t, b])
                else:
                    np.testing.assert_allclose(n, [o[0], o[1] + 1, 0, 0])
            else:
                np.testing.assert_allclose(n, [o[0], o[1], o[2] + 1, a], 1e-6)
    return obs[T].copy()


CASES = [
    ("feedforward", "serial", {}),
    ("feedforward", "process", {"observation": "dict"}),
    ("feedforward", "serial", {"action": "box", "terminal": False}),
    ("feedforward", "process", {"action": "box", "observation": "dict"}),
    ("recurrent", "serial", {"terminal": False}),
    ("recurrent", "process", {}),
    ("recurrent", "serial", {"observation": "dict", "action": "box"}),
    ("recurrent", "process", {"observation": "dict", "terminal": False}),
    ("alternating", "serial", {"action": "box"}),
    ("alternating", "process", {"terminal": False}),
    ("alternating", "process", {"observation": "dict", "action": "box"}),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("recurrent_agent", [False, True], ids=["ff", "rnn"])
@pytest.mark.parametrize(
    "sampler_kind,cage_kind,env_kwargs",
    CASES,
    ids=[
        f"{s}-{c}-{'-'.join(f'{k}={v}' for k, v in e.items()) or 'default'}"
        for s, c, e in CASES
    ],
)
def test_fields_line_up_across_episodes_and_batches(
    sampler_kind, cage_kind, env_kwargs, recurrent_agent
):
    if sampler_kind == "feedforward" and recurrent_agent:
        pytest.skip("the feed-forward sampler refuses recurrent agents")
    if sampler_kind == "recurrent" and not recurrent_agent and cage_kind == "process":
        pytest.skip("covered serially")
    sampler, tree, cages = build(sampler_kind, cage_kind, env_kwargs, recurrent_agent)
    with tree:
        try:
            last, episodes = None, []
            for _ in range(4):
                batch, trajs = sampler.collect_batch()
                assert batch is tree
                last = check_batch(
                    tree, last, env_kwargs.get("terminal", True), recurrent_agent
                )
                episodes += trajs
            assert len(episodes) >= B  # episodes of 2-5 steps over 28 steps
            assert all(traj.length >= 2 for traj in episodes)
        finally:
            for cage in cages:
                cage.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cage_kind", ["serial", "process"])
def test_wait_reset_masks_idle_steps_and_resets_between_batches(cage_kind):
    sampler, tree, cages = build(
        "recurrent", cage_kind, {"terminal": False}, recurrent=True, wait_reset=True
    )
    with tree:
        try:
            last = None
            for _ in range(4):
                sampler.collect_batch()
                last = check_batch(tree, last, False, True, wait_reset=True)
                assert (tree.done.to_ndarray().sum(0) <= 1).all()
                assert not tree.valid.to_ndarray().all()  # episodes of <= 5 steps
        finally:
            for cage in cages:
                cage.close()


def snapshot(sampler_kind, cage_kind, env_kwargs, recurrent):
    sampler, tree, cages = build(sampler_kind, cage_kind, env_kwargs, recurrent)
    arrays, trajs = [], []
    with tree:
        try:
            for _ in range(3):
                _, completed = sampler.collect_batch()
                arrays.append(
                    {
                        p: np.array(leaf.padded_ndarray())
                        for p, leaf in tree.items_flat()
                    }
                )
                trajs += sorted((t.env_index, t.length, t.return_) for t in completed)
        finally:
            for cage in cages:
                cage.close()
    return arrays, trajs


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "sampler_kind,env_kwargs,recurrent",
    [
        ("feedforward", {"observation": "dict"}, False),
        ("recurrent", {"terminal": False}, True),
        ("alternating", {"action": "box"}, True),
    ],
)
def test_same_seed_same_batches_serial_and_process(sampler_kind, env_kwargs, recurrent):
    serial = snapshot(sampler_kind, "serial", env_kwargs, recurrent)
    process = snapshot(sampler_kind, "process", env_kwargs, recurrent)
    assert serial[1] == process[1]
    for a, b in zip(serial[0], process[0]):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
