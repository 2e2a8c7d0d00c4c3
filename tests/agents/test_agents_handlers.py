"""Numpy agents, NumpyHandler state keeping, TorchHandler with torch agents."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel import fields
from parllel.agents import Agent, AgentStep, Handler, NumpyHandler, RandomAgent
from parllel.cages import CageOptions, SerialCage
from parllel.samplers import (
    AlternatingSampler,
    FeedForwardSampler,
    RecurrentSampler,
    sample_tree_from_examples,
)
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic
from tests.helpers.envs import CountingEnv


def test_random_agent_samples_every_space_kind_reproducibly():
    space = gym.spaces.Dict(
        {"move": gym.spaces.Discrete(3, start=1), "force": gym.spaces.Box(-1, 1, (2,))}
    )
    first = RandomAgent(space, seed=4).step(np.zeros((6, 2)), None, None, None)
    again = RandomAgent(space, seed=4).step(np.zeros((6, 2)), None, None, None)
    assert first.action["move"].shape == (6,) and first.action["move"].dtype == np.int64
    assert set(first.action["move"].tolist()) <= {1, 2, 3}
    assert first.action["force"].shape == (6, 2)
    assert first.action["force"].dtype == np.float32
    assert np.abs(first.action["force"]).max() <= 1
    np.testing.assert_array_equal(first.action["force"], again.action["force"])
    assert first.agent_info == {} and first.state is None
    agent = RandomAgent(space)
    assert isinstance(agent, Agent)
    assert (agent.value(np.zeros((6, 2)), None, None, None) == 0).all()


class Counter:
    """State = [steps, env-specific offset]; action = steps."""

    def initial_state(self, n_envs):
        return {"steps": np.zeros((n_envs,), np.int64)}

    def step(self, observation, prev_action, prev_reward, state):
        return AgentStep(state["steps"].copy(), {}, {"steps": state["steps"] + 1})

    def value(self, observation, prev_action, prev_reward, state):
        return state["steps"].astype(np.float32)

    def set_mode(self, mode):
        pass


def test_numpy_handler_keeps_and_resets_state_per_env():
    handler = NumpyHandler(Counter(), 5)
    assert isinstance(handler, Handler) and handler.recurrent
    action = np.zeros(5, np.int64)
    for _ in range(3):
        handler.step(np.zeros((5, 1)), None, None, out_action=action, out_agent_info={})
    np.testing.assert_array_equal(action, [2, 2, 2, 2, 2])
    half = action[3:]
    handler.step(
        np.zeros((2, 1)), None, None, out_action=half, out_agent_info={},
        env_indices=slice(3, 5),
    )  # fmt: skip
    handler.reset(np.array([0, 4]))
    handler.reset_one(2)
    out = {"steps": np.zeros(5, np.int64)}
    handler.write_state(out)
    np.testing.assert_array_equal(out["steps"], [0, 3, 0, 4, 0])
    np.testing.assert_array_equal(
        handler.value(np.zeros((2, 1)), None, None, env_indices=[1, 3]), [3, 4]
    )


def torch_setup(env_kwargs, n_envs, cell=None, seed=0):
    cage = SerialCage(
        partial(CountingEnv, **env_kwargs), n_envs, options=CageOptions(seed=seed)
    )
    torch.manual_seed(seed)
    model, distribution = build_actor_critic(
        cage.spaces.observation, cage.spaces.action, hidden_sizes=(16,),
        recurrent_cell=cell, recurrent_size=8,
    )  # fmt: skip
    return cage, ActorCriticAgent(model, distribution)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "env_kwargs",
    [{}, {"observation": "dict", "action": "box", "terminal": False}],
    ids=["box-discrete", "dict-box"],
)
def test_torch_handler_writes_outputs_through_zero_copy_views(env_kwargs):
    cage, agent = torch_setup(env_kwargs, 3)
    with cage:
        handler = TorchHandler(agent, 3)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        assert set(example.agent_info) == {fields.LOG_PROB, fields.VALUE}
        with sample_tree_from_examples(cage.example, example, 6, 3) as tree:
            sampler = FeedForwardSampler(cage, handler, tree)
            for _ in range(2):
                sampler.collect_batch()
            # views were wrapped once: one cached tensor per per-step view
            cached = len(handler._views)
            sampler.collect_batch()
            assert len(handler._views) == cached
            for array, tensor, _ in handler._views.values():
                for leaf in (
                    [tensor] if isinstance(tensor, torch.Tensor) else tensor.values()
                ):
                    assert any(
                        leaf.data_ptr() == np.asarray(a).__array_interface__["data"][0]
                        for a in (
                            [array] if isinstance(array, np.ndarray) else array.values()
                        )
                    )
            # stored log-probs and values match the model on stored data
            observation = (
                {
                    k: torch.from_numpy(v)
                    for k, v in tree.observation.to_ndarray().items()
                }
                if env_kwargs
                else torch.from_numpy(tree.observation.to_ndarray())
            )
            with torch.no_grad():
                out = agent.model(observation)
                log_prob = agent.distribution.log_likelihood(
                    torch.from_numpy(tree.action.to_ndarray()), out.dist_params
                )
            np.testing.assert_allclose(
                tree.agent_info.value.to_ndarray(), out.value, atol=1e-5
            )
            np.testing.assert_allclose(
                tree.agent_info.log_prob.to_ndarray(), log_prob, atol=1e-5
            )


@pytest.mark.timeout(60)
def test_torch_recurrent_state_matches_whole_sequence_evaluation():
    """Values recorded step by step equal the model run over [T, B] from
    ``initial_state`` with resets where episodes start (what PPO does)."""
    cage, agent = torch_setup(
        {"terminal": False, "min_length": 2, "max_length": 4}, 3, "gru"
    )
    with cage:
        handler = TorchHandler(agent, 3)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        with sample_tree_from_examples(
            cage.example, example, 5, 3, recurrent=True
        ) as tree:
            sampler = RecurrentSampler(cage, handler, tree)
            for _ in range(3):
                sampler.collect_batch()
                done = torch.from_numpy(tree.done.to_ndarray())
                resets = torch.zeros_like(done)
                resets[1:] = done[:-1]
                state = agent.model.core.state_from_batch_first(
                    torch.from_numpy(tree.initial_state.to_ndarray())
                )
                with torch.no_grad():
                    out = agent.model(
                        torch.from_numpy(tree.observation.to_ndarray()), state, resets
                    )
                np.testing.assert_allclose(
                    tree.agent_info.value.to_ndarray(), out.value, atol=1e-5
                )
                assert done.any()


@pytest.mark.timeout(60)
def test_alternating_equals_recurrent_sampler_in_eval_mode():
    """Deterministic actions: the alternating sampler's halves and state rows
    give exactly the batches of the plain recurrent sampler."""
    results = []
    for kind in ("recurrent", "alternating"):
        env = partial(CountingEnv, terminal=False)
        cages = [
            SerialCage(env, 2, options=CageOptions(seed=2)),
            SerialCage(env, 2, options=CageOptions(seed=2, env_offset=2)),
        ]
        setup_cage, agent = torch_setup({}, 1, "lstm")
        setup_cage.close()
        handler = TorchHandler(agent, 4)
        handler.set_mode("eval")
        example = handler.example_outputs(cages[0].example[fields.OBSERVATION])
        with sample_tree_from_examples(
            cages[0].example, example, 6, 4, recurrent=True
        ) as tree:
            sampler_type = (
                RecurrentSampler if kind == "recurrent" else AlternatingSampler
            )
            sampler = sampler_type(cages, handler, tree)
            batches = []
            for _ in range(2):
                sampler.collect_batch()
                batches.append(
                    {p: np.array(leaf.to_ndarray()) for p, leaf in tree.items_flat()}
                )
            results.append(batches)
        for cage in cages:
            cage.close()
    for a, b in zip(*results):
        for key in a:
            np.testing.assert_allclose(a[key], b[key], atol=1e-6, err_msg=key)
