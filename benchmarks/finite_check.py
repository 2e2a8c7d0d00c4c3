"""Cost of the samplers' NaN/inf check (``check_finite``) on sampler throughput.

Every contender is a :class:`~parllel.samplers.FeedForwardSampler` over a
serial cage. Batches are collected alternately with the check on and off
(after warm-up batches that also compile the kernel); each on/off pair gives
one throughput ratio, and the median ratio is reported. The check itself is
also timed alone on the finished batch, which is the less noisy figure:

- ``cartpole64``: CartPole-v1, 64 envs, T = 128, a 2x64 MLP actor-critic
  (torch, one thread) and GAE: a typical small-observation training run;
- ``noop64``: an env that does nothing, 64 envs, T = 128, a random numpy
  agent: only the sampler's own overhead, the worst case for small
  observations;
- ``image16``: 64x64x3 float32 observations, 16 envs, T = 128, stepping is a
  copy, random numpy agent: the worst case for large float observations.

"On" is the samplers' default, ``check_finite="auto"`` (rewards and float
observations of at most 1024 values per step). Last line: one JSON object
with ``{name}_sps_check_on``, ``{name}_sps_check_off``, ``{name}_on_vs_off``
(median on/off throughput ratio; 0.98 means the check costs 2%),
``{name}_check_fraction`` (seconds of the default check / seconds of a batch
without it), ``{name}_full_check_fraction`` (the same for
``check_finite=True``, every float observation) and ``worst_check_fraction``
(of the default check).

Usage: ``python benchmarks/finite_check.py [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # this checkout's parllel, not another
from _common import make_cartpole, median_time, pin_threads, print_result  # noqa: E402
from synthetic_envs import FloatImageEnv, NoopEnv  # noqa: E402

from parllel.agents import NumpyHandler, RandomAgent  # noqa: E402
from parllel.builders import build_sample_tree  # noqa: E402
from parllel.cages import CageOptions, SerialCage  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402
from parllel.samplers.finite import make_finite_check  # noqa: E402
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import ActorCriticAgent  # noqa: E402
from parllel.torch.models import build_actor_critic  # noqa: E402
from parllel.transforms import EstimateAdvantage  # noqa: E402


def torch_handler(cage: SerialCage) -> TorchHandler:
    torch.manual_seed(0)
    model, distribution = build_actor_critic(
        cage.spaces.observation, cage.spaces.action
    )
    return TorchHandler(ActorCriticAgent(model, distribution), cage.n_envs)


def random_handler(cage: SerialCage) -> NumpyHandler:
    return NumpyHandler(RandomAgent(cage.spaces.action, seed=0), cage.n_envs)


def measure(
    factory: Callable[[], gym.Env],
    make_handler: Callable[[SerialCage], object],
    n_envs: int,
    T: int,
    pairs: int,
    gae: bool,
) -> dict[str, float]:
    """Paired on/off batches and the check's own time for one contender."""
    with SerialCage(factory, n_envs, options=CageOptions(seed=0)) as cage:
        handler = make_handler(cage)
        with build_sample_tree(cage, handler, T) as tree:
            transform = EstimateAdvantage(tree, 0.99, 0.95) if gae else None
            sampler = FeedForwardSampler(cage, handler, tree, transform=transform)
            check = sampler.finite_check
            for _ in range(2):  # warm-up: reset, kernel compilation/cache load
                sampler.collect_batch()
            seconds: dict[bool, list[float]] = {True: [], False: []}
            for pair in range(pairs):
                order = (True, False) if pair % 2 == 0 else (False, True)
                for on in order:
                    sampler.finite_check = check if on else None
                    start = time.perf_counter()
                    sampler.collect_batch()
                    seconds[on].append(time.perf_counter() - start)
            sampler.finite_check = check
            check_seconds = median_time(
                lambda: check(tree), repeats=max(pairs, 3), number=5
            )
            full = make_finite_check(True, tree, [cage])
            full_seconds = median_time(
                lambda: full(tree), repeats=max(pairs, 3), number=5
            )
    steps = T * n_envs
    ratios = [off / on for on, off in zip(seconds[True], seconds[False])]
    batch_off = statistics.median(seconds[False])
    return {
        "sps_check_on": steps / statistics.median(seconds[True]),
        "sps_check_off": steps / batch_off,
        "on_vs_off": statistics.median(ratios),
        "check_fraction": check_seconds / batch_off,
        "full_check_fraction": full_seconds / batch_off,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    args = parser.parse_args()
    pin_threads()
    T, pairs = (8, 2) if args.quick else (128, 15)
    contenders = {
        "cartpole64": (make_cartpole, torch_handler, 64, True),
        "noop64": (NoopEnv, random_handler, 64, False),
        "image16": (FloatImageEnv, random_handler, 16, False),
    }
    result: dict[str, float] = {}
    for name, (factory, make_handler, n_envs, gae) in contenders.items():
        figures = measure(factory, make_handler, n_envs, T, pairs, gae)
        print(name, figures, file=sys.stderr, flush=True)
        result.update({f"{name}_{key}": value for key, value in figures.items()})
    result["worst_check_fraction"] = max(
        result[f"{name}_check_fraction"] for name in contenders
    )
    print_result(result)


if __name__ == "__main__":
    main()
