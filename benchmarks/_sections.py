"""The time-boxed sections of benchmarks/device_check.py: their boxes, how one
runs, and how a part that is not measured is reported.

A section is ``run(box, out)``: it fills ``out`` as it measures and leaves
what no longer fits in ``box`` (``box.fits``); a part it cannot measure gets
a null value and a ``skipped: <reason>`` line (:func:`absent`).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable
from typing import Any


class Box:
    """A section's time box: its deadline, and whether a measurement still fits."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left in the box."""
        return self.deadline - time.monotonic()

    def fits(self, seconds: float) -> bool:
        """Whether a measurement of about ``seconds`` (start-up included) fits."""
        return self.left() > seconds


Section = Callable[[Box, dict], None]
"""``run(box, out)``: measures into ``out`` what fits in ``box``"""


class BoxExceeded(Exception):
    """A section ran past its hard limit (its box plus a grace period)."""


def attempt(label: str, fn: Callable[..., dict], *args: Any) -> dict[str, Any]:
    """``fn(*args)``, or ``{"error": ...}`` (printed) if it raises: one
    configuration's failure does not end its section."""
    try:
        return fn(*args)
    except BoxExceeded:
        raise
    except Exception as exc:  # reported, and the section moves on
        error = f"{type(exc).__name__}: {exc}"
        print(f"[{label}] failed: {error}", file=sys.stderr)
        return {"error": error}


def run_section(
    name: str, seconds: float, fn: Section, results: dict, grace: float = 20.0
) -> None:
    """Run ``fn(box, out)``, which fills ``out`` as it measures; an alarm stops
    it past ``seconds`` + ``grace``, an exception ends it; ``out`` is kept
    either way and printed at once as one JSON line ``{"section": name, ...}``."""
    out: dict[str, Any] = {}
    results[name] = out

    def on_alarm(signum: int, frame: Any) -> None:
        raise BoxExceeded(f"past its {seconds:.0f} s box")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds + grace, 1.0))
    start = time.monotonic()
    try:
        fn(Box(seconds), out)
    except Exception as exc:  # measured parts stay; the error is reported
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(f"[{name}] stopped: {out['error']}", file=sys.stderr)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    out["seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps({"section": name, **out}, sort_keys=True, default=str), flush=True)


def skipped(reason: str) -> None:
    """Print why a part is not measured (its JSON value is null)."""
    print(f"skipped: {reason}", file=sys.stderr)


def absent(out: dict, key: str, reason: str) -> None:
    """Leave ``out[key]`` null and print why (:func:`skipped`)."""
    skipped(reason)
    out[key] = None
