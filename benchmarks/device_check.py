"""Sampling with a GPU and many cores, measured in one command.

First the prerequisites (CUDA visible, free space in /dev/shm for the trees
the sections build, the imports), then the sections, each time-boxed and
each printed as one JSON line (``{"section": ...}``) as soon as it ends, so
a time-out or a crash keeps every finished figure; a configuration that
fails is reported (``"error"``) and the section moves on; a part needing
what is absent prints ``skipped: <reason>`` and puts null in the JSON:

- ``sync``: the non-blocking path collects the batches of the blocking one,
  bit for bit, and the sample tree is page-locked (on CUDA);
- ``race``: every agent step finishes late on the device (a sleep kernel):
  with the wait the batches equal the blocking path's, without it the host
  reads actions before their copies land (CUDA only);
- ``stepping``: env steps/s of process cages (every env in workers) with 1,
  2, 4, 8 and 15 workers, on CartPole (64 envs), a ~200 us CPU env and Pong
  with the standard stack (``parllel.envs.atari``); next to one core's plain
  loop (the ideal line is workers x that), gymnasium's ``AsyncVectorEnv``
  and EnvPool with 1-16 threads where importable;
- ``collect``: ``collect_batch`` steps/s with a CPU handler and a CUDA one
  (blocking copies vs page-locked non-blocking ones), feed-forward vs
  alternating, for an MLP (CartPole) and the Nature CNN (Pong; skipped
  without ALE);
- ``ppo``: PPO for a fixed wall time on CartPole and Pong: env steps/s end
  to end and the phase breakdown.

Then a short table and one JSON line of everything, last. The whole run,
prerequisites included, stays within ``--budget`` seconds (default 420) by
its own clock; ``--quick`` runs every section that applies on a CPU-only
machine in seconds (tests/integration/test_benchmarks_quick.py).
docs/gpu.md says how to run it on the GPU machine (benchmarks/device_wheels.sh).

Usage: python benchmarks/device_check.py [--quick] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
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
from _device_learning import (  # noqa: E402
    collect_section,
    ppo_section,
    race_section,
    sync_section,
)
from _sections import Box, Section, absent, attempt, run_section, skipped  # noqa: E402
from cage_throughput import cage_slots, plain_envs, step_plain  # noqa: E402
from synthetic_envs import CpuBoundEnv, busy_iterations  # noqa: E402

from parllel.cages import CageOptions, ProcessCage, ProcessLayout  # noqa: E402
from parllel.cages.child_processes import usable_cores  # noqa: E402

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
            factory,
            n,
            kwargs,
            layout=ProcessLayout(n_workers=workers, main_process_envs=0),
            options=CageOptions(seed=0),
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


def as_sps(measure: Callable[..., float], *args: Any) -> dict[str, float]:
    """``{"sps": measure(*args)}``, for :func:`attempt`."""
    return {"sps": measure(*args)}


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
                measured = attempt(
                    f"stepping {name} {w} workers",
                    as_sps,
                    cage_sps,
                    factory,
                    kwargs,
                    n_here,
                    w,
                    each,
                )
                if "error" in measured:
                    row.setdefault("errors", {})[str(w)] = measured["error"]
                    continue
                sps = measured["sps"]
                row["process_sps"][str(w)] = sps
                row["ideal_sps"][str(w)] = w * row["raw_sps"]
                row["vs_ideal"][str(w)] = sps / (w * row["raw_sps"])
            row["async_sps"] = None
            if box.fits(each + 10) and not (quick and name != "cartpole"):
                measured = attempt(
                    f"stepping {name} AsyncVectorEnv",
                    as_sps,
                    async_sps,
                    factory,
                    kwargs,
                    n_here,
                    each,
                )
                row["async_sps"] = measured.get("sps")
            row["vs_async"] = {
                w: sps / row["async_sps"] if row["async_sps"] else None
                for w, sps in row["process_sps"].items()
            }
            row["envpool_sps"] = None
            if name in ENVPOOL_IDS and not have("envpool"):
                skipped(f"EnvPool on {name}: envpool is not installed")
            elif name in ENVPOOL_IDS:
                row["envpool_sps"] = {
                    str(t): attempt(
                        f"stepping {name} EnvPool {t} threads",
                        as_sps,
                        envpool_sps,
                        name,
                        n_here,
                        t,
                        each,
                    ).get("sps")
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


SHM_NEEDED = {  # bytes of the largest trees a section builds (observations
    # and final observations, [T + 1, 64] of 84x84x4 uint8 for Pong), with room
    "ppo pong": 2 * 129 * 64 * 84 * 84 * 4 + (64 << 20),
    "collect cnn": 2 * 33 * 64 * 84 * 84 * 4 + (64 << 20),
}
IMPORTS = ("numpy", "numba", "gymnasium", "cloudpickle", "torch", "ale_py", "cv2")


def prerequisites() -> dict[str, Any]:
    """What the sections need: CUDA, free space in /dev/shm, the imports."""
    import torch

    found: dict[str, Any] = {"cuda": torch.cuda.is_available()}
    if found["cuda"]:
        found["cuda_devices"] = torch.cuda.device_count()
        found["device"] = torch.cuda.get_device_name()
    else:
        skipped("every CUDA part: torch.cuda.is_available() is False")
    try:
        free = shutil.disk_usage("/dev/shm").free
    except OSError:
        free = None
    found["shm_free_mib"] = None if free is None else free >> 20
    found["shm_enough"] = {
        name: free is None or free >= need for name, need in SHM_NEEDED.items()
    }
    for name, enough in found["shm_enough"].items():
        if not enough:
            skipped(f"{name}: /dev/shm has {free >> 20} MiB free")  # type: ignore[operator]
    versions: dict[str, str | None] = {}
    for module in IMPORTS:
        try:
            versions[module] = getattr(
                importlib.import_module(module), "__version__", "?"
            )
        except Exception as exc:  # ImportError, or a broken install
            versions[module] = None
            skipped(f"import {module}: {type(exc).__name__}: {exc}")
    found["imports"] = versions
    print(json.dumps({"section": "prerequisites", **found}, sort_keys=True), flush=True)
    return found


def main() -> None:
    start = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds, on a CPU")
    parser.add_argument(
        "--budget", type=float, default=420.0, help="seconds in all, by its own clock"
    )
    args = parser.parse_args()
    deadline = start + args.budget
    pin_threads()
    import torch

    found = prerequisites()
    device = "cuda" if found["cuda"] else None
    boxes = {"sync": 15, "race": 20, "stepping": 170, "collect": 100, "ppo": 115}
    if args.quick:
        boxes = {name: 60 for name in boxes}
    scale = 1.0 if args.quick else args.budget / 420.0
    results: dict[str, Any] = {
        "device": found.get("device"),
        "cores": usable_cores(),
        "quick": args.quick,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "prerequisites": found,
    }
    pong = make_pong if have_atari() else None
    cnn_collect = pong if found["shm_enough"]["collect cnn"] else None
    cnn_ppo = pong if found["shm_enough"]["ppo pong"] else None
    sections = {
        "sync": sync_section(device, make_cartpole),
        "race": race_section(device, make_cartpole),
        "stepping": stepping_section(args.quick),
        "collect": collect_section(device, args.quick, make_cartpole, cnn_collect),
        "ppo": ppo_section(device, args.quick, make_cartpole, cnn_ppo),
    }
    reserve = 10.0  # for the table, the summary and closing
    for name, fn in sections.items():
        left = deadline - time.monotonic() - reserve
        seconds = min(boxes[name] * scale, left)
        if seconds < 3:
            results[name] = None
            skipped(f"{name}: the run's {args.budget:.0f} s budget is spent")
            continue
        grace = min(20.0, max(left - seconds, 1.0))
        run_section(name, seconds, fn, results, grace=grace)
    results["goals"] = goals(results)
    results["seconds"] = round(time.monotonic() - start, 1)
    print_table(results)
    print_result(results)


if __name__ == "__main__":
    main()
