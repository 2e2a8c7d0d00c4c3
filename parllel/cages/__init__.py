"""Cages: gymnasium envs stepped serially or in worker processes, into shared slots.

- :class:`SerialCage` steps envs in the calling process.
- :class:`ProcessCage` steps them in worker processes (several envs each),
  which write straight into shared-memory buffers.
- :class:`CageOptions`: the options every cage takes (seed, reset mode, ...).
- :class:`ProcessLayout`: which process steps which envs of a process cage
  (:mod:`parllel.cages.layout` holds the layout policy: the split, the cost
  model that suggests one, and rebalancing).
- :class:`TrajInfo` collects per-episode statistics.

No torch is imported here.
"""

from parllel.cages.building import build_cage
from parllel.cages.cage import Cage
from parllel.cages.env_factories import PerEnvFactories
from parllel.cages.layout.balance import LoadBalancer
from parllel.cages.layout.process_layout import ProcessLayout
from parllel.cages.options import CageOptions
from parllel.cages.process.cage import ProcessCage
from parllel.cages.serial import SerialCage
from parllel.cages.spaces import EnvSpaces
from parllel.cages.traj_info import TrajInfo

__all__ = [
    "Cage",
    "CageOptions",
    "EnvSpaces",
    "LoadBalancer",
    "PerEnvFactories",
    "ProcessCage",
    "ProcessLayout",
    "SerialCage",
    "TrajInfo",
    "build_cage",
]
