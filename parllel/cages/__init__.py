"""Cages: gymnasium envs stepped serially or in worker processes, into shared slots.

- :class:`SerialCage` steps envs in the calling process.
- :class:`ProcessCage` steps them in worker processes (several envs each),
  which write straight into shared-memory buffers.
- :class:`TrajInfo` collects per-episode statistics.

No torch is imported here.
"""

from parllel.cages.balance import Balancer, LoadBalancer
from parllel.cages.building import build_cages
from parllel.cages.cage import Cage, CageState
from parllel.cages.costs import (
    measure_step_overhead_seconds,
    measure_step_seconds,
    measure_sync_seconds,
)
from parllel.cages.env_group import EnvGroup, env_seed
from parllel.cages.env_info import KeptInfos, numeric_info_example
from parllel.cages.factories import PerEnvFactories
from parllel.cages.layout import suggest_layout, suggest_layout_for
from parllel.cages.movable import move_refusal
from parllel.cages.plumbing import usable_cores
from parllel.cages.process import ProcessCage
from parllel.cages.serial import SerialCage
from parllel.cages.spaces import (
    EnvSpaces,
    action_reader,
    leaf_mismatch,
    space_leaves,
    zero_example,
)
from parllel.cages.traj_info import TrajInfo

__all__ = [
    "Balancer",
    "Cage",
    "CageState",
    "EnvGroup",
    "EnvSpaces",
    "KeptInfos",
    "LoadBalancer",
    "PerEnvFactories",
    "ProcessCage",
    "SerialCage",
    "TrajInfo",
    "build_cages",
    "env_seed",
    "measure_step_seconds",
    "measure_step_overhead_seconds",
    "measure_sync_seconds",
    "move_refusal",
    "suggest_layout",
    "suggest_layout_for",
    "usable_cores",
    "action_reader",
    "leaf_mismatch",
    "numeric_info_example",
    "space_leaves",
    "zero_example",
]
