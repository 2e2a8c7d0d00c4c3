"""Atari stepping throughput: parllel's cages against the vector envs people use.

Pong (``ALE/Pong-v5`` through ``parllel.envs.atari.make_atari_env``: no-op
reset, frame skip 4 with max-pooling, 84x84 grayscale, a stack of 4; EnvPool:
``Pong-v5`` with the same settings, its own C++ preprocessing) at 8 and 16
envs, random actions pre-sampled (sampling cost not measured), medians over
interleaved repeats. Contenders:

- ``raw``: a plain Python loop over the envs (one core);
- ``sync`` / ``async``: gymnasium's ``SyncVectorEnv`` and
  ``AsyncVectorEnv(shared_memory=True)``;
- ``sb3_subproc``: Stable-Baselines3's ``SubprocVecEnv``;
- ``envpool``: EnvPool's own loop (``pool.step(actions)``, 2 threads);
- ``serial`` and ``process[...]``: parllel's cages stepping as the Atari
  sampler steps them with ``frame_stack=4`` (docs/atari.md): each step's
  stacks go into one ``[B]`` staging slot and the newest frame is copied
  into a ``[k + T, B]`` frames ring (``gym_best`` is the best layout;
  layouts that come out identical for ``n`` are measured once);
- ``envpool_cage``: parllel's ``EnvPoolCage`` over the same EnvPool, stepped
  the same way;
- ``ceiling``: two independent processes, each a plain loop over half the
  envs, no communication: what the 2 cores give.

Then the whole ``collect_batch`` of a ``FeedForwardSampler`` with the Nature
CNN actor-critic (torch on one thread) and ``frame_stack=4`` (the Atari
example's sample tree) on the best gymnasium layout and on
``EnvPoolCage`` (``collect_{layout}_sps``). Goals: ``gym_best_vs_best_python_peer``
(parllel's best layout over the best of raw, sync, async and SB3) >= 1.5,
``gym_best_vs_ceiling`` >= 0.9, ``envpool_cage_vs_envpool`` >= 0.9. Without
EnvPool or SB3 their figures are null. The last line is one JSON object.

Usage: python benchmarks/atari_throughput.py [--quick] [--repeats N] [--envs 8 16]
"""

from __future__ import annotations

import argparse
import os
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
    make_pong,
    pin_threads,
    print_result,
    ratio,
    steps_per_second,
)
from cage_throughput import (  # noqa: E402
    cage_slots,
    process_layouts,
    run_ceiling,
    run_raw,
    time_steps,
)
from interop_bench import measure, run_vector_env  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.cages import CageOptions, ProcessCage, SerialCage  # noqa: E402
from parllel.tree import buffer_from_example  # noqa: E402

ENVPOOL_SETTINGS = dict(ENVPOOL_PONG, num_threads=2)
"""EnvPool's Pong as ``make_pong`` makes it, stepped by 2 threads"""


def make_envpool(n: int) -> Any:
    """EnvPool's Pong, ``n`` envs stepped as one batch."""
    import envpool

    return envpool.make_gymnasium(
        ENVPOOL_PONG_ID, num_envs=n, batch_size=n, seed=0, **ENVPOOL_SETTINGS
    )


def run_envpool(n: int, actions: np.ndarray) -> float:
    """Steps/s of EnvPool's own synchronous loop (a few warm-up steps untimed)."""
    pool = make_envpool(n)
    try:
        pool.reset()
        return steps_per_second(pool.step, actions.astype(np.int32), warmup=8)
    finally:
        pool.close()


def envpool_cage(n: int) -> Any:
    """parllel's EnvPoolCage over the same EnvPool settings."""
    from parllel.interop import make_envpool_cage

    return make_envpool_cage(
        ENVPOOL_PONG_ID, n, options=CageOptions(seed=0), **ENVPOOL_SETTINGS
    )


def run_frame_cage(
    cage_factory: Callable[[], Any], actions: np.ndarray, rows: int = 64
) -> float:
    """Steady-state steps/s of a cage stepped as the sampler steps it with
    ``frame_stack=k``: the stacks of every step go into one shared ``[B]``
    staging slot, rewards and done flags into ``[rows, B]`` slots reused
    cyclically, and after each step the newest frame of every stack is copied
    into a ``[k + rows, B]`` frames ring. One warm-up pass is not timed.
    """
    steps = len(actions)
    rows = min(rows, steps)
    with cage_factory() as cage, cage_slots(cage, rows) as (action, slots):
        example = cage.example[fields.OBSERVATION]
        k = example.shape[0]
        frames = np.zeros((k + rows, cage.n_envs, *example.shape[1:]), example.dtype)
        with buffer_from_example(
            example, (1, cage.n_envs), storage="shared"
        ) as staging:
            stacks = staging[0]
            newest = np.asarray(stacks)[:, k - 1]
            slots = [{**slot, fields.OBSERVATION: stacks} for slot in slots]

            def store_newest(t: int) -> None:
                frames[k - 1 + t] = newest

            return time_steps(cage, action, slots, actions, store_newest)


def cage_factories(n: int) -> dict[str, Callable[[], Any]]:
    """parllel's gymnasium-env layouts: name -> cage factory (a layout that
    comes out the same as an earlier one for ``n`` envs is left out)."""
    factories: dict[str, Callable[[], Any]] = {
        "serial": lambda: SerialCage(make_pong, n, options=CageOptions(seed=0))
    }
    seen: list[dict] = []
    for name, layout in process_layouts(n).items():
        if "rebalance" in name or layout in seen:  # ALE envs move, but the
            continue  # layouts above decide
        seen.append(layout)
        factories[f"process[{name}]"] = partial(
            ProcessCage, make_pong, n, options=CageOptions(seed=0), **layout
        )
    return factories


