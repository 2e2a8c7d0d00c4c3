"""Loggers for training scripts: a protocol, sinks, a live dashboard, episode stats.

Build the loggers in the script and pass them in (no global logger); every
sink is a :class:`Logger` (``log(step, metrics)``, ``close()``) and
:class:`MultiLogger` fans out to several. Optional packages (tensorboard,
tqdm, rich) are imported only by the sinks that need them. See
docs/logging.md::

    logger = MultiLogger([StdoutTable(every=10), CsvSink(run.progress_csv)])
    stats = EpisodeStats(window=100)
    stats.extend(traj_infos)
    logger.log(env_steps, {**stats.metrics(), "train/loss": loss})
    logger.close()
"""

from __future__ import annotations

from parllel.logging.base import Logger, MultiLogger
from parllel.logging.csv_sink import CsvSink, read_progress
from parllel.logging.dashboard import Dashboard
from parllel.logging.progress import ProgressBar
from parllel.logging.stats import EpisodeStats
from parllel.logging.stdout import StdoutTable
from parllel.logging.tensorboard import TensorBoardSink

__all__ = [
    "CsvSink",
    "Dashboard",
    "EpisodeStats",
    "Logger",
    "MultiLogger",
    "ProgressBar",
    "StdoutTable",
    "TensorBoardSink",
    "read_progress",
]
