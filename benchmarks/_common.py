"""Helpers shared by the benchmark scripts: timing, medians over interleaved
repeats, JSON output, torch pinning, and the env factories several compare on."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import gymnasium as gym

# picklable by reference (gymnasium's own function), for every process start method
make_cartpole = partial(gym.make, "CartPole-v1", disable_env_checker=True)
"""CartPole-v1 without gymnasium's checker wrappers' per-step overhead"""

PONG_ID, ENVPOOL_PONG_ID = "ALE/Pong-v5", "Pong-v5"
ENVPOOL_PONG: dict[str, Any] = dict(  # make_pong's stack, in EnvPool's terms
    stack_num=4,
    frame_skip=4,
    noop_max=30,
    img_height=84,
    img_width=84,
    gray_scale=True,
    episodic_life=False,
    reward_clip=False,
    repeat_action_probability=0.0,
)


def make_pong() -> gym.Env:
    """Pong with parllel's standard Atari stack (``make_atari_env``'s defaults)."""
    from parllel.envs.atari import make_atari_env

    return make_atari_env(PONG_ID)


def have(module: str) -> bool:
    """Whether ``module`` imports (one that fails for any reason is absent)."""
    try:
        __import__(module)
    except Exception:
        return False
    return True


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


def steps_per_second(
    step: Callable[[Any], Any], actions: Any, warmup: int = 0
) -> float:
    """Steps/s of ``step(row)`` over the rows of the array ``actions`` (each of
    its items is a step), the first ``warmup`` rows untimed."""
    for row in actions[:warmup]:
        step(row)
    start = time.perf_counter()
    for row in actions[warmup:]:
        step(row)
    elapsed = time.perf_counter() - start
    return actions[warmup:].size / elapsed


def _put_span(
    half: Callable[[Any], tuple[float, float]], barrier: Any, queue: Any
) -> None:
    queue.put(half(barrier))


def two_process_wall(halves: list[Callable[[Any], tuple[float, float]]]) -> float:
    """Seconds from the first start to the last end of ``halves``, each run in
    its own forked process, no communication between them: ``half(barrier)``
    waits on ``barrier`` where all should start together and returns its
    (start, end) clock readings. What the cores give without any
    synchronization (a ceiling); it varies with the machine's load."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    queue, barrier = ctx.Queue(), ctx.Barrier(len(halves))
    procs = [
        ctx.Process(target=_put_span, args=(half, barrier, queue)) for half in halves
    ]
    for proc in procs:
        proc.start()
    spans = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    return max(end for _, end in spans) - min(start for start, _ in spans)


def interleaved_medians(
    contenders: dict[str, Callable[[], float]],
    repeats: int,
    again: Iterable[str] = (),
) -> dict[str, float]:
    """Median of each contender's figure over ``repeats`` rounds, every round
    running all of them in turn (drift hits every contender alike); the
    contenders named in ``again`` run once more at the end of each round."""
    again = list(again)
    samples: dict[str, list[float]] = {key: [] for key in contenders}
    for _ in range(repeats):
        for key, run in contenders.items():
            samples[key].append(run())
        for key in again:
            samples[key].append(contenders[key]())
    return {key: statistics.median(values) for key, values in samples.items()}


def ratio(top: float | None, bottom: float | None) -> float | None:
    """``top / bottom`` rounded to 3 digits, or None if either is missing."""
    return None if top is None or not bottom else round(top / bottom, 3)


def print_result(result: dict[str, Any]) -> None:
    """Print the benchmark's figures as the last line: one JSON object."""
    print(json.dumps(result, sort_keys=True))
