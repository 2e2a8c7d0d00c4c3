"""Evaluating on a multi-agent env: build_eval_sampler with MultiAgentTrajInfo."""

from __future__ import annotations

import numpy as np

from parllel.agents import NumpyHandler, ScriptedAgent
from parllel.builders import build_eval_sampler
from parllel.logging import EpisodeStats
from parllel.multiagent import MultiAgentTrajInfo
from tests.helpers.ma_envs import DropoutParallelEnv
from tests.multiagent.ma_reference import (
    parallel_factory,
    parallel_reference,
    scripted_actions,
)


def test_eval_episodes_carry_each_agents_return_as_the_plain_loop():
    n_envs, n_episodes = 2, 6
    sampler, cage = build_eval_sampler(
        parallel_factory(),
        NumpyHandler(ScriptedAgent(scripted_actions), n_envs),
        n_envs,
        n_episodes,
        seed=5,
        traj_info_type=MultiAgentTrajInfo,
    )
    try:
        episodes = sampler.collect()
        seeds = list(cage.env_seeds)
    finally:
        cage.close()
        sampler.sample_tree.close()
    assert len(episodes) == n_episodes
    for b, seed in enumerate(seeds):
        # each env contributes its first episodes (n_episodes split evenly)
        _, expected = parallel_reference(DropoutParallelEnv(), seed, 60, False)
        mine = [traj for traj in episodes if traj.env_index == b]
        assert len(mine) == n_episodes // n_envs
        for traj, returns in zip(mine, expected):
            np.testing.assert_allclose(traj.agent_returns, returns, rtol=1e-6)
            assert abs(traj.return_ - returns.sum()) < 1e-4  # the team return
            assert (traj.agent_lengths <= traj.length).all()
    stats = EpisodeStats(window=100, prefix="eval/")
    stats.extend(episodes)  # the runner's evaluation statistics still work
    assert stats.metrics()["eval/episodes"] == n_episodes
