"""Env steps per second through parllel's interop vector envs and their peers.

Random actions are pre-sampled (sampling cost is not measured); every
contender of a comparison steps the same number of envs with the same
actions, after a few untimed warm-up steps. Comparisons (the target ratio of
each in parentheses):

- ``gym_cartpole64_vs_async``: ``make_vec(parallel=True)`` vs gymnasium's
  ``AsyncVectorEnv(shared_memory=True)``, 64 CartPole-v1 envs (>= 5);
- ``gym_cartpole64_vs_cage``: ``make_vec(parallel=True)`` vs the bare
  parllel loop over the same ``ProcessCage`` layout, driven directly with
  preallocated slots as samplers do (>= 0.85);
- ``sb3_cartpole64_vs_subproc``: ``make_sb3_vec_env(parallel=True)`` vs
  SB3's ``SubprocVecEnv``, 64 CartPole-v1 envs (>= 5);
- ``gym_cpu200us_vs_sync``: ``make_vec(parallel=True)`` vs gymnasium's
  ``SyncVectorEnv`` on 8 envs that burn ~200 us of CPU per step (>= 1.4).

Also measured, for context: gymnasium's ``SyncVectorEnv`` and SB3's
``DummyVecEnv`` (64 CartPole envs), ``make_vec(copy=False)``, a plain Python
loop over the envs (``raw``) and the 2-core ``ceiling``: two independent
processes, each a raw loop over half the envs, no communication at all
(see ``cage_throughput.py``). EnvPool does not install here: it is reported
as skipped. Without Stable-Baselines3 (the ``bench`` extra) the SB3 figures
are null.

Medians over interleaved repeats, torch pinned to one thread. ``--quick``
runs 2 envs and a few steps (the key names stay). Last line:
one JSON object with the four ratios, ``{comparison}_{contender}_sps`` for
every contender and ``envpool``.

Usage: python benchmarks/interop_bench.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    have,
    interleaved_medians,
    make_cartpole,
    pin_threads,
    print_result,
    ratio,
    steps_per_second,
)
from cage_throughput import run_cage, run_ceiling, run_raw  # noqa: E402
from synthetic_envs import CpuBoundEnv, busy_iterations  # noqa: E402

from parllel.cages import CageOptions, ProcessCage, ProcessLayout  # noqa: E402
from parllel.interop import make_vec  # noqa: E402

TARGETS = {
    "gym_cartpole64_vs_async": 5.0,
    "gym_cartpole64_vs_cage": 0.85,
    "sb3_cartpole64_vs_subproc": 5.0,
    "gym_cpu200us_vs_sync": 1.4,
}
"""the ratio each comparison aims for (printed next to the measured one)"""


def process_layout(n_envs: int) -> dict[str, int]:
    """The ProcessCage layout of every process contender of parllel.

    The one ``make_vec(parallel=True)`` picks when processes pay: the main
    process steps ``1 / cores`` of the envs, ``cores - 1`` workers the rest
    (given explicitly, so the adapters and the bare cage loop step alike; one
    worker at least).
    """
    cores = max(2, min(len(os.sched_getaffinity(0)), n_envs))
    return {
        "layout": ProcessLayout(main_process_envs=n_envs // cores, n_workers=cores - 1)
    }


def settings(quick: bool) -> dict[str, dict]:
    """Setting name -> env factory (zero arguments), n_envs, vector steps."""
    n64, n8 = (2, 2) if quick else (64, 8)
    scale = 0.02 if quick else 1.0
    cpu_env = partial(CpuBoundEnv, iterations=busy_iterations(200e-6))
    return {
        "cartpole64": dict(factory=make_cartpole, n=n64, steps=int(600 * scale)),
        "cpu200us": dict(factory=cpu_env, n=n8, steps=int(1500 * scale)),
    }


def run_vector_env(
    make_envs: Callable[[], Any], actions: np.ndarray, api: str
) -> float:
    """Steady-state steps/s of a gymnasium (``api="gym"``) or SB3 vector env.

    Built and reset (seed 0) untimed; the first eighth of the steps (at most
    20) warm up untimed.
    """
    envs = make_envs()
    try:
        if api == "gym":
            envs.reset(seed=0)
        else:
            envs.seed(0)
            envs.reset()
        return steps_per_second(envs.step, actions, min(20, len(actions) // 8))
    finally:
        envs.close()


def cage_spec(spec: dict) -> dict:
    """``spec`` in the shape cage_throughput's helpers take."""
    return dict(spec, kwargs={})


