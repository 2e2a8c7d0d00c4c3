"""A logger printing a compact table of the main metrics to the console."""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from parllel.errors import ConfigError
from parllel.logging.base import Sink, format_value, to_scalars
from parllel.validation import check_at_least

#: What :class:`StdoutTable` shows by default: returns, losses, speed, time, lag.
COMPACT_KEYS = (
    "*/return_mean",
    "*loss*",
    "time/steps_per_second",
    "time/elapsed_s",
    "async/lag_max",
)


def format_table(
    step: int, metrics: Mapping[str, int | float], *, sort: bool = True
) -> str:
    """Render ``metrics`` at ``step`` as a boxed two-column table.

    Keys are left-aligned, values right-aligned; with ``sort`` the keys are
    sorted so that ``train/...`` and ``eval/...`` entries group together.

    Example:
        >>> print(format_table(4096, {"train/return_mean": 21.5, "loss": 0.25}))
        +-------------------+-------+
        | step              |  4096 |
        +-------------------+-------+
        | loss              |  0.25 |
        | train/return_mean |  21.5 |
        +-------------------+-------+

    Args:
        step: the global step, shown in the first row.
        metrics: names to already-converted numbers.
        sort: sort the rows by key.

    Returns:
        The table as one string without a trailing newline.
    """
    keys = sorted(metrics) if sort else list(metrics)
    rows = [(key, format_value(metrics[key])) for key in keys]
    step_text = str(step)
    key_width = max([len("step"), *(len(key) for key, _ in rows)])
    value_width = max([len(step_text), *(len(text) for _, text in rows)]) + 1
    rule = f"+{'-' * (key_width + 2)}+{'-' * (value_width + 2)}+"

    def line(key: str, text: str) -> str:
        return f"| {key:<{key_width}} | {text:>{value_width}} |"

    lines = [rule, line("step", step_text), rule]
    lines.extend(line(key, text) for key, text in rows)
    if rows:
        lines.append(rule)
    return "\n".join(lines)


def select_metrics(
    metrics: Mapping[str, Any], keys: Sequence[str] | None
) -> dict[str, Any]:
    """The entries of ``metrics`` whose names match one of the ``keys`` patterns.

    Patterns are shell-style (``fnmatch``): ``"*/return_mean"``, ``"algo/*"``.
    ``keys=None`` keeps everything.
    """
    if keys is None:
        return dict(metrics)
    return {
        name: value
        for name, value in metrics.items()
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in keys)
    }


class StdoutTable(Sink):
    """Print every ``every``-th ``log`` call as a compact table, and the last at close.

    Shows the ``COMPACT_KEYS`` metrics by default; calls in between are dropped
    (average upstream, e.g. with :class:`~parllel.logging.EpisodeStats`). Given
    the run's :class:`~parllel.logging.ProgressBar`, tables are written through
    it so they never collide with the bar.

    Example:
        >>> table = StdoutTable(every=5)
        >>> for update in range(7):
        ...     table.log(update * 4096, {"algo/loss": 0.1})  # prints at 0 and 5
        >>> table.close()  # prints the last call (update 6)

    Args:
        stream: where to write; ``sys.stdout`` (looked up at each print) if None.
        keys: shell-style patterns of the metrics to show; None shows all.
        progress_bar: write through this bar (anything with ``write(text, stream)``).
    """

    def __init__(
        self,
        every: int = 1,
        stream: TextIO | None = None,
        *,
        sort: bool = True,
        keys: Sequence[str] | None = COMPACT_KEYS,
        progress_bar: Any = None,
    ) -> None:
        check_at_least("StdoutTable every", every)
        if isinstance(keys, str):
            raise ConfigError(
                f"StdoutTable keys must be a list of patterns: [{keys!r}]"
            )
        self.every = every
        self.stream = stream
        self.sort = sort
        self.keys = None if keys is None else tuple(keys)
        self.progress_bar = progress_bar
        self.calls = 0
        self._printed = False  # tables after the first start with a blank line
        self._pending: tuple[int, Mapping[str, Any]] | None = None

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Print the table if this call is one of every ``every``."""
        if self.closed:
            raise ValueError("StdoutTable.log called after close()")
        call, self.calls = self.calls, self.calls + 1
        shown = select_metrics(to_scalars(metrics), self.keys)
        if call % self.every:
            self._pending = (step, shown)
            return
        self._pending = None
        self._print(step, shown)

    def _print(self, step: int, metrics: Mapping[str, Any]) -> None:
        text = format_table(step, metrics, sort=self.sort)
        if self._printed:  # not one table's bottom rule on the next's top rule
            text = "\n" + text
        self._printed = True
        stream = self.stream if self.stream is not None else sys.stdout
        if self.progress_bar is not None:
            self.progress_bar.write(text, stream)
        else:
            stream.write(text + "\n")
            stream.flush()

    def close(self) -> None:
        """Print the last logged call if it was skipped, then close."""
        if not self.closed and self._pending is not None:
            step, metrics = self._pending
            self._pending = None
            self._print(step, metrics)
        super().close()
