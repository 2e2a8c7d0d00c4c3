"""Helpers shared by the benchmark scripts (timing, JSON output, torch pinning)."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def pin_threads() -> None:
    """Pin numeric libraries (and torch, if installed) to one thread."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


def median_time(fn: Callable[[], Any], repeats: int, number: int = 1) -> float:
    """Median over ``repeats`` runs of the seconds per call of ``fn`` (``number`` calls a run)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def print_result(result: dict[str, Any]) -> None:
    """Print the benchmark's figures as the last line: one JSON object."""
    print(json.dumps(result, sort_keys=True))
