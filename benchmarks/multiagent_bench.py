"""Agent-steps per second of a PettingZoo parallel env in parllel's cages and its peers.

The env is MPE ``simple_spread_v3.parallel_env(N=agents)`` (every agent acts
at every step, episodes of 25 steps); random actions are pre-sampled
(``[steps, n_envs, agents]``, the same for every contender) and every
contender steps the same number of envs, after a few untimed warm-up steps.
An agent-step is one agent's action taken by the env. Comparisons (target
ratio in parentheses):

- ``ma_process_vs_supersuit``: a parllel ``ProcessCage`` (2 workers) over
  ``ParallelEnvAdapter`` envs, driven with preallocated slots as samplers do
  (the ``[A]`` agent info slots included), vs SuperSuit's
  ``concat_vec_envs_v1(pettingzoo_env_to_vec_env_v1(env), n, num_cpus=2,
  base_class="gymnasium")`` (>= 1.5);
- ``ma_serial_vs_bare``: a parllel ``SerialCage`` vs a bare PettingZoo loop
  over the same envs in this process, its dict actions built from the same
  pre-sampled array (>= 0.8).

Also printed: each contender's absolute agent-steps/s and the 2-core
``ceiling``: two independent processes, each a bare loop over half the envs,
no communication at all (``ma_process_vs_ceiling`` reads the process cage
against it).

Medians over interleaved repeats, torch pinned to one thread. ``--quick``
runs 2 envs and a few steps (the key names stay). Last line: one JSON
object.

Usage: python benchmarks/multiagent_bench.py [--quick] [--repeats N] [--agents N] [--envs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.cages import ProcessCage, SerialCage, numeric_info_example  # noqa: E402
from parllel.multiagent import make_parallel_env_factory  # noqa: E402
from parllel.tree import buffer_from_example  # noqa: E402

TARGETS = {"ma_process_vs_supersuit": 1.5, "ma_serial_vs_bare": 0.8}
"""the ratio each comparison aims for (printed next to the measured one)"""

N_ACTIONS = 5  # simple_spread's discrete actions


def env_fn(n_agents: int) -> Any:
    """One simple_spread parallel env (imported here: the bench extra)."""
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=n_agents)


def warmup_steps(steps: int) -> int:
    return min(20, steps // 8)


def run_cage(
    make_cage: Callable[[], Any], actions: np.ndarray, rows: int = 64
) -> float:
    """Agent-steps/s of a cage writing into ``[rows, B]`` slots (info included).

    Slots are reused cyclically, as a sampler reuses its batch buffer; the
    first steps (workers attach every slot) are not timed.
    """
    steps = len(actions)
    rows = min(rows, steps)
    with make_cage() as cage:
        example, n = cage.example, cage.n_envs
        info = numeric_info_example(example[fields.ENV_INFO])
        with (
            buffer_from_example(
                example[fields.OBSERVATION], (rows, n), storage="shared", padding=1
            ) as observation,
            buffer_from_example(
                {
                    fields.ACTION: example[fields.ACTION],
                    fields.REWARD: np.float32(0),
                    fields.TERMINATED: False,
                    fields.TRUNCATED: False,
                    fields.ENV_INFO: info,
                },
                (rows, n),
                storage="shared",
            ) as tree,
        ):
            cage.reset(observation[0])
            slots = [
                {
                    fields.OBSERVATION: observation[t + 1],
                    fields.REWARD: tree.reward[t],
                    fields.TERMINATED: tree.terminated[t],
                    fields.TRUNCATED: tree.truncated[t],
                    fields.ENV_INFO: tree.env_info[t],
                }
                for t in range(rows)
            ]
            action = [tree.action[t] for t in range(rows)]
            for t in range(rows):  # warm-up: workers attach every slot once
                action[t][...] = actions[t]
                cage.step(action[t], slots[t])
            start = time.perf_counter()
            for step in range(steps):
                t = step % rows
                action[t][...] = actions[step]
                cage.step_async(action[t], slots[t])
                cage.await_step()
            elapsed = time.perf_counter() - start
    return actions.size / elapsed


def bare_loop(n_agents: int, actions: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """(start, end) of a bare PettingZoo loop over ``actions.shape[1]`` envs.

    Dict actions are built from the pre-sampled array for the agents alive
    at each step; an env is reset when no agent is left.
    """
    envs = [env_fn(n_agents) for _ in range(actions.shape[1])]
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


def run_bare(n_agents: int, actions: np.ndarray) -> float:
    start, end = bare_loop(n_agents, actions)
    return actions[warmup_steps(len(actions)) :].size / (end - start)


def _bare_half(n_agents, actions, barrier, queue) -> None:
    pin_threads()
    barrier.wait()
    queue.put(bare_loop(n_agents, actions))


def run_ceiling(n_agents: int, actions: np.ndarray) -> float:
    """Two independent processes, each a bare loop over half the envs."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    queue, barrier = ctx.Queue(), ctx.Barrier(2)
    halves = [actions[:, i::2] for i in range(2)]
    procs = [
        ctx.Process(target=_bare_half, args=(n_agents, half, barrier, queue))
        for half in halves
    ]
    for proc in procs:
        proc.start()
    spans = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    return actions[warmup_steps(len(actions)) :].size / wall


