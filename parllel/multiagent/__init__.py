"""Multi-agent envs in cages: agents as one more sample-tree dimension, policy mapping, self-play.

The adapters turn a PettingZoo env (parallel or turn-based) into one
gymnasium env whose observation, action and per-agent info are stacked over
agents (``[A, ...]``), so the existing cages, sample trees and samplers
carry an agent dimension (``[T, B, A, ...]``) unchanged. PettingZoo itself
is never imported here: any object with its API works.
"""

from __future__ import annotations

from parllel.multiagent.aec_env import (
    AECEnvAdapter,
    AECEnvFactory,
    make_aec_env_factory,
)
from parllel.multiagent.agent_steps import AGENT_INFOS
from parllel.multiagent.parallel_env import (
    ParallelEnvAdapter,
    ParallelEnvFactory,
    make_parallel_env_factory,
)
from parllel.multiagent.spaces import shared_space, stack_space
from parllel.multiagent.traj_info import MultiAgentTrajInfo

__all__ = [
    "AGENT_INFOS",
    "AECEnvAdapter",
    "AECEnvFactory",
    "MultiAgentTrajInfo",
    "ParallelEnvAdapter",
    "ParallelEnvFactory",
    "make_aec_env_factory",
    "make_parallel_env_factory",
    "shared_space",
    "stack_space",
]
