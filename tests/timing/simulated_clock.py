"""A clock that moves only when the code under test says so (tests of timings)."""

from __future__ import annotations


class SimulatedClock:
    """Callable like ``time.perf_counter``; :meth:`advance` moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
