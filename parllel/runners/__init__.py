"""Training runs: the runner loops and what wires a run around them.

- :class:`Runner`, :class:`OnPolicyRunner`, :class:`OffPolicyRunner`, their
  :class:`Callback` and :class:`SelfPlayCallback`: the training loops;
- :class:`RunSettings` (what every script shares besides its algorithm),
  :func:`run_training` and :func:`build_run_logger`: a run's wiring;
- :class:`RunDirectory`: a run's config, metadata, logs and checkpoints;
  :mod:`parllel.runners.cli`: a script's command line and its start;
  :mod:`parllel.runners.outcome`: how training ended, printed (``report_outcome``).

Checkpoint files are in :mod:`parllel.checkpoints`, the seed scheme in
:mod:`parllel.seeding`.
"""

from parllel.runners.off_policy import OffPolicyRunner
from parllel.runners.on_policy import OnPolicyRunner
from parllel.runners.run_directory import RunDirectory
from parllel.runners.run_settings import RunSettings
from parllel.runners.runner import Callback, Runner
from parllel.runners.selfplay import SelfPlayCallback
from parllel.runners.training import build_run_logger, run_training

__all__ = [
    "Callback",
    "OffPolicyRunner",
    "OnPolicyRunner",
    "RunDirectory",
    "RunSettings",
    "Runner",
    "SelfPlayCallback",
    "build_run_logger",
    "run_training",
]
