"""A CartPole PPO loop for the determinism tests: builders run in the
background process too, so they live at module level."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from parllel import fields
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.samplers import FeedForwardSampler
from parllel.seeding import Seeds
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.models import build_actor_critic
from parllel.transforms import EstimateAdvantage

N_ENVS, BATCH_T = 4, 32
#: the fields compared batch by batch (final observations: see :func:`valid_fields`)
COMPARED = (
    fields.OBSERVATION,
    fields.ACTION,
    f"{fields.AGENT_INFO}.{fields.LOG_PROB}",
    f"{fields.AGENT_INFO}.{fields.VALUE}",
    fields.REWARD,
    fields.DONE,
)


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def build_agent(seed: int) -> ActorCriticAgent:
    """The same initial weights for the same seed (drawn from the global RNG)."""
    torch.manual_seed(seed)
    env = make_env()
    model, distribution = build_actor_critic(
        env.observation_space, env.action_space, hidden_sizes=(16,)
    )
    env.close()
    return ActorCriticAgent(model, distribution)


def build_ppo_sampler(seed: int, weights: Any = None) -> FeedForwardSampler:
    """4 CartPoles x 32 steps, the actor-critic agent drawing its actions from
    ``Seeds.actions``, GAE; following ``weights`` if given."""
    cage = SerialCage(make_env, N_ENVS, options=CageOptions(seed=seed))
    handler = TorchHandler(
        build_agent(seed), N_ENVS, seed=Seeds.from_master(seed).actions
    )
    if weights is not None:
        handler.follow_weights(weights)
    tree = build_sample_tree(cage, handler, BATCH_T)
    gae = EstimateAdvantage(tree, 0.99, 0.95)
    return FeedForwardSampler(cage, handler, tree, transform=gae, seed=seed)


def build_ppo(agent: ActorCriticAgent, minibatches: int = 4) -> PPO:
    optimizer = torch.optim.Adam(agent.model.parameters(), lr=1e-3)
    return PPO(
        ActorCriticEvaluator(agent.model, agent.distribution),
        optimizer,
        epochs=2,
        minibatches=minibatches,
    )


def valid_fields(tree: Any) -> dict[str, np.ndarray]:
    """The compared fields of a batch (copies; the observation without its
    bootstrap row) and the final observations of the steps that ended an
    episode (the other rows are undefined)."""
    leaves = dict(tree.items_flat())
    out = {path: leaves[path].to_ndarray().copy() for path in COMPARED}
    done = leaves[fields.DONE].to_ndarray()
    final = leaves[fields.FINAL_OBSERVATION].to_ndarray()
    out[fields.FINAL_OBSERVATION] = final[done].copy()
    return out
