"""Builders: small functions that wire the common setups; every object stays replaceable.

A training script calls these instead of repeating the wiring, but still
holds every object they return (cages, handler, sample tree, transforms,
samplers) and can swap any of them. Nothing here hides the algorithm.

Example:
    >>> cage = build_cage(make_env, 8, options=CageOptions(seed=0))  # parllel.cages
    >>> handler = TorchHandler(agent, n_envs=cage.n_envs)
    >>> sample_tree = build_sample_tree(cage, handler, batch_T=128)
    >>> gae = add_advantage_estimation(sample_tree, gamma=0.99, gae_lambda=0.95)
    >>> transform = Compose(gae)  # a list of transforms, run in order
"""

from __future__ import annotations

from parllel.builders.cages import build_alternating_cages
from parllel.builders.sampling import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_clipping,
    add_reward_normalization,
    build_eval_sampler,
    build_replay_tree,
    build_sample_tree,
)

__all__ = [
    "build_alternating_cages",
    "build_sample_tree",
    "build_replay_tree",
    "add_advantage_estimation",
    "add_obs_normalization",
    "add_reward_clipping",
    "add_reward_normalization",
    "build_eval_sampler",
]
