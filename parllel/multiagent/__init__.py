"""Multi-agent envs in cages: agents as one more sample-tree dimension, policy mapping, self-play.

- :class:`PolicyMapping`: a Handler routing each (env, agent) row to one of
  several policy handlers, one batched call per policy.
- :class:`OpponentPool`: frozen learner snapshots, opponent sampling
  strategies and openskill ratings.
- :class:`SelfPlay`: the learner against pool opponents, one game per env.
"""

from parllel.multiagent.opponent_pool import OpponentPool, SnapshotInfo
from parllel.multiagent.policy_mapping import PolicyMapping
from parllel.multiagent.selfplay import SelfPlay, game_outcome

__all__ = [
    "OpponentPool",
    "PolicyMapping",
    "SelfPlay",
    "SnapshotInfo",
    "game_outcome",
]