def run_supersuit(n_agents: int, actions: np.ndarray) -> float:
    """SuperSuit's process vector env over the same envs (one row per agent)."""
    import supersuit as ss

    steps, n, a = actions.shape
    venv = ss.concat_vec_envs_v1(
        ss.pettingzoo_env_to_vec_env_v1(env_fn(n_agents)),
        n,
        num_cpus=2,
        base_class="gymnasium",
    )
    try:
        venv.reset(seed=0)
        flat = actions.reshape(steps, n * a)
        warm = warmup_steps(steps)
        for step_actions in flat[:warm]:
            venv.step(step_actions)
        start = time.perf_counter()
        for step_actions in flat[warm:]:
            venv.step(step_actions)
        elapsed = time.perf_counter() - start
    finally:
        venv.close()
    return flat[warm:].size / elapsed


def contenders(n_agents: int, n_envs: int, actions: np.ndarray) -> dict:
    factory = make_parallel_env_factory(env_fn, n_agents=n_agents)
    return {
        "process": lambda: run_cage(
            lambda: ProcessCage(factory, n_envs, n_workers=2, seed=0), actions
        ),
        "supersuit": lambda: run_supersuit(n_agents, actions),
        "serial": lambda: run_cage(
            lambda: SerialCage(factory, n_envs, seed=0), actions
        ),
        "bare": lambda: run_bare(n_agents, actions),
        "ceiling": lambda: run_ceiling(n_agents, actions),
    }


def measure(runs: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Medians over interleaved repeats (drift hits every contender alike)."""
    samples: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            samples[key].append(run())
    result = {}
    for key, values in samples.items():
        median = statistics.median(values)
        print(f"{key:>10}: {median:10.0f} agent-steps/s", flush=True)
        result[f"ma_{key}_agent_sps"] = round(median, 1)
    return result


def ratio(result: dict, numerator: str, denominator: str) -> float | None:
    top, bottom = result.get(numerator), result.get(denominator)
    return None if top is None or not bottom else round(top / bottom, 3)


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
    steps = 16 if args.quick else 400
    rng = np.random.default_rng(0)
    actions = rng.integers(0, N_ACTIONS, (steps, n_envs, args.agents))
    print(f"simple_spread_v3 N={args.agents}, {n_envs} envs, {steps} steps")
    result: dict[str, Any] = {"n_envs": n_envs, "n_agents": args.agents}
    result.update(measure(contenders(args.agents, n_envs, actions), repeats))
    result["ma_process_vs_supersuit"] = ratio(
        result, "ma_process_agent_sps", "ma_supersuit_agent_sps"
    )
    result["ma_serial_vs_bare"] = ratio(
        result, "ma_serial_agent_sps", "ma_bare_agent_sps"
    )
    result["ma_process_vs_ceiling"] = ratio(
        result, "ma_process_agent_sps", "ma_ceiling_agent_sps"
    )
    for key, target in TARGETS.items():
        print(f"{key:>24}: {result[key]} (target >= {target})")
    print(f"{'ma_process_vs_ceiling':>24}: {result['ma_process_vs_ceiling']}")
    print_result(result)


if __name__ == "__main__":
    main()
