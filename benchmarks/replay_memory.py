"""Bytes per stored step of an 84x84x4 uint8 replay (deterministic, no timing).

Builds the replay the examples build (``build_replay_tree`` over a cage of
Atari-shaped envs, ``UniformReplay`` with its default final-observation
table), fills a few batches through a ``FeedForwardSampler`` writing straight
into it, and counts every byte the replay holds: each field of the replay
tree (padding rows included) plus the final-observation table and its index.
Arrays are allocated lazily by the OS, so even the full size costs little
resident memory (untouched pages), but it must fit the machine's address
space limits (``--steps 1000000`` needs ~29 GB of overcommittable memory).

Last line: one JSON object with ``observation_bytes_per_step``,
``bytes_per_stored_step``, ``ratio_to_observation`` (the figure to keep
<= 1.05), ``dense_bytes_per_stored_step`` and ``dense_ratio_to_observation``
(the same replay with a full-size final observation beside the observation),
``stored_steps``, ``final_observation_capacity`` and ``table_bytes``.

Usage: python benchmarks/replay_memory.py [--quick] [--steps N] [--envs B] [--batch-T T]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # this checkout's parllel first
from _common import print_result  # noqa: E402
from synthetic_envs import Atari84Env  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.agents import NumpyHandler, RandomAgent  # noqa: E402
from parllel.cages import SerialCage  # noqa: E402
from parllel.patterns import build_replay_tree  # noqa: E402
from parllel.replays import UniformReplay  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402


def measure(steps: int, n_envs: int, batch_T: int, fill_batches: int) -> dict:
    """Build an Atari-shaped replay of about ``steps`` stored steps and count its bytes."""
    # short episodes, so the few filled batches put entries in the table
    factory = partial(Atari84Env, episode_length=7, iterations=1)
    cage = SerialCage(factory, n_envs, seed=0)
    try:
        handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), n_envs)
        full_size = -(-(steps // n_envs + 1) // batch_T) * batch_T
        tree = build_replay_tree(cage, handler, batch_T, full_size)
        replay = UniformReplay(tree, 32, np.random.default_rng(0))
        sampler = FeedForwardSampler(cage, handler, tree)
        for _ in range(fill_batches):
            sampler.collect_batch()
            replay.record_batch()
        if fill_batches:
            replay.sample()  # the table answers for the ended episodes
        storage = replay.storage
        stored = storage.capacity * storage.num_envs
        observation_bytes = int(np.prod(cage.spaces.observation.shape))
        observation_bytes *= np.dtype(cage.spaces.observation.dtype).itemsize
        table_bytes = storage.final_observations.nbytes
        held = sum(leaf.nbytes for _, leaf in tree.items_flat()) + table_bytes
        # the same replay with a full-size final observation (one per row)
        slot_bytes = tree[fields.FINAL_OBSERVATION].nbytes
        dense = held - table_bytes - slot_bytes + full_size * n_envs * observation_bytes
        return {
            "observation_bytes_per_step": observation_bytes,
            "bytes_per_stored_step": held / stored,
            "ratio_to_observation": held / stored / observation_bytes,
            "dense_bytes_per_stored_step": dense / stored,
            "dense_ratio_to_observation": dense / stored / observation_bytes,
            "stored_steps": stored,
            "final_observation_capacity": storage.final_observations.capacity,
            "table_bytes": table_bytes,
            "replay_bytes": held,
            "batch_T": batch_T,
            "n_envs": n_envs,
        }
    finally:
        cage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--steps", type=int, default=250_000, help="stored steps")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--batch-T", type=int, default=32)
    args = parser.parse_args()
    steps = 4096 if args.quick else args.steps
    result = measure(steps, args.envs, args.batch_T, fill_batches=3)
    print(
        f"{result['stored_steps']} stored steps of 84x84x4 uint8 "
        f"({result['observation_bytes_per_step']} B): "
        f"{result['bytes_per_stored_step']:.1f} B per stored step "
        f"({result['ratio_to_observation']:.4f}x the observation; a full-size "
        f"final observation: {result['dense_ratio_to_observation']:.4f}x); "
        f"table of {result['final_observation_capacity']} final observations"
    )
    print_result(result)


if __name__ == "__main__":
    main()
