"""Ctrl-C handling for training loops: stop at a safe point, exit on the second.

Worker processes ignore SIGINT (the main process decides), so a Ctrl-C in a
terminal, which reaches the whole process group, only reaches this handler.
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
    """Turn the first SIGINT into a stop request; let the second one through.

    A context manager: inside it, the first SIGINT calls ``on_first()`` (which
    asks the loop to stop at its next safe point and returns a message to
    print); a second SIGINT raises ``KeyboardInterrupt`` at once. The
    previous handler is restored on exit. Outside the main thread (where
    Python cannot install signal handlers), where SIGINT is ignored (a
    background job started by a shell), or with ``enabled=False`` it does
    nothing.

    Example:
        >>> with InterruptHandler(lambda: setattr(loop, "stop", True) or "stopping"):
        ...     while not loop.stop:
        ...         loop.step()

    Args:
        on_first: called on the first SIGINT; returns the message printed.
        enabled: install the handler at all.
    """

    def __init__(self, on_first: Callable[[], str], *, enabled: bool = True) -> None:
        self.on_first = on_first
        self.enabled = enabled
        self.pressed = 0
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.pressed += 1
        if self.pressed > 1:
            raise KeyboardInterrupt
        _say(f"{self.on_first()} ({SECOND_PRESS})")

    def __enter__(self) -> InterruptHandler:
        if self.enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            if self._previous is signal.SIG_IGN:  # e.g. a background job: keep it so
                return self
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._installed:
            previous = self._previous
            if previous is None:  # installed from C: put back Python's default
                previous = signal.default_int_handler
            signal.signal(signal.SIGINT, previous)
            self._installed = False
