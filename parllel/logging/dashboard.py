"""A live terminal dashboard of a training run, or plain one-line summaries.

:class:`Dashboard` is a :class:`~parllel.logging.Logger`. On a terminal it
draws one panel with ``rich`` and redraws it a few times per second from a
background thread: progress and ETA, steps per second, where the time goes,
returns with a sparkline, the latest evaluation, the algorithm's losses,
asynchronous-sampling lag and restarts, CPU and memory. ``log`` only stores
the metrics. Off a terminal (or with ``live=False``) each ``log`` call
prints one plain line instead, without escape codes.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from parllel.errors import MissingDependencyError
from parllel.errors.base import install_hint
from parllel.logging.base import Sink, to_scalars
from parllel.logging.dashboard_state import DashboardState
from parllel.logging.process_usage import ProcessMonitor, ProcessUsage
from parllel.logging.progress import _is_tty
from parllel.validation import check_at_least, check_positive

#: Seconds between two readings of the processes' CPU and memory.
SYSTEM_INTERVAL_S = 2.0


def _rich_console_class() -> Any:
    try:
        from rich.console import Console
    except ImportError as error:
        raise MissingDependencyError(
            "the live Dashboard needs the 'rich' package: pip install rich, or "
            f"{install_hint('logging')} (or pass live=False for plain lines)"
        ) from error
    return Console


class Dashboard(Sink):
    """Show a run live in the terminal; plain summary lines elsewhere.

    Live mode (a terminal, or ``live=True``) redraws a ``rich`` panel from its
    own thread; ``log`` only stores the metrics and ``close()`` (safe to call
    twice, also run at exit) leaves the final state on screen. Plain mode
    writes one line per ``log`` call and needs no ``rich``. The sections and
    the metrics they read: docs/logging.md ("Live dashboard").

    Example:
        >>> dashboard = Dashboard(total_steps=100_000, title="ppo")
        >>> dashboard.log(4096, {"train/return_mean": 21.5, "time/elapsed_s": 1.0})
        >>> dashboard.close()

    Args:
        total_steps: env steps of the whole run (None: no bar, no ETA).
        live: None (live if the output is a terminal), True or False.
        console: a ``rich.console.Console`` to draw on (default: on ``stream``).
        bar_width: cells of each bar; None fits them to the console width.
        clock: monotonic seconds; injectable for tests.

    Raises:
        ConfigError: a non-positive rate, history or bar width.
        MissingDependencyError: live mode without ``rich``.
    """

    def __init__(
        self,
        total_steps: int | None = None,
        *,
        live: bool | None = None,
        console: Any = None,
        stream: TextIO | None = None,
        title: str = "parllel",
        refresh_per_second: float = 1.0,
        bar_width: int | None = None,
        history: int = 60,
        system: bool = True,
        clock: Callable[[], float] | None = None,
    ) -> None:
        check_positive(
            "Dashboard refresh_per_second", refresh_per_second, allow_inf=True
        )
        check_at_least("Dashboard history", history)
        if bar_width is not None:
            check_at_least("Dashboard bar_width", bar_width)
        self.clock = clock if clock is not None else time.monotonic
        self.stream = stream
        self.title = title
        self.refresh_per_second = float(refresh_per_second)
        self.bar_width = bar_width
        if live is None:
            if console is not None:
                live = bool(console.is_terminal)
            else:
                live = _is_tty(stream if stream is not None else sys.stdout)
        self.live = bool(live)
        self.console = console
        if self.live and console is None:
            self.console = _rich_console_class()(file=stream)
        self.state = DashboardState(total_steps, history=history, now=self.clock())
        self.monitor = ProcessMonitor(clock=self.clock) if system else None
        self._usage: ProcessUsage | None = None
        self._usage_at: float | None = None
        self._lock = threading.Lock()
        self._display: Any = None

    # -- the Logger protocol ---------------------------------------------------
    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Store ``metrics`` at ``step`` (plain mode: also print the summary line)."""
        if self.closed:
            raise ValueError("Dashboard.log called after close()")
        metrics = to_scalars(metrics)
        with self._lock:
            self.state.update(step, metrics, self.clock())
        if not self.live:
            self._write_line(self.state.summary_line(self.clock(), self.usage()))
        elif self._display is None:
            self._start()

    def notice(self, text: str) -> None:
        """Show ``text`` (e.g. "Ctrl-C: stopping after this iteration") above
        the live panel, where the next redraw cannot erase it. Plain output
        shows nothing more: what was written to stderr stays in order there."""
        if self.closed or self._display is None:
            return
        self.console.print(text, style="bold yellow", highlight=False)

    def rewind(self, step: int) -> None:
        """Continue from ``step`` (a resumed checkpoint): rates restart there and
        returns and evaluations logged after it are forgotten."""
        with self._lock:
            self.state.rewind(step, self.clock())

    def close(self) -> None:
        """Draw the final state and stop the live display (harmless twice)."""
        if self.closed:
            return
        self.closed = True
        atexit.unregister(self.close)
        display, self._display = self._display, None
        if display is not None:
            display.stop()
            if not self.console.is_terminal or self.console.is_dumb_terminal:
                # rich ends the final panel with a newline on terminals only
                self.console.line()

    # -- drawing ---------------------------------------------------------------
    def usage(self) -> ProcessUsage | None:
        """CPU and memory of the run's processes, read at most every ``SYSTEM_INTERVAL_S``."""
        if self.monitor is None:
            return None
        now = self.clock()
        if self._usage_at is None or now - self._usage_at >= SYSTEM_INTERVAL_S:
            self._usage, self._usage_at = self.monitor.sample(), now
        return self._usage

    def render(self, *, show_errors: bool = False) -> Any:
        """The dashboard as it is now: a rich renderable laid out for the console
        it is printed on (``console.print(dashboard.render())``).

        With ``show_errors`` an error while laying it out is drawn as a red
        line instead of raised (what the live display does: a bug in the
        dashboard must not stop training).
        """
        from parllel.logging.dashboard_view import DashboardView

        usage = self.usage()
        with self._lock:
            state, now = self.state.snapshot(), self.clock()
        return DashboardView(
            state,
            now,
            usage,
            bar_width=self.bar_width,
            title=self.title,
            show_errors=show_errors,
        )

    def _render_for_display(self) -> Any:
        try:
            return self.render(show_errors=True)
        except Exception as error:  # noqa: BLE001 - keep training; show the bug
            from rich.text import Text

            return Text(f"dashboard error: {error!r}", style="bold red")

    def _start(self) -> None:
        from rich.live import Live

        display = Live(
            console=self.console,
            get_renderable=self._render_for_display,
            refresh_per_second=self.refresh_per_second,
            transient=False,
        )
        atexit.register(self.close)
        display.start(refresh=True)
        self._display = display

    def _write_line(self, line: str) -> None:
        if self.console is not None:
            self.console.out(line, highlight=False)
            return
        stream = self.stream if self.stream is not None else sys.stdout
        stream.write(line + "\n")
        stream.flush()
