"""PolicyMapping against a plain per-row reference loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.agents import AgentStep, NumpyHandler
from parllel.errors import ConfigError, ShapeError
from parllel.multiagent.policy_mapping import PolicyMapping

A = 3  # agents
OBS = 4  # features


class InfoAgent:
    """Deterministic numpy agent: action = argmax(obs * weights); records
    ``value`` = obs @ weights and, optionally, one more named info key."""

    def __init__(self, seed: int, extra_key: str | None = None) -> None:
        self.weights = np.random.default_rng(seed).normal(size=OBS).astype(np.float32)
        self.extra_key = extra_key
        self.calls: list[int] = []  # rows per step call

    def initial_state(self, n_envs: int) -> None:
        return None

    def step(self, observation, prev_action, prev_reward, state) -> AgentStep:
        self.calls.append(len(observation))
        action = np.argmax(observation * self.weights, axis=-1).astype(np.int64)
        info = {fields.VALUE: (observation @ self.weights).astype(np.float32)}
        if self.extra_key is not None:
            extra = observation[:, 0] + (0 if prev_reward is None else prev_reward)
            info[self.extra_key] = extra.astype(np.float32)
        return AgentStep(action, info)

    def value(self, observation, prev_action, prev_reward, state) -> np.ndarray:
        return (observation @ self.weights).astype(np.float32) + 100.0

    def set_mode(self, mode: str) -> None:
        pass


def make_mapping(n_envs: int, n_policies: int = 3, **kwargs):
    agents = [
        InfoAgent(seed, extra_key="entropy" if seed == 1 else None)
        for seed in range(n_policies)
    ]
    handlers = [NumpyHandler(agent, n_envs=n_envs * A) for agent in agents]
    return PolicyMapping(handlers, n_envs=n_envs, n_agents=A, **kwargs), agents


def empty_slots(mapping: PolicyMapping, n: int):
    example = mapping.example_outputs(np.zeros((A, OBS), np.float32))
    action = np.full((n, *example.action.shape), -1, example.action.dtype)
    info = {
        key: np.full((n, *np.shape(v)), -7, np.asarray(v).dtype)
        for key, v in example.agent_info.items()
    }
    return action, info


def reference(agents, assignment, observation, prev_reward):
    """Each row alone through its own agent."""
    n = observation.shape[0]
    action = np.zeros((n, A), np.int64)
    info = {key: np.zeros((n, A), np.float32) for key in (fields.VALUE, "entropy")}
    values = np.zeros((n, A), np.float32)
    for b in range(n):
        for a in range(A):
            agent = agents[assignment[b, a]]
            reward = None if prev_reward is None else prev_reward[b : b + 1]
            step = agent.step(observation[b, a][None], None, reward, None)
            action[b, a] = step.action[0]
            for key, value in step.agent_info.items():
                info[key][b, a] = value[0]
            values[b, a] = agent.value(observation[b, a][None], None, None, None)[0]
    return action, info, values


@settings(max_examples=40, deadline=None)
@given(
    n_envs=st.integers(1, 5),
    data=st.data(),
    use_reward=st.booleans(),
    select=st.sampled_from(["all", "slice", "array"]),
)
def test_step_and_value_match_the_per_row_reference(n_envs, data, use_reward, select):
    mapping, agents = make_mapping(n_envs)
    assignment = np.array(
        data.draw(st.lists(st.integers(0, 2), min_size=n_envs * A, max_size=n_envs * A))
    ).reshape(n_envs, A)
    for env in range(n_envs):
        mapping.assign(env, assignment[env])
    if select == "all":
        env_indices, envs = slice(None), np.arange(n_envs)
    elif select == "slice":
        lo = data.draw(st.integers(0, n_envs - 1))
        env_indices, envs = slice(lo, n_envs), np.arange(lo, n_envs)
    else:
        envs = np.array(data.draw(st.lists(st.integers(0, n_envs - 1), min_size=1)))
        env_indices = envs
    n = len(envs)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    observation = rng.normal(size=(n, A, OBS)).astype(np.float32)
    prev_reward = rng.normal(size=n).astype(np.float32) if use_reward else None
    action, info = empty_slots(mapping, n)
    mapping.step(
        observation,
        None,
        prev_reward,
        out_action=action,
        out_agent_info=info,
        env_indices=env_indices,
    )
    expected_action, expected_info, expected_values = reference(
        agents, assignment[envs], observation, prev_reward
    )
    np.testing.assert_array_equal(action, expected_action)
    np.testing.assert_array_equal(info[fields.POLICY_INDEX], assignment[envs])
    assert info[fields.POLICY_INDEX].dtype == np.int16
    for key in (fields.VALUE, "entropy"):
        np.testing.assert_allclose(info[key], expected_info[key], rtol=1e-5, atol=1e-5)
    values = mapping.value(observation, None, None, env_indices=env_indices)
    assert values.shape == (n, A) and values.dtype == np.float32
    np.testing.assert_allclose(values, expected_values, rtol=1e-5, atol=1e-5)


def test_each_policy_is_called_once_per_step_with_all_its_rows():
    mapping, agents = make_mapping(4)
    mapping.assign(slice(None), [0, 1, 1])
    mapping.assign(2, 2)
    action, info = empty_slots(mapping, 4)
    for agent in agents:
        agent.calls.clear()
    mapping.step(
        np.ones((4, A, OBS), np.float32),
        None,
        None,
        out_action=action,
        out_agent_info=info,
    )
    assert [agent.calls for agent in agents] == [[3], [6], [3]]


def test_gather_buffers_are_allocated_once():
    mapping, _ = make_mapping(2)
    action, info = empty_slots(mapping, 2)
    observation = np.ones((2, A, OBS), np.float32)
    mapping.assign(slice(None), [0, 1, 2])
    mapping.step(observation, None, None, out_action=action, out_agent_info=info)
    buffers = {name: id(held[1]) for name, held in mapping._buffers.items()}
    mapping.assign(0, [1, 1, 0])
    mapping.step(observation * 2, None, None, out_action=action, out_agent_info=info)
    assert {name: id(held[1]) for name, held in mapping._buffers.items()} == buffers


def test_value_of_policies_outside_value_policies_is_zero():
    mapping, _ = make_mapping(2, value_policies=[0])
    mapping.assign(slice(None), [0, 1, 2])
    values = mapping.value(np.ones((2, A, OBS), np.float32), None, None)
    assert (values[:, 1:] == 0).all() and (values[:, 0] >= 50).all()


def test_example_outputs_union_of_keys_and_policy_index():
    mapping, _ = make_mapping(1)
    example = mapping.example_outputs(np.zeros((A, OBS), np.float32))
    assert example.action.shape == (A,) and example.state is None
    assert set(example.agent_info) == {fields.VALUE, "entropy", fields.POLICY_INDEX}
    assert example.agent_info[fields.POLICY_INDEX].dtype == np.int16
    assert example.agent_info[fields.VALUE].shape == (A,)


def test_without_example_outputs_keys_are_found_on_first_step():
    mapping, agents = make_mapping(2)
    mapping.assign(slice(None), [0, 1, 1])
    action = np.zeros((2, A), np.int64)
    info = {
        fields.VALUE: np.full((2, A), 5, np.float32),
        "entropy": np.full((2, A), 5, np.float32),
    }
    mapping.step(
        np.ones((2, A, OBS), np.float32),
        None,
        None,
        out_action=action,
        out_agent_info=info,
    )
    assert (info["entropy"][:, 0] == 0).all()  # policy 0 lacks it: zeroed
    assert (info["entropy"][:, 1:] == 1).all()


def test_bad_configurations_raise_config_errors():
    class Recurrent(InfoAgent):
        def initial_state(self, n_envs):
            return np.zeros((n_envs, 2))

    with pytest.raises(ConfigError, match="feed-forward"):
        PolicyMapping([NumpyHandler(Recurrent(0), n_envs=2 * A)], n_envs=2, n_agents=A)
    with pytest.raises(ConfigError, match="n_envs=4"):
        PolicyMapping([NumpyHandler(InfoAgent(0), n_envs=4)], n_envs=2, n_agents=A)
    with pytest.raises(ConfigError, match="at least one"):
        PolicyMapping([], n_envs=2, n_agents=A)
    mapping, _ = make_mapping(2)
    with pytest.raises(ConfigError, match=r"\[0, 3\)"):
        mapping.assign(0, [0, 3, 1])
    with pytest.raises(ShapeError, match="n_agents"):
        mapping.value(np.ones((2, A + 1, OBS), np.float32), None, None)
