"""Asynchronous vs synchronous PPO training throughput on CartPole with a CPU cost per step.

Each env step also burns a fixed amount of CPU, chosen (measured at the
start) so that collecting one batch takes about as long as PPO's update on
it; then the two can overlap. Same PPO settings as
``examples/cartpole/train_ppo.py`` (8 envs x 32 steps, 20 epochs of one
minibatch, 64x64 MLP, fused Adam), serial cages, torch pinned to one thread
in every process.

- ``sync``: ``OnPolicyRunner`` with a ``FeedForwardSampler``: sampling and
  learning take turns.
- ``async``: the same runner with a ``BackgroundSampler`` (``max_lag=1``):
  the next batch is collected in a background process while PPO trains.
- ``async_lag0``: the background sampler with ``max_lag=0``: the two take
  turns as in ``sync``, so this measures what the background machinery
  costs (hand-over, weights, messages).
- ceiling: the time per batch of sampling alone and of learning alone,
  measured while both run at once in two independent processes
  (``t_sample'``, ``t_learn'``); the best an overlap can do is one batch per
  ``max(t_sample', t_learn')``, reported against the measured ``sync``.

Reported: ``sample_ms`` / ``learn_ms`` per batch (each alone),
``step_cost_us`` (the CPU cost added per env step), training steps/s of
both modes (median of ``--repeats`` runs), ``async_vs_sync_sps``,
``ceiling_vs_sync`` (measured in each repeat, as this machine's speed
drifts), ``async_vs_ceiling``, ``async_lag0_vs_sync_sps`` and ``max_lag_observed``
(the largest policy lag of any trained batch, which must not exceed
``max_lag``).

Usage: python benchmarks/async_bench.py [--quick] [--batches N] [--repeats N]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, pin_threads, print_result  # noqa: E402
from synthetic_envs import _busy, busy_iterations  # noqa: E402

from parllel.builders import add_advantage_estimation, build_sample_tree  # noqa: E402
from parllel.cages import CageOptions, SerialCage  # noqa: E402
from parllel.runners import Callback, OnPolicyRunner  # noqa: E402
from parllel.samplers import BackgroundSampler, FeedForwardSampler  # noqa: E402
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import ActorCriticAgent  # noqa: E402
from parllel.torch.algos import PPO, ActorCriticEvaluator, adam  # noqa: E402
from parllel.torch.models import build_actor_critic  # noqa: E402
from parllel.transforms import Compose  # noqa: E402

N_ENVS, BATCH_T, EPOCHS, MAX_LAG = 8, 32, 20, 1


class CostlyCartPole(gym.Wrapper):
    """CartPole-v1 that burns ``iterations`` of a busy loop per step."""

    def __init__(self, iterations: int) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.iterations = iterations

    def step(self, action: Any) -> Any:
        if self.iterations:
            _busy(self.iterations)
        return self.env.step(action)


def build_agent(seed: int) -> ActorCriticAgent:
    torch.manual_seed(seed)
    env = gym.make("CartPole-v1")
    return ActorCriticAgent(
        *build_actor_critic(
            env.observation_space, env.action_space, hidden_sizes=(64, 64)
        )
    )


def build_sampler(
    iterations: int, seed: int, weights: Any = None, agent: Any = None
) -> FeedForwardSampler:
    """Serial cage of costly CartPoles, ``agent`` (a new one following
    ``weights`` if None), GAE."""
    torch.set_num_threads(1)
    cage = SerialCage(
        CostlyCartPole,
        N_ENVS,
        {"iterations": iterations},
        options=CageOptions(seed=seed),
    )
    handler = TorchHandler(agent or build_agent(seed), N_ENVS)
    if weights is not None:
        handler.follow_weights(weights)
    tree = build_sample_tree(cage, handler, BATCH_T)
    gae = Compose(add_advantage_estimation(tree, 0.98, 0.8, normalize=True))
    return FeedForwardSampler(cage, handler, tree, transform=gae)


def build_ppo(agent: ActorCriticAgent) -> PPO:
    return PPO(
        ActorCriticEvaluator(agent.model, agent.distribution),
        adam(agent.model.parameters(), 1e-3),
        epochs=EPOCHS,
        minibatches=1,
        normalize_advantage=False,  # normalized over the batch by the transform
    )


def close_sampler(sampler: FeedForwardSampler) -> None:
    for cage in sampler.cages:
        cage.close()
    sampler.sample_tree.close()


def time_sampling(iterations: int, batches: int) -> float:
    """Seconds per batch of the synchronous sampler alone (no learning)."""
    sampler = build_sampler(iterations, seed=0)
    try:
        sampler.collect_batch()  # reset, warm-up
        return median_time(sampler.collect_batch, repeats=3, number=batches)
    finally:
        close_sampler(sampler)


def time_learning(batches: int) -> float:
    """Seconds per PPO update on one (fixed) batch."""
    sampler = build_sampler(0, seed=0)
    try:
        tree, _ = sampler.collect_batch()
        ppo = build_ppo(build_agent(0))
        ppo.optimize(tree)  # warm-up
        return median_time(lambda: ppo.optimize(tree), repeats=3, number=batches)
    finally:
        close_sampler(sampler)


def _sampling_process(iterations: int, batches: int, queue: Any) -> None:
    pin_threads()
    queue.put(time_sampling(iterations, batches))


def time_both_at_once(iterations: int, batches: int) -> tuple[float, float]:
    """Per-batch seconds of sampling (another process) and learning (this one),
    run at the same time: the two-process ceiling of an overlap."""
    ctx = mp.get_context("forkserver")
    queue = ctx.Queue()
    process = ctx.Process(target=_sampling_process, args=(iterations, batches, queue))
    process.start()
    try:
        learn = time_learning(batches * 2)  # keeps learning while the other samples
        sample = queue.get(timeout=600)
    finally:
        process.join(60)
    return sample, learn


class LagRecorder(Callback):
    """Records the largest lag of every trained batch."""

    def __init__(self) -> None:
        self.lags: list[float] = []

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        if "async/lag_max" in metrics:
            self.lags.append(metrics["async/lag_max"])


def train(iterations: int, batches: int, max_lag: int | None) -> tuple[float, list]:
    """Training steps per second of ``batches`` PPO iterations (after one
    warm-up); synchronous if ``max_lag`` is None, else a background sampler
    with that bound."""
    agent = build_agent(0)
    ppo = build_ppo(agent)
    lags = LagRecorder()
    total = (batches + 1) * N_ENVS * BATCH_T
    clock: list[float] = []

    class Clock(Callback):
        def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
            clock.append(time.perf_counter())

    if max_lag is not None:
        learner = TorchHandler(agent, N_ENVS)
        weights = learner.share_weights()
        sampler: Any = BackgroundSampler(
            build_sampler, iterations, 0, weights, max_lag=max_lag
        )
        close = [sampler.close, weights.close]
    else:
        learner = None
        sampler = build_sampler(iterations, 0, agent=agent)  # the learner's agent
        close = [lambda: close_sampler(sampler)]
    try:
        OnPolicyRunner(
            sampler,
            ppo,
            total,
            callbacks=[lags, Clock()],
            handle_interrupt=False,
            publisher=learner,
        ).run()
    finally:
        for fn in close:
            fn()
    seconds = clock[-1] - clock[0]  # from the end of the warm-up iteration
    return batches * N_ENVS * BATCH_T / seconds, lags.lags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        args.batches, args.repeats = 3, 1
    pin_threads()
    calibration = max(2, args.batches // 10)
    learn = time_learning(calibration)
    sample_free = time_sampling(0, calibration)
    extra = max(learn - sample_free, 0.0) / (N_ENVS * BATCH_T)
    iterations = busy_iterations(extra) if extra > 0 else 0
    sample = time_sampling(iterations, calibration)
    print(
        f"per batch: sampling {sample * 1e3:.1f} ms (+{extra * 1e6:.1f} us/step), "
        f"learning {learn * 1e3:.1f} ms",
        flush=True,
    )
    modes = {"sync": None, "async": MAX_LAG, "async_lag0": 0}
    runs: dict[str, list[float]] = {mode: [] for mode in (*modes, "ceiling")}
    observed: dict[str, list[float]] = {mode: [] for mode in modes}
    for repeat in range(args.repeats):
        for mode, max_lag in modes.items():
            sps, lags = train(iterations, args.batches, max_lag)
            runs[mode].append(sps)
            observed[mode] += lags
            print(f"repeat {repeat} {mode}: {sps:,.0f} steps/s", flush=True)
        # measured in each repeat, as the machine's speed drifts
        both = time_both_at_once(iterations, max(2, args.batches // 4))
        runs["ceiling"].append(N_ENVS * BATCH_T / max(both))
        print(
            f"repeat {repeat} at once: sampling {both[0] * 1e3:.1f} ms, learning "
            f"{both[1] * 1e3:.1f} ms per batch",
            flush=True,
        )
    sync, asynchronous, lag0, ceiling = (statistics.median(runs[m]) for m in runs)
    print_result(
        {
            "sample_ms": round(sample * 1e3, 2),
            "learn_ms": round(learn * 1e3, 2),
            "step_cost_us": round(extra * 1e6, 2),
            "sync_sps": round(sync, 1),
            "async_sps": round(asynchronous, 1),
            "async_vs_sync_sps": round(asynchronous / sync, 3),
            "ceiling_sps": round(ceiling, 1),
            "ceiling_vs_sync": round(ceiling / sync, 3),
            "async_vs_ceiling": round(asynchronous / ceiling, 3),
            "async_lag0_sps": round(lag0, 1),
            "async_lag0_vs_sync_sps": round(lag0 / sync, 3),
            "max_lag": MAX_LAG,
            "max_lag_observed": int(max(observed["async"])),
            "max_lag_observed_lag0": int(max(observed["async_lag0"])),
            "batches": args.batches,
            "repeats": args.repeats,
        }
    )


if __name__ == "__main__":
    main()
