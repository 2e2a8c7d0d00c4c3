"""A logger printing metrics as an aligned key/value table."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TextIO

from parllel.errors import ConfigError
from parllel.logging.base import Sink, format_value, to_scalars


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


class StdoutTable(Sink):
    """Print every ``every``-th ``log`` call as an aligned table.

    Calls in between are dropped (not averaged): average upstream, e.g. with
    :class:`~parllel.logging.EpisodeStats`, if the table should summarize
    them.

    Example:
        >>> table = StdoutTable(every=5)
        >>> for update in range(10):
        ...     table.log(update * 4096, {"loss": 0.1})  # prints at updates 0 and 5

    Args:
        every: print on calls ``0, every, 2 * every, ...``.
        stream: where to write; ``sys.stdout`` (looked up at each print) if None.
        sort: sort rows by metric name.
    """

    def __init__(
        self, every: int = 1, stream: TextIO | None = None, *, sort: bool = True
    ) -> None:
        if every < 1:
            raise ConfigError(f"StdoutTable every must be >= 1, got {every}")
        self.every = every
        self.stream = stream
        self.sort = sort
        self.calls = 0

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Print the table if this call is one of every ``every``."""
        if self.closed:
            raise ValueError("StdoutTable.log called after close()")
        call, self.calls = self.calls, self.calls + 1
        if call % self.every:
            return
        stream = self.stream if self.stream is not None else sys.stdout
        stream.write(format_table(step, to_scalars(metrics), sort=self.sort) + "\n")
        stream.flush()
