"""Small functions that wire the common setups; every object stays replaceable.

A training script calls these instead of repeating the wiring, but still
holds every object they return (cages, handler, sample tree, transforms,
samplers) and can swap any of them. Nothing here hides the algorithm.

Example:
    >>> cage = build_cages(make_env, 8, options=CageOptions(seed=0))  # parllel.cages
    >>> handler = TorchHandler(agent, n_envs=cage.n_envs)
    >>> sample_tree = build_sample_tree(cage, handler, batch_T=128)
    >>> gae = add_advantage_estimation(sample_tree, gamma=0.99, gae_lambda=0.95)
    >>> transform = Compose(gae)  # a list of transforms, run in order
"""

from __future__ import annotations

from parllel.patterns.cages import build_alternating_cages
from parllel.patterns.run_settings import RunSettings
from parllel.patterns.sampling import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_clipping,
    add_reward_normalization,
    build_eval_sampler,
    build_replay_tree,
    build_sample_tree,
)
from parllel.patterns.training import build_run_logger, run_training

__all__ = [
    "RunSettings",
    "build_alternating_cages",
    "build_sample_tree",
    "build_replay_tree",
    "add_advantage_estimation",
    "add_obs_normalization",
    "add_reward_clipping",
    "add_reward_normalization",
    "build_eval_sampler",
    "build_run_logger",
    "run_training",
]
