"""Env steps per second: raw loop, our cages and gymnasium's vector envs, one run.

Random actions are pre-sampled. Contenders, per env setting:
- ``raw``: a plain Python loop over the envs calling step/reset;
- ``serial``: parllel SerialCage writing into a [T, B] buffer;
- ``process``: parllel ProcessCage, best of a few worker layouts;
- ``sync`` / ``async``: gymnasium SyncVectorEnv / AsyncVectorEnv(shared_memory=True);
- ``ceiling``: two independent processes, each a raw loop over half the envs,
  no communication at all, timed from their common start until both are
  done: what two cores give right now (context for the ratios;
  ``{env}_ceiling_vs_raw`` and ``{env}_process_vs_ceiling``).

Last line: one JSON object with ``{env}_{contender}_sps`` and the ratios
``cartpole64_process_vs_raw``, ``cartpole64_process_vs_async``,
``cpu200us_process_vs_raw``, ``atari84_process_vs_raw``,
``cartpole8_serial_vs_raw`` (and the chosen process layouts).

Usage: python benchmarks/cage_throughput.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    interleaved_medians,
    make_cartpole,
    pin_threads,
    print_result,
    steps_per_second,
    two_process_wall,
)
from synthetic_envs import Atari84Env, CpuBoundEnv, busy_iterations  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.cages.env_info import numeric_info_example
from parllel.tree import buffer_from_example  # noqa: E402


def settings(quick: bool) -> dict[str, dict]:
    """Env name -> factory, kwargs, n_envs and vector steps per measurement."""
    cpu_iters = busy_iterations(200e-6)
    atari_iters = busy_iterations(100e-6)
    scale = 0.05 if quick else 1.0
    return {
        "cartpole8": dict(
            factory=make_cartpole, kwargs={}, n=8, steps=int(3000 * scale)
        ),
        "cartpole64": dict(
            factory=make_cartpole, kwargs={}, n=64, steps=int(600 * scale)
        ),
        "cpu200us": dict(
            factory=CpuBoundEnv,
            kwargs={"iterations": cpu_iters},
            n=8,
            steps=int(450 * scale),
        ),
        "atari84": dict(
            factory=Atari84Env,
            kwargs={"iterations": atari_iters},
            n=8,
            steps=int(600 * scale),
        ),
    }


@contextmanager
def plain_envs(factory: Callable, kwargs: dict, n: int) -> Iterator[list]:
    """``n`` fresh envs of ``factory(**kwargs)``, reset with seeds ``0..n-1``,
    closed afterwards."""
    envs = [factory(**kwargs) for _ in range(n)]
    try:
        for i, env in enumerate(envs):
            env.reset(seed=i)
        yield envs
    finally:
        for env in envs:
            env.close()


def step_plain(envs: list, step_actions: np.ndarray) -> None:
    """One step of a plain loop: every env its action, reset where it ended."""
    for env, action in zip(envs, step_actions):
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()


def raw_loop(spec: dict, actions: np.ndarray, barrier=None) -> tuple[float, float]:
    """A plain loop over fresh envs; returns its (start, end) clock readings.

    ``barrier``: waited on once the envs exist, so that several processes
    start stepping together.
    """
    with plain_envs(spec["factory"], spec["kwargs"], spec["n"]) as envs:
        if barrier is not None:
            barrier.wait()
        start = time.perf_counter()
        for step_actions in actions:
            step_plain(envs, step_actions)
        end = time.perf_counter()
    return start, end


def run_raw(spec: dict, actions: np.ndarray) -> float:
    """Steps/s of :func:`raw_loop` over all envs."""
    start, end = raw_loop(spec, actions)
    return actions.size / (end - start)


@contextmanager
def cage_slots(cage: Any, rows: int, info: bool = False) -> Iterator[tuple[list, list]]:
    """Shared ``[rows, B]`` trees for ``cage`` to write into, as a sampler's:
    yields the action view and the step slots of every row (built once and
    reused, as samplers do), the cage reset into the first observation row.

    ``info``: the slots take the env info too (its numeric entries).
    """
    example, n = cage.example, cage.n_envs
    other = {
        fields.ACTION: example[fields.ACTION],
        fields.REWARD: np.float32(0),
        fields.TERMINATED: False,
        fields.TRUNCATED: False,
    }
    if info:
        other[fields.ENV_INFO] = numeric_info_example(example[fields.ENV_INFO])
    with (
        buffer_from_example(
            example[fields.OBSERVATION], (rows, n), storage="shared", padding=1
        ) as observation,
        buffer_from_example(other, (rows, n), storage="shared") as tree,
    ):
        cage.reset(observation[0])
        slots = [
            {
                fields.OBSERVATION: observation[t + 1],
                fields.REWARD: tree.reward[t],
                fields.TERMINATED: tree.terminated[t],
                fields.TRUNCATED: tree.truncated[t],
            }
            | ({fields.ENV_INFO: tree.env_info[t]} if info else {})
            for t in range(rows)
        ]
        yield [tree.action[t] for t in range(rows)], slots


def run_cage(
    cage_factory: Callable[[], Any],
    actions: np.ndarray,
    rows: int = 64,
    info: bool = False,
) -> float:
    """Steady-state steps/s of a cage writing into ``[rows, B]`` slots
    (:func:`cage_slots`; ``info``: the env info too), one step a row of
    ``actions`` (each of its items counts as a step: discrete actions
    ``[steps, envs]``, or ``[steps, envs, agents]`` counting agent-steps).

    Slots are reused cyclically, as a sampler reuses its batch buffer; one
    warm-up pass over the rows (workers learn the slots) is not timed.
    """
    rows = min(rows, len(actions))
    with cage_factory() as cage, cage_slots(cage, rows, info) as (action, slots):
        return time_steps(cage, action, slots, actions)


def time_steps(
    cage: Any,
    action: list,
    slots: list,
    actions: np.ndarray,
    after_step: Callable[[int], None] | None = None,
) -> float:
    """Steps/s of ``cage`` stepping ``actions`` through the per-row ``action``
    views and ``slots`` (reused cyclically), ``after_step(row)`` called after
    each step if given; one warm-up pass over the rows is not timed."""
    rows = len(slots)
    for t in range(rows):  # warm-up: workers attach every slot once
        action[t][...] = actions[t]
        cage.step(action[t], slots[t])
    start = time.perf_counter()
    for step in range(len(actions)):
        t = step % rows
        action[t][...] = actions[step]
        cage.step_async(action[t], slots[t])
        cage.await_step()
        if after_step is not None:
            after_step(t)
    elapsed = time.perf_counter() - start
    return actions.size / elapsed


def run_ceiling(spec: dict, actions: np.ndarray) -> float:
    """Two independent processes, each a raw loop over half the envs (no sync).

    What two cores give here without any communication: all env steps over
    the wall time from the common start until both processes are done (a
    synchronous design needs both halves of every step). It varies with the
    VM's load; read ratios against it.
    """
    half = dict(spec, n=spec["n"] // 2)
    wall = two_process_wall(
        [partial(raw_loop, half, actions[:, i::2]) for i in range(2)]
    )
    return actions.size / wall


def run_gym_vector(kind: str, spec: dict, actions: np.ndarray) -> float:
    fns = [partial(spec["factory"], **spec["kwargs"]) for _ in range(spec["n"])]
    if kind == "sync":
        envs = gym.vector.SyncVectorEnv(fns)
    else:
        envs = gym.vector.AsyncVectorEnv(fns, shared_memory=True)
    envs.reset(seed=0)
    sps = steps_per_second(envs.step, actions)
    envs.close()
    return sps


def process_layouts(n: int) -> dict[str, dict]:
    """Worker layouts tried for the ProcessCage (best one is reported)."""
    return {
        "2workers": {"layout": ProcessLayout(envs_per_worker=n // 2)},
        "main+1worker": {
            "layout": ProcessLayout(main_process_envs=n // 2, n_workers=1)
        },
        # the worker pays the synchronization, so the main may take a bit more
        "main9/16+1worker": {
            "layout": ProcessLayout(main_process_envs=(9 * n) // 16, n_workers=1)
        },
        # envs move towards whichever process (core) is faster at the moment
        "main+1worker+rebalance": {
            "layout": ProcessLayout(
                main_process_envs=n // 2, n_workers=1, rebalance=True
            )
        },
    }


def make_contenders(spec: dict, actions: np.ndarray) -> dict:
    """Name -> zero-argument callable returning steps/s, for one env setting."""

    def serial() -> float:
        return run_cage(
            lambda: SerialCage(
                spec["factory"], spec["n"], spec["kwargs"], options=CageOptions(seed=0)
            ),
            actions,
        )

    def process(layout: dict) -> float:
        return run_cage(
            lambda: ProcessCage(
                spec["factory"],
                spec["n"],
                spec["kwargs"],
                options=CageOptions(seed=0),
                **layout,
            ),
            actions,
        )

    contenders = {
        "raw": lambda: run_raw(spec, actions),
        "ceiling": lambda: run_ceiling(spec, actions),
        "serial": serial,
        "sync": lambda: run_gym_vector("sync", spec, actions),
        "async": lambda: run_gym_vector("async", spec, actions),
    }
    for name, layout in process_layouts(spec["n"]).items():
        contenders[f"process[{name}]"] = partial(process, layout)
    return contenders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    pin_threads()
    repeats = args.repeats or (1 if args.quick else 7)
    rng = np.random.default_rng(0)
    result: dict[str, float | str] = {}
    for name, spec in settings(args.quick).items():
        n_actions = spec["factory"](**spec["kwargs"]).action_space.n
        actions = rng.integers(0, n_actions, (max(spec["steps"], 4), spec["n"]))
        # raw, the baseline of every target ratio: sampled at both ends of a repeat
        medians = interleaved_medians(
            make_contenders(spec, actions), repeats, again=["raw"]
        )
        best_layout = max(
            (k for k in medians if k.startswith("process[")), key=medians.__getitem__
        )
        medians["process"] = medians[best_layout]
        result[f"{name}_process_layout"] = best_layout[len("process[") : -1]
        for key, value in medians.items():
            print(f"{name:>11} {key:>22}: {value:10.0f} steps/s")
            safe = key.replace("[", "_").replace("]", "").replace("+", "_")
            result[f"{name}_{safe.replace('/', '_')}_sps"] = round(value, 1)
    result["cartpole64_process_vs_raw"] = round(
        result["cartpole64_process_sps"] / result["cartpole64_raw_sps"], 3
    )
    result["cartpole64_process_vs_async"] = round(
        result["cartpole64_process_sps"] / result["cartpole64_async_sps"], 3
    )
    result["cpu200us_process_vs_raw"] = round(
        result["cpu200us_process_sps"] / result["cpu200us_raw_sps"], 3
    )
    result["atari84_process_vs_raw"] = round(
        result["atari84_process_sps"] / result["atari84_raw_sps"], 3
    )
    for name in ("cartpole64", "cpu200us", "atari84"):
        result[f"{name}_ceiling_vs_raw"] = round(
            result[f"{name}_ceiling_sps"] / result[f"{name}_raw_sps"], 3
        )
        result[f"{name}_process_vs_ceiling"] = round(
            result[f"{name}_process_sps"] / result[f"{name}_ceiling_sps"], 3
        )
    result["cartpole8_serial_vs_raw"] = round(
        result["cartpole8_serial_sps"] / result["cartpole8_raw_sps"], 3
    )
    print_result(result)


if __name__ == "__main__":
    main()
