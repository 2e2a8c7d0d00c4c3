"""Cages: gymnasium envs stepped serially or in worker processes, into shared slots.

- :class:`SerialCage` steps envs in the calling process.
- :class:`ProcessCage` steps them in worker processes (several envs each),
  which write straight into shared-memory buffers.
- :class:`TrajInfo` collects per-episode statistics.

No torch is imported here.
"""

from parllel.cages.balance import LoadBalancer
from parllel.cages.building import build_cages
from parllel.cages.cage import Cage
from parllel.cages.env_info import numeric_info_example
from parllel.cages.factories import PerEnvFactories
from parllel.cages.layout import suggest_layout_for
from parllel.cages.process.cage import ProcessCage
from parllel.cages.serial import SerialCage
from parllel.cages.spaces import EnvSpaces
from parllel.cages.traj_info import TrajInfo

__all__ = [
    "Cage",
    "EnvSpaces",
    "LoadBalancer",
    "PerEnvFactories",
    "ProcessCage",
    "SerialCage",
    "TrajInfo",
    "build_cages",
    "suggest_layout_for",
    "numeric_info_example",
]