def gym_contenders(spec: dict, actions: np.ndarray) -> dict[str, Callable[[], float]]:
    """Name -> zero-argument callable returning steps/s, gymnasium interface."""
    factory, n = spec["factory"], spec["n"]
    layout = process_layout(n)

    def vector(make: Callable[[], Any]) -> Callable[[], float]:
        return partial(run_vector_env, make, actions, "gym")

    return {
        "make_vec": vector(
            lambda: make_vec(factory, n, parallel=True, seed=0, **layout)
        ),
        "make_vec_nocopy": vector(
            lambda: make_vec(factory, n, parallel=True, seed=0, copy=False, **layout)
        ),
        "cage": lambda: run_cage(
            lambda: ProcessCage(factory, n, options=CageOptions(seed=0), **layout),
            actions,
        ),
        "sync": vector(lambda: gym.vector.SyncVectorEnv([factory] * n)),
        "async": vector(
            lambda: gym.vector.AsyncVectorEnv([factory] * n, shared_memory=True)
        ),
        "raw": lambda: run_raw(cage_spec(spec), actions),
        "ceiling": lambda: run_ceiling(cage_spec(spec), actions),
    }


def sb3_contenders(spec: dict, actions: np.ndarray) -> dict[str, Callable[[], float]]:
    """Name -> zero-argument callable returning steps/s, SB3 interface."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from parllel.interop import make_sb3_vec_env  # imports SB3

    factory, n = spec["factory"], spec["n"]
    layout = process_layout(n)

    def vector(make: Callable[[], Any]) -> Callable[[], float]:
        return partial(run_vector_env, make, actions, "sb3")

    return {
        "make_sb3_vec_env": vector(
            lambda: make_sb3_vec_env(factory, n, parallel=True, seed=0, **layout)
        ),
        "subproc": vector(lambda: SubprocVecEnv([factory] * n)),
        "dummy": vector(lambda: DummyVecEnv([factory] * n)),
    }


def measure(
    contenders: dict[str, Callable[[], float]], repeats: int, prefix: str
) -> dict[str, float]:
    """Medians over interleaved repeats (drift hits every contender alike)."""
    result = {}
    for key, median in interleaved_medians(contenders, repeats).items():
        print(f"{prefix:>15} {key:>17}: {median:10.0f} steps/s", flush=True)
        result[f"{prefix}_{key}_sps"] = round(median, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    pin_threads()
    repeats = args.repeats or (1 if args.quick else 5)
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {"n_envs": {}}
    for name, spec in settings(args.quick).items():
        actions = rng.integers(0, 2, (max(spec["steps"], 16), spec["n"]))
        result["n_envs"][name] = spec["n"]
        result.update(measure(gym_contenders(spec, actions), repeats, f"gym_{name}"))
        if name == "cartpole64":
            if have("stable_baselines3"):
                contenders = sb3_contenders(spec, actions)
                result.update(measure(contenders, repeats, f"sb3_{name}"))
            else:
                print("sb3: skipped (stable-baselines3 is not installed)")
                for key in ("make_sb3_vec_env", "subproc", "dummy"):
                    result[f"sb3_{name}_{key}_sps"] = None

    comparisons = [
        ("gym_cartpole64_vs_async", "gym_cartpole64_make_vec", "gym_cartpole64_async"),
        ("gym_cartpole64_vs_cage", "gym_cartpole64_make_vec", "gym_cartpole64_cage"),
        (
            "sb3_cartpole64_vs_subproc",
            "sb3_cartpole64_make_sb3_vec_env",
            "sb3_cartpole64_subproc",
        ),
        ("gym_cpu200us_vs_sync", "gym_cpu200us_make_vec", "gym_cpu200us_sync"),
    ] + [
        (
            f"gym_{name}_make_vec_vs_ceiling",
            f"gym_{name}_make_vec",
            f"gym_{name}_ceiling",
        )
        for name in ("cartpole64", "cpu200us")
    ]
    for key, top, bottom in comparisons:
        result[key] = ratio(result.get(f"{top}_sps"), result.get(f"{bottom}_sps"))
    for key, target in TARGETS.items():
        print(f"{key:>26}: {result[key]} (target >= {target})")
    if importlib.util.find_spec("envpool") is None:
        result["envpool"] = "skipped: not installed"
    else:
        result["envpool"] = "skipped: no EnvPool contender in this benchmark"
    print(f"{'envpool':>26}: {result['envpool']}")
    print_result(result)


if __name__ == "__main__":
    main()
