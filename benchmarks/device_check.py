"""Sampling with a GPU and many cores, measured in one command (issue 30).

Sections, each time-boxed (a section past its box keeps what it measured and
says so; one needing what is absent prints ``skipped: <reason>`` and puts
null in the JSON):

- ``stepping``: env steps/s of process cages (every env in workers) with 1,
  2, 4, 8 and 15 workers, on CartPole (64 envs), a ~200 us CPU env and Pong
  with the standard stack (``parllel.envs.atari``); next to one core's plain
  loop (the ideal line is workers x that), gymnasium's ``AsyncVectorEnv``
  and EnvPool with 1-16 threads where importable;
- ``collect``: ``collect_batch`` steps/s with a CPU handler and a CUDA one
  (blocking copies vs page-locked non-blocking ones), feed-forward vs
  alternating, for an MLP (CartPole) and the Nature CNN (Pong, or a
  synthetic 84x84x4 env without ALE);
- ``ppo``: PPO for a fixed wall time on CartPole and Pong: env steps/s end
  to end and the phase breakdown;
- ``sync``: the non-blocking path collects the batches of the blocking one,
  bit for bit, and the sample tree is page-locked (on CUDA).

Prints a short table, then one JSON line last. The whole run takes at most
about 8 minutes (``--budget``); ``--quick`` runs every section that applies
on a CPU-only machine in seconds (tests/integration/test_benchmarks_quick.py).
docs/gpu.md says how to run it on the GPU machine (benchmarks/device_wheels.sh).

Usage: python benchmarks/device_check.py [--quick] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    ENVPOOL_PONG,
    ENVPOOL_PONG_ID,
    have,
    make_cartpole,
    make_pong,
    pin_threads,
    print_result,
)
from _device_learning import collect_section, ppo_section, sync_section  # noqa: E402
from _sections import Box, Section, absent, run_section, skipped  # noqa: E402
from cage_throughput import cage_slots, plain_envs, step_plain  # noqa: E402
from synthetic_envs import CpuBoundEnv, busy_iterations  # noqa: E402

from parllel.cages import ProcessCage  # noqa: E402
from parllel.cages.plumbing import usable_cores  # noqa: E402

ENVPOOL_IDS = {"cartpole": "CartPole-v1", "pong": ENVPOOL_PONG_ID}


# -- stepping -------------------------------------------------------------------
def timed(step: Callable[[], None], seconds: float, per_call: int) -> float:
    """Items per second of ``step()`` (``per_call`` items a call) over
    ``seconds`` (three calls warm up, untimed)."""
    for _ in range(3):
        step()
    calls, start = 0, time.perf_counter()
    while True:
        step()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * per_call / elapsed


def timed_rows(
    step: Callable[[np.ndarray], Any], actions: np.ndarray, seconds: float
) -> float:
    """Steps/s of ``step(row)`` over the rows of ``actions`` in turn (a row
    is one action per env), as :func:`timed` measures."""
    count = [0]

    def call() -> None:
        step(actions[count[0] % len(actions)])
        count[0] += 1

    return timed(call, seconds, actions.shape[1])


def raw_sps(factory: Callable, kwargs: dict, n: int, seconds: float) -> float:
    """Steps/s of a plain loop over ``n`` envs in this process (one core)."""
    with plain_envs(factory, kwargs, n) as envs:
        actions = np.random.default_rng(0).integers(
            envs[0].action_space.n, size=(64, n)
        )
        return timed_rows(partial(step_plain, envs), actions, seconds)


def cage_sps(
    factory: Callable, kwargs: dict, n: int, workers: int, seconds: float
) -> float:
    """Steps/s of a ProcessCage (every env in ``workers`` workers) writing
    into a shared ``[16, n]`` tree, slots reused as a sampler reuses them."""
    rows = 16
    with (
        ProcessCage(
            factory, n, kwargs, n_workers=workers, main_process_envs=0, seed=0
        ) as cage,
        cage_slots(cage, rows) as (action, slots),
    ):
        actions = np.random.default_rng(0).integers(
            cage.spaces.action.n, size=(rows, n)
        )
        for t in range(rows):
            action[t][...] = actions[t]
        count = [0]

        def step() -> None:
            t = count[0] % rows
            count[0] += 1
            cage.step_async(action[t], slots[t])
            cage.await_step()

        for _ in range(rows):  # workers attach every slot once, untimed
            step()
        return timed(step, seconds, n)


def async_sps(factory: Callable, kwargs: dict, n: int, seconds: float) -> float:
    """Steps/s of gymnasium's AsyncVectorEnv (one process per env, shared memory)."""
    envs = gym.vector.AsyncVectorEnv(
        [partial(factory, **kwargs)] * n, shared_memory=True
    )
    try:
        envs.reset(seed=0)
        actions = np.random.default_rng(0).integers(
            envs.single_action_space.n, size=(64, n)
        )
        return timed_rows(envs.step, actions, seconds)
    finally:
        envs.close()


