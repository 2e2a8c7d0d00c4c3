"""A logger appending one CSV row per ``log`` call, and a reader for it.

The first column is ``step``; the others are the metric names in the order
they were first seen. When a call brings a key the file has not seen, the
file is rewritten once with the wider header (earlier rows get empty cells
for it), through a temporary file and ``os.replace`` so a crash never leaves
half a file. New keys are rare after the first few calls, so the cost of the
rewrite is negligible; in exchange every row of the file has the same
columns and any CSV reader (pandas, spreadsheets, :func:`read_progress`) reads
it as-is. A key missing from a call is written as an empty cell.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from parllel.errors import ConfigError
from parllel.logging.base import Sink, to_scalars

STEP_COLUMN = "step"


def _cell(value: int | float | None) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else repr(float(value))


def _rows_up_to(rows: list[dict[str, str]], step: int) -> list[dict[str, str]]:
    return [row for row in rows if float(row[STEP_COLUMN]) <= step]


def _read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


class CsvSink(Sink):
    """Write metrics to a CSV file, one row per ``log`` call.

    Example:
        >>> sink = CsvSink("runs/demo/logs/progress.csv")
        >>> sink.log(2048, {"train/return_mean": 20.0})
        >>> sink.log(4096, {"train/return_mean": 31.0, "eval/return_mean": 50.0})
        >>> sink.close()  # file: step,train/return_mean,eval/return_mean (3 lines)

    Args:
        path: the CSV file; parent directories are created.
        resume: keep an existing file and append to it (with its header)
            instead of starting a new one.
        truncate_after: with ``resume``, drop existing rows whose step is
            greater than this (the rows logged after the checkpoint a run
            resumes from), so the curve has no duplicated steps; or call
            :meth:`rewind` later (the runner does, when it loads a checkpoint).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        resume: bool = False,
        truncate_after: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.columns: list[str] = [STEP_COLUMN]
        if resume and self.path.exists() and self.path.stat().st_size > 0:
            header, rows = _read_rows(self.path)
            if header:
                self.columns = header
            if truncate_after is not None:
                self._rewrite(_rows_up_to(rows, truncate_after))
            self._file = open(self.path, "a", newline="")
        else:
            self._file = open(self.path, "w", newline="")
            self._write_header()

    def _write_header(self) -> None:
        csv.writer(self._file).writerow(self.columns)
        self._file.flush()

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        """Atomically replace the file with ``rows`` under ``self.columns``."""
        handle, temp_name = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        try:
            with os.fdopen(handle, "w", newline="") as temp:
                writer = csv.DictWriter(temp, fieldnames=self.columns, restval="")
                writer.writeheader()
                writer.writerows(rows)
                temp.flush()
                os.fsync(temp.fileno())
            os.replace(temp_name, self.path)
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise

    def rewind(self, step: int) -> None:
        """Drop the rows logged after ``step`` (e.g. after the checkpoint a run resumes from).

        The rows at ``step`` and before stay; new rows are appended after them,
        so the file never has a step twice or a step going backwards.
        """
        if self.closed:
            raise ValueError(f"CsvSink({self.path}) used after close()")
        self._file.close()
        _, rows = _read_rows(self.path)
        self._rewrite(_rows_up_to(rows, step))
        self._file = open(self.path, "a", newline="")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Append one row; widen the header first if ``metrics`` has new keys."""
        if self.closed:
            raise ValueError(f"CsvSink({self.path}) used after close()")
        values = to_scalars(metrics)
        if STEP_COLUMN in values:
            raise ConfigError(f"{STEP_COLUMN!r} is reserved for the step column")
        new_keys = [key for key in values if key not in self.columns]
        if new_keys:
            self._file.close()
            _, rows = _read_rows(self.path)
            self.columns.extend(new_keys)
            self._rewrite(rows)
            self._file = open(self.path, "a", newline="")
        row = [str(int(step))] + [_cell(values.get(key)) for key in self.columns[1:]]
        csv.writer(self._file).writerow(row)
        self._file.flush()

    def close(self) -> None:
        """Flush and close the file."""
        if not self.closed:
            self._file.close()
        super().close()


def read_progress(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read a CSV written by :class:`CsvSink` into float columns.

    Args:
        path: the CSV file.

    Returns:
        Column name to a ``float64`` array with one entry per row, in header
        order; empty cells are ``nan``.
    """
    header, rows = _read_rows(Path(path))
    return {
        name: np.array(
            [float(row[name]) if row.get(name) else np.nan for row in rows],
            dtype=np.float64,
        )
        for name in header
    }
