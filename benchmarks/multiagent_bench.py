"""Agent-steps per second of a PettingZoo parallel env in parllel's cages and its peers.

Two PettingZoo parallel envs, each its own set of figures: MPE
``simple_spread_v3.parallel_env(N=agents)`` (every agent acts at every step,
episodes of 25 steps; about 0.35 ms per step inside PettingZoo/MPE, so every
contender is bound by the env) under the ``ma_`` keys, and classic
``rps_v2.parallel_env()`` (rock-paper-scissors, 2 agents, about 80 µs per
step: the vectorization machinery's own cost dominates) under the ``ma_rps_``
keys. Random actions are pre-sampled (``[steps, n_envs, agents]``, the same
for every contender) and every contender steps the same number of envs,
after a few untimed warm-up steps. An agent-step is one agent's action taken
by the env. Comparisons (target ratio in parentheses):

- ``ma_process_vs_supersuit``: a parllel ``ProcessCage`` over
  ``ParallelEnvAdapter`` envs, laid out as ``build_cage(parallel="process")``
  lays it out on this machine (:func:`~parllel.cages.building.suggest_layout_for`; on
  2 cores: half the envs in the main process, half in one worker), driven
  with preallocated slots as samplers do (the ``[A]`` agent info slots
  included), vs SuperSuit's
  ``concat_vec_envs_v1(pettingzoo_env_to_vec_env_v1(env), n, num_cpus=2,
  base_class="gymnasium")`` (>= 1.5);
- ``ma_serial_vs_bare``: a parllel ``SerialCage`` vs a bare PettingZoo loop
  over the same envs in this process, its dict actions built from the same
  pre-sampled array (>= 0.8).

Also printed: each contender's absolute agent-steps/s and the 2-core
``ceiling``: two independent processes, each a bare loop over half the envs,
no communication at all (``ma_process_vs_ceiling`` reads the process cage
against it). Both envs are PettingZoo ``aec_to_parallel`` conversions, which
parllel's adapter steps itself (:mod:`parllel.multiagent.aec_cycle`), so the
parllel contenders can beat the bare loop and its ceiling; the process
cage's parallel efficiency is ``process_vs_ceiling / serial_vs_bare``.

Medians over interleaved repeats, torch pinned to one thread. ``--quick``
runs 2 envs and a few steps (the key names stay). Last line: one JSON
object.

Usage: python benchmarks/multiagent_bench.py [--quick] [--repeats N] [--agents N] [--envs N]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    interleaved_medians,
    pin_threads,
    print_result,
    ratio,
    steps_per_second,
    two_process_wall,
)
from cage_throughput import run_cage  # noqa: E402

from parllel.cages import (  # noqa: E402
    CageOptions,
    ProcessCage,
    ProcessLayout,
    SerialCage,
)
from parllel.cages.building import suggest_layout_for  # noqa: E402
from parllel.multiagent import make_parallel_env_factory  # noqa: E402

TARGETS = {"ma_process_vs_supersuit": 1.5, "ma_serial_vs_bare": 0.8}
"""the ratio each comparison aims for (printed next to the measured one)"""

N_ACTIONS = {"spread": 5, "rps": 3}
"""each env's discrete actions"""


def env_fn(env: str = "spread", n_agents: int = 3) -> Any:
    """One parallel env by name (imported here: the bench and examples extras)."""
    if env == "rps":
        from pettingzoo.classic import rps_v2

        return rps_v2.parallel_env()
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=n_agents)


