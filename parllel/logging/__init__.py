"""Loggers for training scripts: a protocol, sinks, a live dashboard, episode stats.

Build the loggers in the training script and pass them in; parllel keeps no
global logger. Every sink implements :class:`Logger`
(``log(step, metrics)``, ``close()``), and :class:`MultiLogger` fans out to
several::

    logger = MultiLogger([
        StdoutTable(every=10),
        CsvSink(run.progress_csv),
        TensorBoardSink(run.tensorboard_dir),
        ProgressBar(total=total_steps),
    ])
    stats = EpisodeStats(window=100)
    ...
    stats.extend(traj_infos)
    logger.log(env_steps, {**stats.metrics(), "train/loss": loss})
    logger.close()

On a terminal, :class:`Dashboard` shows the run live (progress, speed,
where the time goes, returns, losses, CPU and memory); elsewhere it prints
one plain line per call.

Optional packages (tensorboard, tqdm, rich) are imported only when the sink
that needs them is built.
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
