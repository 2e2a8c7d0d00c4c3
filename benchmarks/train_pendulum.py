"""Time to a mean eval return of -200 on Pendulum-v1: parllel SAC vs SB3 SAC.

Same hyperparameters for both: 1 env, learning rate 1e-3, batch 256, buffer
1e6, one gradient update per env step (train_freq 1, gradient_steps 1),
learning starts at 256 steps (our replay samples once it holds a batch; SB3
is given the same) with uniform random actions until then (SB3's warm-up;
ours through ``SacAgent.random_actions``), gamma 0.99, tau 0.005, automatic entropy tuning
(initial alpha 1, target entropy -1), 256x256 MLPs; torch pinned to one
thread. Every 1k env steps both run 10 deterministic evaluation episodes.

How time is counted: wall clock from the start of training (``runner.run()``
/ ``model.learn()``; model construction excluded) to the end of the first
evaluation whose mean return is >= -200, minus the time spent in all
evaluations up to then (measured around each evaluation, identically for
both). Steps are the env steps at that evaluation. A run stops there (or at
20k steps if it never gets there; then it counts as 20k steps and its full
training time). Each figure is the median over 20 seeds (``--seeds``), ours
and SB3 interleaved per seed so both see the same machine load; a run that
never gets there counts as never (``inf``). Ratios (ours / SB3) come with 95%
percentile-bootstrap intervals (seeds resampled per side); only an interval
that excludes 1 says "faster" or "fewer steps".

Last line: one JSON object with ``ours_time_to_m200_s``,
``sb3_time_to_m200_s``, ``time_to_m200_ratio`` (ours / SB3),
``steps_to_m200_ratio``, ``ms_per_step_ratio`` (each with ``_ci``, [low,
high]), ``ours_steps_to_m200``, ``sb3_steps_to_m200``, ``seeds`` and
per-seed details. SB3
figures are null when stable-baselines3 is not installed (``pip install
-e .[bench]``). Usage: python benchmarks/train_pendulum.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402
from _stats import finite_or_none, median_ratio_interval, verdict  # noqa: E402

from parllel.cages import CageOptions, build_cages
from parllel.patterns import build_eval_sampler, build_replay_tree, build_sample_tree
from parllel.replays import UniformReplay  # noqa: E402
from parllel.runners import Callback, OffPolicyRunner  # noqa: E402
from parllel.runners.off_policy import AttributeSchedule  # noqa: E402
from parllel.runtime import Seeds, seed_everything  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import build_sac_agent  # noqa: E402
from parllel.torch.algos import (  # noqa: E402
    SAC,
    EntropyCoefficient,
    build_sac_optimizer,
)

THRESHOLD = -200.0
HYPER = dict(
    total_steps=20_000,
    learning_rate=1e-3,
    batch_size=256,
    buffer_size=1_000_000,
    learning_starts=256,
    gamma=0.99,
    tau=0.005,
    hidden=(256, 256),
    eval_interval=1_000,
    eval_episodes=10,
)


def make_env() -> gym.Env:
    return gym.make("Pendulum-v1")


class TimedEval:
    """Wraps an eval sampler; accumulates the seconds spent evaluating."""

    def __init__(self, sampler: Any) -> None:
        self.sampler, self.seconds = sampler, 0.0

    def collect(self) -> Any:
        start = time.perf_counter()
        try:
            return self.sampler.collect()
        finally:
            self.seconds += time.perf_counter() - start


class Threshold(Callback):
    """Record (steps, training seconds) at the first eval >= THRESHOLD, then stop."""

    def __init__(self, timed_eval: TimedEval) -> None:
        self.timed_eval, self.start = timed_eval, 0.0
        self.reached: tuple[int, float] | None = None
        self.curve: list[tuple[int, float]] = []

    def on_train_start(self, runner: Any) -> None:
        self.start = time.perf_counter()

    def on_eval_end(self, runner: Any, eval_metrics: dict[str, float]) -> None:
        train_seconds = time.perf_counter() - self.start - self.timed_eval.seconds
        value = eval_metrics["eval/return_mean"]
        self.curve.append((runner.env_steps, round(value, 1)))
        if self.reached is None and value >= THRESHOLD:
            self.reached = (runner.env_steps, train_seconds)
            runner.request_stop()
        self.last = (runner.env_steps, train_seconds)


def run_ours(seed: int, h: dict[str, Any]) -> dict[str, Any]:
    seeds = Seeds.from_master(seed, n_envs=1)
    seed_everything(seeds)
    cage = build_cages(
        make_env, 1, parallel="serial", options=CageOptions(seed=seeds.master)
    )
    agent = build_sac_agent(
        cage.spaces.observation, cage.spaces.action, hidden_sizes=h["hidden"]
    )
    handler = TorchHandler(agent, n_envs=1)
    sample_tree = build_sample_tree(cage, handler, 1, final_observation=True)
    replay = UniformReplay(
        build_replay_tree(cage, handler, 1, h["buffer_size"]),
        h["batch_size"],
        np.random.default_rng(seeds.master),
        learning_starts=h["learning_starts"],
        discount=h["gamma"],
    )
    sampler = FeedForwardSampler(cage, handler, sample_tree)
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        TorchHandler(agent, n_envs=h["eval_episodes"]),
        h["eval_episodes"],
        h["eval_episodes"],
        seed=10_000 + seed,
    )
    alpha = EntropyCoefficient(1.0)
    optimizer = build_sac_optimizer(agent, alpha, learning_rate=h["learning_rate"])
    sac = SAC(agent, optimizer, alpha, tau=h["tau"], replay_ratio=1.0)
    timed = TimedEval(eval_sampler)
    threshold = Threshold(timed)
    runner = OffPolicyRunner(
        sampler,
        replay,
        sac,
        h["total_steps"],
        eval_sampler=timed,
        eval_interval_steps=h["eval_interval"],
        callbacks=[
            AttributeSchedule(
                agent, "random_actions", lambda step: step < h["learning_starts"]
            ),
            threshold,
        ],
    )
    try:
        runner.run()
    finally:
        cage.close()
        eval_cage.close()
    return _result(threshold.reached, threshold.last, threshold.curve)


def run_sb3(seed: int, h: dict[str, Any]) -> dict[str, Any] | None:
    try:
        from stable_baselines3 import SAC as SB3SAC
        from stable_baselines3.common.callbacks import BaseCallback
    except ImportError:
        return None

    class Sb3Threshold(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.eval_env = make_env()
            self.eval_seconds, self.start = 0.0, 0.0
            self.reached: tuple[int, float] | None = None
            self.curve: list[tuple[int, float]] = []
            self.episode_seed = 10_000 + seed

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            if self.num_timesteps % h["eval_interval"]:
                return True
            begin = time.perf_counter()
            returns = []
            for episode in range(h["eval_episodes"]):
                obs, _ = self.eval_env.reset(seed=self.episode_seed + episode)
                done, total = False, 0.0
                while not done:
                    action, _ = self.model.predict(obs, deterministic=True)
                    obs, reward, terminated, truncated, _ = self.eval_env.step(action)
                    total += float(reward)
                    done = terminated or truncated
                returns.append(total)
            self.eval_seconds += time.perf_counter() - begin
            train_seconds = time.perf_counter() - self.start - self.eval_seconds
            value = float(np.mean(returns))
            self.curve.append((self.num_timesteps, round(value, 1)))
            self.last = (self.num_timesteps, train_seconds)
            if value >= THRESHOLD:
                self.reached = (self.num_timesteps, train_seconds)
                return False
            return True

    torch.manual_seed(seed)
    model = SB3SAC(
        "MlpPolicy",
        make_env(),
        learning_rate=h["learning_rate"],
        buffer_size=h["buffer_size"],
        learning_starts=h["learning_starts"],
        batch_size=h["batch_size"],
        tau=h["tau"],
        gamma=h["gamma"],
        train_freq=1,
        gradient_steps=1,
        policy_kwargs={"net_arch": list(h["hidden"])},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    callback = Sb3Threshold()
    model.learn(h["total_steps"], callback=callback)
    return _result(callback.reached, callback.last, callback.curve)


def _result(
    reached: tuple[int, float] | None,
    last: tuple[int, float],
    curve: list[tuple[int, float]],
) -> dict[str, Any]:
    steps, seconds = reached if reached is not None else last
    return {
        "reached": reached is not None,
        "steps": steps,
        "seconds": round(seconds, 2),
        "curve": curve,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    pin_threads()
    h = dict(HYPER)
    n_seeds = args.seeds
    if args.quick:
        h.update(total_steps=600, eval_interval=300, eval_episodes=2)
        h.update(learning_starts=64, batch_size=64, hidden=(32, 32))
        n_seeds = 1
    ours, sb3 = [], []
    for seed in range(n_seeds):
        ours.append(run_ours(seed, h))
        print(f"seed {seed} ours {ours[-1]}", file=sys.stderr, flush=True)
        theirs = run_sb3(seed, h)
        if theirs is not None:
            sb3.append(theirs)
            print(f"seed {seed} sb3  {theirs}", file=sys.stderr, flush=True)

    def median(runs: list[dict[str, Any]], key: str) -> float | None:
        return round(statistics.median(r[key] for r in runs), 2) if runs else None

    # a run that never reached -200 counts as never (inf steps and seconds)
    def to_target(runs: list[dict[str, Any]], key: str) -> list[float]:
        return [r[key] if r["reached"] else math.inf for r in runs]

    result: dict[str, Any] = {
        "ours_time_to_m200_s": finite_or_none(
            statistics.median(to_target(ours, "seconds")), 2
        ),
        "ours_steps_to_m200": finite_or_none(
            statistics.median(to_target(ours, "steps"))
        ),
        "ours_ms_per_step": round(
            1e3 * statistics.median(r["seconds"] / r["steps"] for r in ours), 3
        ),
        "ours_reached": [r["reached"] for r in ours],
        "ours_steps_per_seed": [r["steps"] for r in ours],
        "sb3_reached": [r["reached"] for r in sb3],
        "sb3_steps_per_seed": [r["steps"] for r in sb3],
        "seeds": n_seeds,
        "quick": args.quick,
    }
    for key in ("time_to_m200_ratio", "steps_to_m200_ratio", "ms_per_step_ratio"):
        result[key], result[f"{key}_ci"] = None, [None, None]
    result.update(sb3_time_to_m200_s=None, sb3_steps_to_m200=None, sb3_ms_per_step=None)
    if sb3:
        result["sb3_time_to_m200_s"] = finite_or_none(
            statistics.median(to_target(sb3, "seconds")), 2
        )
        result["sb3_steps_to_m200"] = finite_or_none(
            statistics.median(to_target(sb3, "steps"))
        )
        result["sb3_ms_per_step"] = round(
            1e3 * statistics.median(r["seconds"] / r["steps"] for r in sb3), 3
        )
        pairs = {
            "time_to_m200_ratio": (
                to_target(ours, "seconds"),
                to_target(sb3, "seconds"),
            ),
            "steps_to_m200_ratio": (to_target(ours, "steps"), to_target(sb3, "steps")),
            "ms_per_step_ratio": (
                [r["seconds"] / r["steps"] for r in ours],
                [r["seconds"] / r["steps"] for r in sb3],
            ),
        }
        for key, (a, b) in pairs.items():
            ratio, low, high = median_ratio_interval(a, b)
            result[key] = finite_or_none(ratio)
            result[f"{key}_ci"] = [finite_or_none(low), finite_or_none(high)]
            print(f"{key}: {ratio:.3f} [{low:.3f}, {high:.3f}]: {verdict(low, high)}")
    print_result(result)


if __name__ == "__main__":
    main()
