"""A logger writing scalars to TensorBoard event files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parllel.errors import MissingDependencyError
from parllel.logging.base import Sink, to_scalars


def _summary_writer_class() -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise MissingDependencyError(
            "TensorBoardSink needs the 'tensorboard' package (and torch): "
            "pip install tensorboard, or pip install 'parllel[examples]'"
        ) from error
    return SummaryWriter


class TensorBoardSink(Sink):
    """Write every metric as a TensorBoard scalar at the logged step.

    Uses ``torch.utils.tensorboard.SummaryWriter``, imported when the sink is
    built, so importing :mod:`parllel.logging` does not need tensorboard.
    View with ``tensorboard --logdir runs/``.

    Example:
        >>> sink = TensorBoardSink("runs/demo/logs/tensorboard")
        >>> sink.log(4096, {"train/return_mean": 21.5})
        >>> sink.close()

    Args:
        log_dir: directory for the event files (created if needed).
        purge_step: when resuming, events at or after this step left by the
            interrupted run are hidden, so the curve does not fold back.
        flush_secs: how often the writer flushes to disk.

    Raises:
        MissingDependencyError: if tensorboard is not installed.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        purge_step: int | None = None,
        flush_secs: int = 30,
    ) -> None:
        writer_class = _summary_writer_class()
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = writer_class(
            log_dir=str(self.log_dir), purge_step=purge_step, flush_secs=flush_secs
        )

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Add one scalar per metric at ``step``."""
        if self.closed:
            raise ValueError(f"TensorBoardSink({self.log_dir}) used after close()")
        for key, value in to_scalars(metrics).items():
            self.writer.add_scalar(key, value, global_step=int(step))

    def flush(self) -> None:
        """Write pending events to disk now."""
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        if not self.closed:
            self.writer.close()
        super().close()