def envpool_sps(name: str, n: int, threads: int, seconds: float) -> float:
    """Steps/s of EnvPool's own synchronous loop with ``threads`` threads."""
    import envpool

    settings = ENVPOOL_PONG if name == "pong" else {}
    pool = envpool.make_gymnasium(
        ENVPOOL_IDS[name], num_envs=n, batch_size=n, seed=0, num_threads=threads,
        **settings,
    )  # fmt: skip
    try:
        pool.reset()
        actions = np.random.default_rng(0).integers(
            pool.action_space.n, size=(64, n), dtype=np.int32
        )
        return timed_rows(pool.step, actions, seconds)
    finally:
        pool.close()


def have_atari() -> bool:
    """Whether Pong can be made here (the atari extra: ale_py and cv2)."""
    return have("ale_py") and have("cv2")


def stepping_envs() -> dict[str, tuple[Callable, dict] | None]:
    """The envs of the stepping section (None: not importable here)."""
    return {
        "cartpole": (make_cartpole, {}),
        "cpu200us": (CpuBoundEnv, {"iterations": busy_iterations(200e-6)}),
        "pong": (make_pong, {}) if have_atari() else None,
    }


def stepping_section(quick: bool) -> Section:
    """Process cages against the ideal line, AsyncVectorEnv and EnvPool."""
    n = 4 if quick else 64
    each = 0.2 if quick else 1.5
    workers = [1] if quick else [1, 2, 4, 8, 15]
    threads = [1] if quick else [1, 2, 4, 8, 16]

    def run(box: Box, out: dict) -> None:
        for name, spec in stepping_envs().items():
            if spec is None:
                absent(out, name, f"stepping {name}: ale_py or cv2 is not installed")
                continue
            factory, kwargs = spec
            row: dict[str, Any] = out.setdefault(name, {})
            if quick and name == "pong":
                workers_here, n_here = [1], 2
            else:
                workers_here, n_here = workers, n
            row["n_envs"] = n_here
            row["raw_sps"] = raw_sps(factory, kwargs, min(n_here, 8), each)
            for count in ("process_sps", "ideal_sps", "vs_ideal"):
                row[count] = {}
            for w in workers_here:
                if not box.fits(each + 5):
                    skipped(f"stepping {name} with {w} workers: time box")
                    continue
                sps = cage_sps(factory, kwargs, n_here, w, each)
                row["process_sps"][str(w)] = sps
                row["ideal_sps"][str(w)] = w * row["raw_sps"]
                row["vs_ideal"][str(w)] = sps / (w * row["raw_sps"])
            row["async_sps"] = None
            if box.fits(each + 10) and not (quick and name != "cartpole"):
                row["async_sps"] = async_sps(factory, kwargs, n_here, each)
            row["vs_async"] = {
                w: sps / row["async_sps"] if row["async_sps"] else None
                for w, sps in row["process_sps"].items()
            }
            row["envpool_sps"] = None
            if name in ENVPOOL_IDS and not have("envpool"):
                skipped(f"EnvPool on {name}: envpool is not installed")
            elif name in ENVPOOL_IDS:
                row["envpool_sps"] = {
                    str(t): envpool_sps(name, n_here, t, each)
                    for t in threads
                    if box.fits(each + 3)
                }

    return run


