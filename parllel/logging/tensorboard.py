"""A logger writing scalars to TensorBoard event files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parllel.errors import MissingDependencyError
from parllel.errors.base import install_hint
from parllel.logging.base import Sink, to_scalars


def _summary_writer_class() -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise MissingDependencyError(
            "TensorBoardSink needs the 'tensorboard' package and torch: pip install "
            f"tensorboard, or {install_hint('torch', 'logging')}"
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
            interrupted run are hidden, so the curve does not fold back (or
            call :meth:`rewind`; the runner does, when it loads a checkpoint).
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
        self._writer_class = _summary_writer_class()
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.purge_step = purge_step
        self.flush_secs = flush_secs
        self._writer: Any = None

    @property
    def writer(self) -> Any:
        """The ``SummaryWriter``, opened at first use (with ``purge_step``)."""
        if self._writer is None:
            self._writer = self._writer_class(
                log_dir=str(self.log_dir),
                purge_step=self.purge_step,
                flush_secs=self.flush_secs,
            )
        return self._writer

    def rewind(self, step: int) -> None:
        """Hide the events logged after ``step`` (e.g. after a resumed checkpoint).

        The next event file starts with a purge marker at ``step + 1``, so
        TensorBoard drops the older files' events from there on.
        """
        if self.closed:
            raise ValueError(f"TensorBoardSink({self.log_dir}) used after close()")
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.purge_step = int(step) + 1

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Add one scalar per metric at ``step``."""
        if self.closed:
            raise ValueError(f"TensorBoardSink({self.log_dir}) used after close()")
        for key, value in to_scalars(metrics).items():
            self.writer.add_scalar(key, value, global_step=int(step))

    def flush(self) -> None:
        """Write pending events to disk now."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        if not self.closed and self._writer is not None:
            self._writer.close()
        super().close()