def contenders(n: int, actions: np.ndarray) -> dict[str, Callable[[], float]]:
    """Name -> zero-argument callable returning steps/s, for ``n`` envs."""
    spec = dict(factory=make_pong, kwargs={}, n=n)
    fns = [make_pong] * n
    found: dict[str, Callable[[], float]] = {
        "raw": lambda: run_raw(spec, actions),
        "ceiling": lambda: run_ceiling(spec, actions),
        "sync": partial(
            run_vector_env, lambda: gym.vector.SyncVectorEnv(fns), actions, "gym"
        ),
        "async": partial(
            run_vector_env,
            lambda: gym.vector.AsyncVectorEnv(fns, shared_memory=True),
            actions,
            "gym",
        ),
    }
    if have("stable_baselines3"):
        from stable_baselines3.common.vec_env import SubprocVecEnv

        found["sb3_subproc"] = partial(
            run_vector_env, lambda: SubprocVecEnv(fns), actions, "sb3"
        )
    for name, factory in cage_factories(n).items():
        found[name] = partial(run_frame_cage, factory, actions)
    if have("envpool"):
        found["envpool"] = partial(run_envpool, n, actions)
        found["envpool_cage"] = partial(
            run_frame_cage, partial(envpool_cage, n), actions.astype(np.int32)
        )
    return found


def collect_sps(
    make_cage: Callable[[], Any], n: int, batch_T: int, batches: int
) -> float:
    """Steps/s of ``FeedForwardSampler.collect_batch`` with the Nature CNN policy."""
    from parllel.builders import build_sample_tree
    from parllel.samplers import FeedForwardSampler
    from parllel.torch.agents import ActorCriticAgent
    from parllel.torch.handler import TorchHandler
    from parllel.torch.models import build_actor_critic

    cage = make_cage()
    try:
        model, distribution = build_actor_critic(
            cage.spaces.observation, cage.spaces.action
        )
        handler = TorchHandler(ActorCriticAgent(model, distribution), n_envs=n, seed=0)
        tree = build_sample_tree(cage, handler, batch_T, frame_stack=4)
        try:
            sampler = FeedForwardSampler(cage, handler, tree)
            sampler.collect_batch()  # warm-up: workers attach the slots
            start = time.perf_counter()
            for _ in range(batches):
                sampler.collect_batch()
            elapsed = time.perf_counter() - start
        finally:
            tree.close()
    finally:
        cage.close()
    return batches * batch_T * n / elapsed


def measure_n(n: int, steps: int, repeats: int, collect: tuple[int, int]) -> dict:
    """Every contender at ``n`` envs, the ratios, and the collect_batch figures."""
    actions = np.random.default_rng(0).integers(0, 6, size=(steps, n))
    sps = measure(contenders(n, actions), repeats, f"pong{n}")
    short = {
        key.removeprefix(f"pong{n}_").removesuffix("_sps"): v for key, v in sps.items()
    }
    layouts = {
        k: v for k, v in short.items() if k == "serial" or k.startswith("process")
    }
    best_layout = max(layouts, key=layouts.__getitem__)
    peers = [short[k] for k in ("raw", "sync", "async", "sb3_subproc") if k in short]
    result: dict[str, Any] = dict(sps)
    result[f"pong{n}_gym_best_layout"] = best_layout
    result[f"pong{n}_gym_best_vs_best_python_peer"] = ratio(
        layouts[best_layout], max(peers)
    )
    result[f"pong{n}_gym_best_vs_ceiling"] = ratio(
        layouts[best_layout], short["ceiling"]
    )
    result[f"pong{n}_envpool_cage_vs_envpool"] = ratio(
        short.get("envpool_cage"), short.get("envpool")
    )
    batch_T, batches = collect
    spec_factories = cage_factories(n)
    collect_cages = {"gym_best": spec_factories[best_layout]}
    if have("envpool"):
        collect_cages["envpool_cage"] = partial(envpool_cage, n)
    for name, factory in collect_cages.items():
        value = collect_sps(factory, n, batch_T, batches)
        print(
            f"{'pong' + str(n):>15} collect {name:>12}: {value:10.0f} steps/s",
            flush=True,
        )
        result[f"pong{n}_collect_{name}_sps"] = round(value, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--steps", type=int, default=1000, help="vector steps per run")
    args = parser.parse_args()
    pin_threads()
    collect = (64, 4)
    if args.quick:
        args.envs, args.steps, args.repeats, collect = [2], 24, 1, (8, 1)
    load_start = list(os.getloadavg())
    result: dict[str, Any] = {
        "envs": args.envs,
        "steps": args.steps,
        "repeats": args.repeats,
    }
    for n in args.envs:
        result.update(measure_n(n, args.steps, args.repeats, collect))
    first = args.envs[0]  # the headline figures: the first env count (8)
    for key in (
        "gym_best_vs_best_python_peer",
        "gym_best_vs_ceiling",
        "envpool_cage_vs_envpool",
    ):
        result[key] = result[f"pong{first}_{key}"]
        print(f"{key} ({first} envs): {result[key]}")
    result["load_average_start_end"] = [load_start, list(os.getloadavg())]
    print_result(result)


if __name__ == "__main__":
    main()
