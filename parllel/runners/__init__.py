"""Training loops: the runner base, on- and off-policy runners, callbacks.

The run-time services the loops use (run directories, checkpoints, seeding,
the command line) are in :mod:`parllel.runtime`.
"""

from parllel.runners.off_policy import OffPolicyRunner
from parllel.runners.on_policy import OnPolicyRunner
from parllel.runners.runner import Callback, Runner
from parllel.runners.selfplay import SelfPlayCallback

__all__ = [
    "Callback",
    "OffPolicyRunner",
    "OnPolicyRunner",
    "Runner",
    "SelfPlayCallback",
]
