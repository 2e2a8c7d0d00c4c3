"""Recurrent and alternating sampler builders for the background-sampler tests.

Each builder runs either in the test process (the synchronous reference) or
in a background process; both seed torch the same way right before building
the model, so the initial weights and the action-sampling random stream are
the same on both sides.
"""

from __future__ import annotations

import torch

from parllel.builders import build_alternating_cages, build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.samplers import AlternatingSampler, RecurrentSampler
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic
from parllel.transforms import EstimateAdvantage
from tests.helpers.envs import CountingEnv

T, N_ENVS = 5, 4
ENV_KWARGS = {"min_length": 2, "max_length": 8, "terminal": False}


def make_recurrent_handler(seed: int) -> TorchHandler:
    """A GRU actor-critic (sampling actions) with fixed initial weights."""
    env = CountingEnv(**ENV_KWARGS)
    torch.manual_seed(seed)
    model, distribution = build_actor_critic(
        env.observation_space,
        env.action_space,
        hidden_sizes=(8,),
        recurrent_cell="gru",
        recurrent_size=8,
    )
    return TorchHandler(ActorCriticAgent(model, distribution), N_ENVS)


def _finish(cages, seed: int, weights, sampler_type):
    handler = make_recurrent_handler(seed)
    if weights is not None:
        handler.follow_weights(weights)
    tree = build_sample_tree(cages, handler, T, recurrent=True)
    gae = EstimateAdvantage(tree, 0.99, 0.95)
    return sampler_type(
        cages if len(cages) > 1 else cages[0],
        handler,
        tree,
        transform=gae,
        decorrelation_steps=3,
        seed=seed,
    )


def build_recurrent_sampler(seed: int, weights=None) -> RecurrentSampler:
    """CountingEnvs (truncating) in a serial cage, a GRU agent, GAE."""
    torch.set_num_threads(1)
    cage = SerialCage(CountingEnv, N_ENVS, ENV_KWARGS, options=CageOptions(seed=seed))
    return _finish([cage], seed, weights, RecurrentSampler)


def build_alternating_sampler(seed: int, weights=None) -> AlternatingSampler:
    """CountingEnvs in the two process cages of build_alternating_cages, a GRU agent."""
    torch.set_num_threads(1)
    cages = build_alternating_cages(
        CountingEnv, N_ENVS, ENV_KWARGS, options=CageOptions(seed=seed)
    )
    try:
        return _finish(cages, seed, weights, AlternatingSampler)
    except BaseException:
        for cage in cages:
            cage.close()
        raise
