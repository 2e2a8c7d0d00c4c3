"""MultiAgentTrajInfo: per-agent sums, pickling, dict form, episode statistics."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from parllel import fields
from parllel.agents.base import AgentExample
from parllel.cages import CageOptions, SerialCage
from parllel.errors import EnvError
from parllel.logging import EpisodeStats
from parllel.multiagent import MultiAgentTrajInfo
from parllel.samplers import sample_tree_from_examples
from tests.multiagent.ma_reference import parallel_factory


def info(rewards, mask):
    return {
        fields.AGENT_REWARD: np.asarray(rewards, np.float32),
        fields.AGENT_MASK: np.asarray(mask, bool),
    }


def test_sums_per_agent_and_keeps_the_team_return():
    traj = MultiAgentTrajInfo(env_index=2)
    traj.step(None, None, 1.5, False, False, info([1.0, 0.5], [True, True]))
    traj.step(None, None, -1.0, False, False, info([0.0, -1.0], [False, True]))
    traj.finish(True, False, {})
    np.testing.assert_array_equal(traj.agent_returns, [1.0, -0.5])
    np.testing.assert_array_equal(traj.agent_lengths, [1, 2])
    assert traj.return_ == 0.5 and traj.length == 2
    data = traj.to_dict()
    assert data["return_0"] == 1.0 and data["return_1"] == -0.5
    assert data["length_0"] == 1 and data["length_1"] == 2
    assert data["agent_returns"] == [1.0, -0.5] and data["env_index"] == 2
    copy = pickle.loads(pickle.dumps(traj))
    np.testing.assert_array_equal(copy.agent_returns, traj.agent_returns)
    stats = EpisodeStats(window=10)
    stats.extend([traj, copy])
    assert stats.metrics()["train/return_mean"] == 0.5


def test_a_fresh_traj_info_has_empty_agent_arrays():
    data = MultiAgentTrajInfo().to_dict()
    assert data["agent_returns"] == [] and "return_0" not in data


def test_agent_info_slots_still_refuse_a_wrong_shape():
    """The cage stores same-dtype [A] arrays as they are; other shapes still fail."""
    cage = SerialCage(parallel_factory(), 1, options=CageOptions(seed=0))
    try:
        example = cage.example
        tree = sample_tree_from_examples(example, _agent_example(example), 2, 1)
        with tree:
            slot = tree[fields.ENV_INFO][fields.AGENT_REWARD]
            assert slot.dtype == np.float32 and slot.shape == (2, 1, 3)
            cage.reset(tree[fields.OBSERVATION][0])
            env = cage._group.envs[0]
            step = env.step

            def bad_step(action):
                out = step(action)
                out[-1][fields.AGENT_REWARD] = np.zeros(2, np.float32)
                return out

            env.step = bad_step
            out = {
                fields.OBSERVATION: tree[fields.OBSERVATION][1],
                fields.REWARD: tree[fields.REWARD][0],
                fields.TERMINATED: tree[fields.TERMINATED][0],
                fields.TRUNCATED: tree[fields.TRUNCATED][0],
                fields.ENV_INFO: tree[fields.ENV_INFO][0],
            }
            with pytest.raises(EnvError, match="agent_reward.*shape"):
                cage.step(tree[fields.ACTION][0], out)
    finally:
        cage.close()


def _agent_example(example):
    return AgentExample(example[fields.ACTION], {}, None)
