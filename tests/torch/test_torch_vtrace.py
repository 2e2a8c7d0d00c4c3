"""V-trace on a batch sampled by the torch actor-critic agent.

The agent records ``agent_info.log_prob`` and ``agent_info.value``; the
sampler records ``bootstrap_value`` and ``final_value``. ComputeVTrace reads
exactly those with its defaults, so a learner only writes ``target_log_prob``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.samplers import FeedForwardSampler
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic
from parllel.transforms import ComputeVTrace, EstimateAdvantage
from parllel.transforms.functional import vtrace


@pytest.mark.timeout(60)
def test_vtrace_reads_what_the_actor_critic_sampler_records():
    torch.manual_seed(0)
    cage = SerialCage(
        lambda: gym.make("CartPole-v1", max_episode_steps=12),
        n_envs=3,
        options=CageOptions(seed=0),
    )
    with cage:
        model, distribution = build_actor_critic(
            cage.spaces.observation, cage.spaces.action, hidden_sizes=(8,)
        )
        handler = TorchHandler(ActorCriticAgent(model, distribution), n_envs=3)
        tree = build_sample_tree(cage, handler, batch_T=32)
        transform = ComputeVTrace(tree, gamma=0.9, trace_lambda=0.8)
        sampler = FeedForwardSampler([cage], handler, tree)
        tree, _ = sampler.collect_batch()
        truncated = tree.truncated.to_ndarray()
        assert truncated.any()  # the time limit bootstraps from final_value
        behaviour = tree.agent_info.log_prob.to_ndarray()
        assert np.isfinite(behaviour).all() and (behaviour < 0).all()

        # on-policy: the learner's log-probs equal the behaviour ones
        tree.target_log_prob.to_ndarray()[...] = behaviour
        transform(tree)
        vtrace_return = tree.return_.to_ndarray().copy()
        EstimateAdvantage(tree, gamma=0.9, gae_lambda=0.8)(tree)
        np.testing.assert_allclose(vtrace_return, tree.return_.to_ndarray(), 1e-6)

        # lagged: a learner whose policy moved on
        target = behaviour + np.float32(0.5)
        tree.target_log_prob.to_ndarray()[...] = target
        transform(tree)
        expected_return, expected_advantage = vtrace(
            tree.reward.to_ndarray(), tree.agent_info.value.to_ndarray(),
            tree.terminated.to_ndarray(), truncated,
            tree.bootstrap_value.to_ndarray(), tree.final_value.to_ndarray(),
            log_ratio=target - behaviour, gamma=0.9, trace_lambda=0.8,
        )  # fmt: skip
        np.testing.assert_array_equal(tree.return_.to_ndarray(), expected_return)
        np.testing.assert_array_equal(tree.advantage.to_ndarray(), expected_advantage)
