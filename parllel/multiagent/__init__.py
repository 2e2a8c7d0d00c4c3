"""Multi-agent envs in cages: agents as one more sample-tree dimension, policy mapping, self-play.

The adapters turn a PettingZoo env (parallel or turn-based) into one
gymnasium env whose observation, action and per-agent info are stacked over
agents (``[A, ...]``), so the existing cages, sample trees and samplers
carry an agent dimension (``[T, B, A, ...]``) unchanged. PettingZoo itself
is never imported here: any object with its API works.

- :class:`PolicyMapping`: a Handler routing each (env, agent) row to one of
  several policy handlers, one batched call per policy.
- :class:`OpponentPool`: frozen learner snapshots, opponent sampling
  strategies and openskill ratings.
- :class:`SelfPlay`: the learner against pool opponents, one game per env.
"""

from __future__ import annotations

from parllel.multiagent.aec_env import make_aec_env_factory
from parllel.multiagent.opponent_pool import OpponentPool
from parllel.multiagent.parallel_env import make_parallel_env_factory
from parllel.multiagent.policy_mapping import PolicyMapping
from parllel.multiagent.selfplay import SelfPlay
from parllel.multiagent.spaces import unstack_space
from parllel.multiagent.traj_info import MultiAgentTrajInfo

__all__ = [
    "MultiAgentTrajInfo",
    "OpponentPool",
    "PolicyMapping",
    "SelfPlay",
    "make_aec_env_factory",
    "make_parallel_env_factory",
    "unstack_space",
]
