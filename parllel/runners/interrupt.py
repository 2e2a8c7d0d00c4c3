"""Ctrl-C and SIGTERM in training loops: stop at a safe point, exit on the second.

Worker processes ignore SIGINT (the main process decides), so a Ctrl-C in a
terminal, which reaches the whole process group, only reaches this handler.
SIGTERM (``kill PID``, a job scheduler's stop request) is handled the same
way, so a run stopped from outside also ends with a checkpoint.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

SECOND_PRESS = "Ctrl-C again to exit at once, without a checkpoint"
SECOND_SIGTERM = "SIGTERM again to exit at once, without a checkpoint"

#: The signals handled, and how the messages name them.
SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def _say(message: str) -> None:
    """Write to stderr's file descriptor directly.

    A signal handler may run while the main code is inside a write to
    ``sys.stderr``; writing through the same buffered stream again would
    raise "reentrant call". ``os.write`` has no buffer to re-enter.
    """
    stderr = sys.__stderr__
    if stderr is None:  # no usable stderr
        return
    try:
        os.write(stderr.fileno(), f"\n{message}\n".encode())
    except (AttributeError, OSError, ValueError):  # no usable stderr
        pass


class InterruptHandler:
    """Turn the first SIGINT or SIGTERM into a stop request; let the second through.

    A context manager: inside it, the first SIGINT (Ctrl-C) or SIGTERM calls
    ``on_first(signum)`` (which asks the loop to stop at its next safe point
    and returns a message to print); a second one raises ``KeyboardInterrupt``
    at once. The previous handlers are restored on exit. Outside the main
    thread (where Python cannot install signal handlers), or with
    ``enabled=False``, it does nothing. A signal that is ignored (SIGINT in a
    background job a shell started with ``cmd &``) stays ignored:
    :attr:`sigint_ignored` says so, for a warning. SIGTERM is only taken over
    from its default action (a handler of your own stays in place).

    Example:
        >>> with InterruptHandler(lambda signum: setattr(loop, "stop", True) or "stopping"):
        ...     while not loop.stop:
        ...         loop.step()

    Args:
        on_first: called with the signal number on the first signal; returns
            the message printed (after the signal's name).
        enabled: install the handler at all.

    Attributes:
        received: the signals received inside the context, in order.
        sigint_ignored: SIGINT was ignored on entry, so Ctrl-C cannot reach
            the loop.
        handled: the signals this handler took over on entry.
    """

    def __init__(self, on_first: Callable[[int], str], *, enabled: bool = True) -> None:
        self.on_first = on_first
        self.enabled = enabled
        self.received: list[int] = []
        self.sigint_ignored = False
        self._previous: dict[int, Any] = {}

    @property
    def handled(self) -> set[int]:
        """The signals this handler took over on entry (until exit)."""
        return set(self._previous)

    @property
    def pressed(self) -> int:
        """How many of the handled signals arrived."""
        return len(self.received)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if len(self.received) > 1:
            raise KeyboardInterrupt
        again = SECOND_PRESS if signum == signal.SIGINT else SECOND_SIGTERM
        _say(
            f"{SIGNAL_NAMES[signal.Signals(signum)]}: {self.on_first(signum)} ({again})"
        )

    def __enter__(self) -> InterruptHandler:
        if not (self.enabled and threading.current_thread() is threading.main_thread()):
            return self
        for signum in SIGNAL_NAMES:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:  # e.g. a background job: keep it so
                self.sigint_ignored |= signum == signal.SIGINT
                continue
            if signum == signal.SIGTERM and previous is not signal.SIG_DFL:
                continue  # someone else's SIGTERM handler
            signal.signal(signum, self._handle)
            self._previous[signum] = previous
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            if previous is None:  # installed from C: put back Python's default
                previous = (
                    signal.default_int_handler
                    if signum == signal.SIGINT
                    else signal.SIG_DFL
                )
            signal.signal(signum, previous)
        self._previous = {}
