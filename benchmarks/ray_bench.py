"""Sampling on Ray on one machine: RaySampler vs the best local layout, and its costs.

CartPole-v1, 8 envs x 128 steps per batch, a 64x64 actor-critic MLP choosing
the actions (inference included), torch pinned to one thread in every
process; a local Ray with 2 CPUs started by the script.

- ``local``: a ``FeedForwardSampler`` over the 8 envs in each layout parllel
  offers on this machine (serial; a process cage with 2 workers; the main
  process plus 1 worker; ``AlternatingSampler`` over two process cages);
  the best is the reference.
- ``ray``: a ``RaySampler`` with 2 actors of 4 envs each (serial cages),
  ``max_lag=None`` (the actors collect the next batch while the learner
  copies this one), no learning: steps/s of ``collect_batch``.
- ``ray_batch_overhead_ms``: one actor with all 8 envs against the same
  local serial sampler, taking turns (``max_lag=0``, weights published
  every batch): the extra time per batch (request, result through the
  object store, copy into the learner's tree, weights).
- ``recover_batches``: an actor killed mid-run (``ray.kill(...,
  no_restart=False)``) with ``max_restarts=1``: actor batches lost before
  its replacement sent one (0 or 1).
- ``weights_broadcast_ms``: ``publish_weights()`` (one ``ray.put`` of the
  example's model) plus 2 tasks fetching and loading it, in parallel.
- ``batch_bytes`` and ``weights_bytes``: sizes, for the scaling model in
  docs/distributed.md.

Medians over ``--repeats`` interleaved runs. Last line: one JSON object
with ``ray_vs_local``, ``ray_sps``, ``local_best_sps``, ``local_best_layout``,
``ray_batch_overhead_ms``, ``recover_batches``, ``weights_broadcast_ms``.
Usage: python benchmarks/ray_bench.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402

from parllel.builders import build_alternating_cages, build_sample_tree  # noqa: E402
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage  # noqa: E402
from parllel.distributed import RaySampler  # noqa: E402
from parllel.distributed.actor import load_weights, weights_of  # noqa: E402
from parllel.samplers import AlternatingSampler, FeedForwardSampler  # noqa: E402
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import ActorCriticAgent  # noqa: E402
from parllel.torch.models import build_actor_critic  # noqa: E402
from parllel.torch.weights import module_tensors  # noqa: E402

N_ENVS, BATCH_T, N_ACTORS = 8, 128, 2


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def build_agent() -> ActorCriticAgent:
    torch.manual_seed(0)
    env = make_env()
    return ActorCriticAgent(
        *build_actor_critic(
            env.observation_space, env.action_space, hidden_sizes=(64, 64)
        )
    )


def local_sampler(layout: str) -> Any:
    """The 8 envs in one of parllel's local layouts, with the MLP acting."""
    handler = TorchHandler(build_agent(), N_ENVS)
    if layout == "alternating":
        cages = build_alternating_cages(make_env, N_ENVS, options=CageOptions(seed=0))
        tree = build_sample_tree(cages, handler, BATCH_T)
        return AlternatingSampler(cages, handler, tree)
    if layout == "serial":
        cage: Any = SerialCage(make_env, N_ENVS, options=CageOptions(seed=0))
    elif layout == "process_2workers":
        cage = ProcessCage(
            make_env,
            N_ENVS,
            layout=ProcessLayout(n_workers=2),
            options=CageOptions(seed=0),
        )
    else:  # the main process steps some envs, one worker the others
        cage = ProcessCage(
            make_env,
            N_ENVS,
            layout=ProcessLayout(n_workers=1, main_process_envs=N_ENVS // 2),
            options=CageOptions(seed=0),
        )
    tree = build_sample_tree(cage, handler, BATCH_T)
    return FeedForwardSampler(cage, handler, tree)


def close_local(sampler: Any) -> None:
    for cage in sampler.cages:
        cage.close()
    sampler.sample_tree.close()


def build_actor_sampler(actor_index: int, envs: int) -> FeedForwardSampler:
    """Runs in a Ray actor: ``envs`` CartPoles (serial), the MLP acting."""
    torch.set_num_threads(1)
    cage = SerialCage(
        make_env, envs, options=CageOptions(seed=0, env_offset=actor_index * envs)
    )
    handler = TorchHandler(build_agent(), envs)
    return FeedForwardSampler(cage, handler, build_sample_tree(cage, handler, BATCH_T))


def time_batches(collect: Any, batches: int) -> float:
    """Seconds per batch of ``collect()`` after one warm-up batch."""
    collect()
    start = time.perf_counter()
    for _ in range(batches):
        collect()
    return (time.perf_counter() - start) / batches


def local_sps(layout: str, batches: int) -> float:
    sampler = local_sampler(layout)
    try:
        return N_ENVS * BATCH_T / time_batches(sampler.collect_batch, batches)
    finally:
        close_local(sampler)


def ray_sps(batches: int) -> float:
    with RaySampler(
        build_actor_sampler, N_ENVS // N_ACTORS, n_actors=N_ACTORS, max_lag=None
    ) as sampler:
        return N_ENVS * BATCH_T / time_batches(sampler.collect_batch, batches)


def overhead_ms(batches: int) -> float:
    """Per-batch time of one actor with all envs minus the local serial sampler,
    both taking turns with a learner that publishes weights every batch."""
    agent = build_agent()
    modules = {"model": agent.model}
    with RaySampler(
        build_actor_sampler, N_ENVS, n_actors=1, max_lag=0, modules=modules
    ) as sampler:

        def remote_turn() -> None:
            sampler.collect_batch(learner_version=sampler.policy_version)
            sampler.publish_weights()

        remote = time_batches(remote_turn, batches)
    local = local_sampler("serial")
    try:

        def local_turn() -> None:
            local.collect_batch()
            local.handler.agent.model.load_state_dict(agent.model.state_dict())

        here = time_batches(local_turn, batches)
    finally:
        close_local(local)
    return (remote - here) * 1e3


def recover_batches(batches: int) -> int:
    """Actor batches lost when one actor is killed mid-run (max_restarts=1)."""
    import ray

    with RaySampler(
        build_actor_sampler,
        N_ENVS // N_ACTORS,
        n_actors=N_ACTORS,
        max_lag=None,
        max_restarts=1,
    ) as sampler:
        for n in range(batches):
            if n == batches // 2:
                ray.kill(sampler.actors[0], no_restart=False)
            sampler.collect_batch()
        return int(sampler.dropped_batches)


def broadcast_ms(repeats: int) -> tuple[float, int]:
    """publish_weights() plus 2 parallel tasks that fetch and load the weights."""
    import ray

    agent = build_agent()

    @ray.remote(num_cpus=0)
    def fetch_and_load(box: list) -> int:
        model = build_agent().model
        load_weights(module_tensors({"model": model}), ray.get(box[0]))
        return 1

    ray.get([fetch_and_load.remote([ray.put(weights_of({"model": agent.model}))])])
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ref = ray.put(weights_of({"model": agent.model}))
        ray.get([fetch_and_load.remote([ref]) for _ in range(N_ACTORS)])
        times.append(time.perf_counter() - start)
    size = sum(a.nbytes for a in weights_of({"model": agent.model}).values())
    return statistics.median(times) * 1e3, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        args.batches, args.repeats = 2, 1
    pin_threads()
    import ray

    ray.init(num_cpus=N_ACTORS, include_dashboard=False, log_to_driver=False)
    try:
        layouts = ["serial", "process_2workers", "main_1worker", "alternating"]
        runs: dict[str, list[float]] = {name: [] for name in (*layouts, "ray")}
        for repeat in range(args.repeats):
            for layout in layouts:
                runs[layout].append(local_sps(layout, args.batches))
            runs["ray"].append(ray_sps(args.batches))
            print(
                f"repeat {repeat}: "
                + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in runs.items())
                + " steps/s",
                flush=True,
            )
        sps = {name: statistics.median(values) for name, values in runs.items()}
        best = max(layouts, key=lambda name: sps[name])
        overheads = [overhead_ms(args.batches) for _ in range(args.repeats)]
        recovered = recover_batches(max(4, args.batches))
        weights_ms, weights_bytes = broadcast_ms(5 if args.quick else 20)
        batch_bytes = int(
            sum(
                leaf.padded_ndarray().nbytes
                for _, leaf in local_sampler_tree_sizes().items_flat()
            )
        )
    finally:
        ray.shutdown()
    print_result(
        {
            "ray_vs_local": round(sps["ray"] / sps[best], 3),
            "ray_sps": round(sps["ray"], 1),
            "local_best_sps": round(sps[best], 1),
            "local_best_layout": best,
            **{f"local_{name}_sps": round(sps[name], 1) for name in layouts},
            "ray_batch_overhead_ms": round(statistics.median(overheads), 3),
            "recover_batches": recovered,
            "weights_broadcast_ms": round(weights_ms, 3),
            "weights_bytes": weights_bytes,
            "batch_bytes": batch_bytes,
            "batches": args.batches,
            "repeats": args.repeats,
        }
    )


def local_sampler_tree_sizes() -> Any:
    """The learner tree of one batch (its sizes)."""
    cage = SerialCage(make_env, N_ENVS, options=CageOptions(seed=0))
    try:
        return build_sample_tree(cage, TorchHandler(build_agent(), N_ENVS), BATCH_T)
    finally:
        cage.close()


if __name__ == "__main__":
    main()