def warmup_steps(steps: int) -> int:
    return min(20, steps // 8)


def bare_loop(
    make_env: Callable[[], Any], actions: np.ndarray, seed: int = 0
) -> tuple[float, float]:
    """(start, end) of a bare PettingZoo loop over ``actions.shape[1]`` envs.

    Dict actions are built from the pre-sampled array for the agents alive
    at each step; an env is reset when no agent is left.
    """
    envs = [make_env() for _ in range(actions.shape[1])]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    agents = envs[0].possible_agents
    warm = warmup_steps(len(actions))
    start = 0.0
    for step, step_actions in enumerate(actions):
        if step == warm:
            start = time.perf_counter()
        for env, env_actions in zip(envs, step_actions):
            alive = env.agents
            env.step({a: env_actions[i] for i, a in enumerate(agents) if a in alive})
            if not env.agents:
                env.reset()
    end = time.perf_counter()
    for env in envs:
        env.close()
    return start, end


def run_bare(make_env: Callable[[], Any], actions: np.ndarray) -> float:
    start, end = bare_loop(make_env, actions)
    return actions[warmup_steps(len(actions)) :].size / (end - start)


def _bare_half(make_env, actions, barrier) -> tuple[float, float]:
    pin_threads()
    barrier.wait()
    return bare_loop(make_env, actions)


def run_ceiling(make_env: Callable[[], Any], actions: np.ndarray) -> float:
    """Two independent processes, each a bare loop over half the envs."""
    wall = two_process_wall(
        [functools.partial(_bare_half, make_env, actions[:, i::2]) for i in range(2)]
    )
    return actions[warmup_steps(len(actions)) :].size / wall


def run_supersuit(make_env: Callable[[], Any], actions: np.ndarray) -> float:
    """SuperSuit's process vector env over the same envs (one row per agent)."""
    import supersuit as ss

    steps, n, a = actions.shape
    venv = ss.concat_vec_envs_v1(
        ss.pettingzoo_env_to_vec_env_v1(make_env()),
        n,
        num_cpus=2,
        base_class="gymnasium",
    )
    try:
        venv.reset(seed=0)
        flat = actions.reshape(steps, n * a)
        return steps_per_second(venv.step, flat, warmup_steps(steps))
    finally:
        venv.close()


def contenders(
    make_env: Callable[[], Any], n_envs: int, actions: np.ndarray
) -> dict[str, Callable[[], float]]:
    factory = make_parallel_env_factory(make_env)
    # the layout build_cage(parallel="process") would choose here, measured once
    layout = suggest_layout_for(factory, n_envs) or ProcessLayout(n_workers=2)
    print(f"process cage layout: {layout}", flush=True)
    return {
        "process": lambda: run_cage(
            lambda: ProcessCage(
                factory, n_envs, layout=layout, options=CageOptions(seed=0)
            ),
            actions,
            info=True,
        ),
        "supersuit": lambda: run_supersuit(make_env, actions),
        "serial": lambda: run_cage(
            lambda: SerialCage(factory, n_envs, options=CageOptions(seed=0)),
            actions,
            info=True,
        ),
        "bare": lambda: run_bare(make_env, actions),
        "ceiling": lambda: run_ceiling(make_env, actions),
    }


def measure(
    runs: dict[str, Callable[[], float]], repeats: int, prefix: str
) -> dict[str, float]:
    """Medians over interleaved repeats (drift hits every contender alike)."""
    result = {}
    for key, median in interleaved_medians(runs, repeats).items():
        print(f"{key:>10}: {median:10.0f} agent-steps/s", flush=True)
        result[f"{prefix}{key}_agent_sps"] = round(median, 1)
    return result


def bench_env(
    env: str, n_agents: int, n_envs: int, steps: int, repeats: int
) -> dict[str, Any]:
    """All contenders on one env; keys prefixed ``ma_`` (spread) or ``ma_<env>_``."""
    prefix = "ma_" if env == "spread" else f"ma_{env}_"
    make_env = functools.partial(env_fn, env, n_agents)
    n_agents = len(make_env().possible_agents)
    actions = np.random.default_rng(0).integers(
        0, N_ACTIONS[env], (steps, n_envs, n_agents)
    )
    print(f"{env}: {n_agents} agents, {n_envs} envs, {steps} steps", flush=True)
    result = measure(contenders(make_env, n_envs, actions), repeats, prefix)
    for name, top, bottom in (
        ("process_vs_supersuit", "process", "supersuit"),
        ("serial_vs_bare", "serial", "bare"),
        ("process_vs_ceiling", "process", "ceiling"),
    ):
        result[prefix + name] = ratio(
            result.get(f"{prefix}{top}_agent_sps"),
            result.get(f"{prefix}{bottom}_agent_sps"),
        )
        target = TARGETS.get(f"ma_{name}")
        aim = f" (target >= {target})" if target else ""
        print(f"{prefix + name:>28}: {result[prefix + name]}{aim}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--agents", type=int, default=3, help="simple_spread's N")
    parser.add_argument("--envs", type=int, default=None, help="envs per contender")
    args = parser.parse_args()
    pin_threads()
    repeats = args.repeats or (1 if args.quick else 5)
    n_envs = args.envs or (2 if args.quick else 16)
    result: dict[str, Any] = {"n_envs": n_envs, "n_agents": args.agents}
    for env, steps in (("spread", 400), ("rps", 1600)):
        steps = 16 if args.quick else steps
        result.update(bench_env(env, args.agents, n_envs, steps, repeats))
    print_result(result)


if __name__ == "__main__":
    main()
