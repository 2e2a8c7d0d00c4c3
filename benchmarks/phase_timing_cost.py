"""What the samplers' phase timings cost: a timed batch vs the same loop untimed.

Every parllel sampler reads the clock a few times per time step (never per
env) to split each batch into env stepping, waiting on workers, inference
and transforms (``sampler.phase_times``). This measures what that costs
where it shows most: CartPole envs in a serial cage with a random agent
(each time step is cheap, so fixed per-step costs weigh the most), and the
same with 64 envs in a process cage (main-process share + one worker).

- ``timed``: ``FeedForwardSampler.collect_batch()`` as shipped.
- ``untimed``: the same loop written here from the same step functions
  (``act``, ``step_async`` / ``await_step``, ``finish_step``, bootstrap and
  final values, transforms), without the clock reads; the reference.

The timing code is also timed alone (its clock reads and sums for
``batch_T`` steps and the recording, best of 200 rounds):
``instrumentation_us`` per batch and ``instrumentation_pct`` of an untimed
batch. That is the cost itself, free of the end-to-end comparison's noise
(a few percent on this shared 2-core VM, either way).

The two alternate batch by batch within each repeat (the machine's speed
drifts; each goes first every other batch), and the figures are medians over repeats of the mean seconds per
batch. Reported: steps/s of both and ``timing_cost_pct`` (how much slower
the timed loop is, in percent; the goal is < 1 %) per setting, and the
worst of them (``worst_timing_cost_pct``, ``worst_instrumentation_pct``).

Usage: python benchmarks/phase_timing_cost.py [--quick] [--batches N] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402

from parllel.agents import NumpyHandler, RandomAgent  # noqa: E402
from parllel.builders import build_sample_tree  # noqa: E402
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402
from parllel.samplers.steps import (  # noqa: E402
    act,
    bootstrap_values,
    final_values_batched,
    finish_step,
)

BATCH_T = 128


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def untimed_batch(sampler: FeedForwardSampler) -> None:
    """``FeedForwardSampler.collect_batch`` without its clock reads."""
    sampler._begin_batch()
    tree, handler = sampler.sample_tree, sampler.handler
    everyone = sampler.all_envs
    completed: list[Any] = []
    for t in range(sampler.batch_T):
        act(handler, everyone, t)
        for cage, group in zip(sampler.cages, sampler.views):
            cage.step_async(group.action[t], group.step_slots[t])
        for cage in sampler.cages:
            completed += cage.await_step()
        finish_step(everyone, t, sampler.observation_normalizer)
    if sampler.finite_check is not None:
        sampler.finite_check(tree)
    bootstrap_values(handler, everyone)
    final_values_batched(handler, everyone)
    if sampler.transform is not None:
        sampler.transform(tree)


def instrumentation_seconds(sampler: FeedForwardSampler, rounds: int = 200) -> float:
    """Seconds per batch of the timing code alone: the loop's clock reads and
    sums for ``batch_T`` steps, reading the cages' counters and recording."""
    clock = time.perf_counter
    best = float("inf")
    for _ in range(rounds):
        begin = clock()
        start, local = clock(), sampler._local_step_seconds()
        inference = envs = 0.0
        for _ in range(sampler.batch_T):
            t0 = clock()
            t1 = clock()
            inference += t1 - t0
            envs += clock() - t1
        values_start = clock()
        transforms_start = clock()
        end = clock()  # what BatchSampler._end_batch records
        stepping = min(envs, sampler._local_step_seconds() - local)
        sampler.phase_times.record(
            {
                "batch": end - start,
                "env_step": stepping,
                "worker_wait": envs - stepping,
                "inference": inference + transforms_start - values_start,
                "transforms": end - transforms_start,
            }
        )
        best = min(best, clock() - begin)
    sampler.phase_times.take()
    return best


def measure(cage: Any, n_envs: int, batches: int, repeats: int) -> dict[str, float]:
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), n_envs)
    tree = build_sample_tree(cage, handler, BATCH_T)
    sampler = FeedForwardSampler(cage, handler, tree)

    def untimed_batch_of() -> None:
        untimed_batch(sampler)

    try:
        for _ in range(3):  # warm up both loops
            sampler.collect_batch()
            untimed_batch(sampler)
        timed, untimed = [], []
        for _ in range(repeats):
            seconds = {"timed": 0.0, "untimed": 0.0}
            loops = [("timed", sampler.collect_batch), ("untimed", untimed_batch_of)]
            for n in range(batches):
                for name, loop in loops if n % 2 else loops[::-1]:  # either first
                    start = time.perf_counter()
                    loop()
                    seconds[name] += time.perf_counter() - start
            timed.append(seconds["timed"] / batches)
            untimed.append(seconds["untimed"] / batches)
        sampler.phase_times.take()
        instrumentation = instrumentation_seconds(sampler)
    finally:
        cage.close()
        tree.close()
    t_timed, t_untimed = statistics.median(timed), statistics.median(untimed)
    steps = BATCH_T * n_envs
    return {
        "timed_sps": round(steps / t_timed, 1),
        "untimed_sps": round(steps / t_untimed, 1),
        "timing_cost_pct": round(100.0 * (t_timed / t_untimed - 1.0), 3),
        "instrumentation_us": round(1e6 * instrumentation, 2),
        "instrumentation_pct": round(100.0 * instrumentation / t_untimed, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny run (tests)")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    pin_threads()
    batches, repeats = (2, 2) if args.quick else (args.batches, args.repeats)
    result: dict[str, Any] = {
        "batch_T": BATCH_T,
        "batches": batches,
        "repeats": repeats,
    }
    settings = {
        "cartpole8_serial": lambda: (
            SerialCage(make_env, 8, options=CageOptions(seed=0)),
            8,
        ),
        "cartpole64_process": lambda: (
            ProcessCage(
                make_env,
                64,
                options=CageOptions(seed=0),
                layout=ProcessLayout(n_workers=1, main_process_envs=32),
            ),
            64,
        ),
    }
    for name, build in settings.items():
        cage, n_envs = build()
        figures = measure(cage, n_envs, batches, repeats)
        print(f"{name}: {figures}", flush=True)
        result.update({f"{name}_{key}": value for key, value in figures.items()})
    result["worst_timing_cost_pct"] = max(
        result[f"{name}_timing_cost_pct"] for name in settings
    )
    result["worst_instrumentation_pct"] = max(
        result[f"{name}_instrumentation_pct"] for name in settings
    )
    print_result(result)


if __name__ == "__main__":
    main()