# -- report ---------------------------------------------------------------------
def goal(value: float | None, target: float) -> dict[str, Any]:
    """A goal's value, target and whether it is met (None: not measured)."""
    met = None if value is None else bool(value >= target)
    return {"value": value, "target": target, "met": met}


def at(tree: Any, *keys: str) -> Any:
    """``tree[k0][k1]...``, or None where a level is missing or None."""
    for key in keys:
        if not isinstance(tree, dict) or tree.get(key) is None:
            return None
        tree = tree[key]
    return tree


def goals(results: dict) -> dict[str, dict]:
    """The issue's goals, from one run's figures."""
    stepping = results.get("stepping", {})
    async_ratios = [
        value
        for value in (at(stepping, "cartpole", "vs_async") or {}).values()
        if value is not None
    ]
    return {
        "cpu200us_vs_ideal_15": goal(at(stepping, "cpu200us", "vs_ideal", "15"), 0.8),
        "pong_vs_ideal_15": goal(at(stepping, "pong", "vs_ideal", "15"), 0.7),
        "cartpole_vs_async_min": goal(min(async_ratios, default=None), 2.0),
        "pinned_vs_blocking": goal(at(results, "collect", "pinned_vs_blocking"), 1.3),
        "alternating_vs_ff": goal(at(results, "collect", "alternating_vs_ff"), 1.3),
        "ppo_pong_sps": goal(at(results, "ppo", "pong", "env_sps"), 10_000),
    }


def fmt(value: Any) -> str:
    """A figure for the table."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    return str(value)


def print_table(results: dict) -> None:
    """The short table printed before the JSON line."""
    for name, row in (results.get("stepping") or {}).items():
        if not isinstance(row, dict) or "raw_sps" not in row:
            continue
        cells = " ".join(
            f"{w}w={fmt(sps)} ({fmt(row['vs_ideal'][w])})"
            for w, sps in row["process_sps"].items()
        )
        print(
            f"stepping {name:9s} raw={fmt(row['raw_sps'])} {cells} "
            f"async={fmt(row.get('async_sps'))} envpool={row.get('envpool_sps')}"
        )
    for model, rows in (results.get("collect") or {}).items():
        if isinstance(rows, dict):
            for config, cell in rows.items():
                if isinstance(cell, dict):
                    print(
                        f"collect {model:4s} {config:24s} sps={fmt(cell.get('sps'))} "
                        f"inference={fmt(cell.get('inference_share'))}"
                    )
    for env, cell in (results.get("ppo") or {}).items():
        if isinstance(cell, dict):
            print(f"ppo {env:9s} env_sps={fmt(cell.get('env_sps'))} {cell.get('ms')}")
    for name, cell in results["goals"].items():
        print(
            f"goal {name:24s} {fmt(cell['value'])} >= {cell['target']}: {cell['met']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds, on a CPU")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds in all")
    args = parser.parse_args()
    pin_threads()
    import torch

    device = "cuda" if torch.cuda.is_available() else None
    if device is None:
        skipped("every CUDA part: torch.cuda.is_available() is False")
    scale = args.budget / 450.0
    boxes = {"sync": 15, "stepping": 190, "collect": 110, "ppo": 135}
    if args.quick:
        boxes = {name: 60 for name in boxes}
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if device else None,
        "cores": usable_cores(),
        "quick": args.quick,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
    }
    pong = make_pong if have_atari() else None
    sections = {
        "sync": sync_section(device, make_cartpole),
        "stepping": stepping_section(args.quick),
        "collect": collect_section(device, args.quick, make_cartpole, pong),
        "ppo": ppo_section(device, args.quick, make_cartpole, pong),
    }
    for name, fn in sections.items():
        run_section(name, boxes[name] * (1 if args.quick else scale), fn, results)
    results["goals"] = goals(results)
    print_table(results)
    print_result(results)


if __name__ == "__main__":
    main()
