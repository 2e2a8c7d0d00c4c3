"""Steps and time to a mean eval return of -200 on Pendulum-v1: parllel SAC vs SB3 SAC.

Same hyperparameters for both: 1 env per seed, learning rate 1e-3, batch
256, buffer 1e6, one gradient update per env step (train_freq 1,
gradient_steps 1), learning starts at 256 steps (our replay samples once it
holds a batch; SB3 is given the same) with uniform random actions until then
(SB3's warm-up; ours through ``SacAgent.random_actions``), gamma 0.99, tau
0.005, automatic entropy tuning (initial alpha 1, target entropy -1), 256x256
MLPs; torch pinned to one thread. Every 1k env steps both run 10
deterministic evaluation episodes per seed.

parllel trains its seeds as **one program** on the seed axis (docs/seeds.md:
the JAX SAC, one cage of every seed's env, one vmapped update of every seed,
each seed sampling its own transitions); SB3's seeds are separate runs, as
its users run them (one after the other, after ours).

What is counted, and why: a seed on the seed axis cannot stop alone, so the
program trains until every seed reached -200 (or 20k steps). Per seed,
**steps to -200** are the env steps of its own first evaluation with a mean
return >= -200 (a seed that never gets there counts as never, ``inf``):
``ours_steps_to_m200``, ``sb3_steps_to_m200`` (medians over the seeds) and
``steps_to_m200_ratio`` with a 95% percentile-bootstrap interval (seeds
resampled per side; only an interval that excludes 1 says "fewer steps").
Wall time is not per seed (one program serves them all), so it is compared
for **all the seeds**: ``ours_all_seeds_time_to_m200_s`` is the program's
training wall clock (``runner.run()``, construction excluded) until its last
seed reached -200, ``sb3_all_seeds_time_to_m200_s`` the sum of SB3's runs'
training wall clocks (``model.learn()``), each until it reached -200 (or its
full 20k steps), and ``all_seeds_time_to_m200_ratio`` theirs (ours / SB3).
Both exclude the time spent in evaluations (measured around each). Seeds
that reached -200 early keep training in our program until the last one
does, which counts against ours. ``ms_per_step_ratio``: ours' program
seconds per env step of all its seeds over SB3's summed seconds per summed
step.

Last line: one JSON object with those keys, ``seeds`` and per-seed details.
SB3 figures are null when stable-baselines3 is not installed (``pip install
-e .[bench]``). Usage: python benchmarks/train_pendulum.py [--quick]
[--seeds N]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402
from _stats import finite_or_none, median_ratio_interval, verdict  # noqa: E402

from parllel.builders import build_eval_sampler, build_replay_tree
from parllel.cages import CageOptions, build_cage
from parllel.runners import Callback  # noqa: E402
from parllel.runners.off_policy import AttributeSchedule  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402

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


@dataclasses.dataclass
class _SeedsConfig:
    """What the seed axis's group directory records."""

    seeds: int
    hyperparameters: dict


class SeedsThreshold:
    """Wraps the seed axis's eval sampler: records each run's mean eval
    return and the first evaluation (steps, the program's training seconds)
    where it reached THRESHOLD; stops the program once every run has.
    Evaluations are excluded from the program's clock."""

    def __init__(self, sampler: Any, n_runs: int, n_eval: int) -> None:
        self.sampler, self.n_eval = sampler, n_eval
        self.start, self.eval_seconds = time.perf_counter(), 0.0
        self.runner: Any = None
        self.reached: list[tuple[int, float] | None] = [None] * n_runs
        self.curves: list[list[tuple[int, float]]] = [[] for _ in range(n_runs)]
        self.last = (0, 0.0)

    def collect(self) -> list:
        train_seconds = time.perf_counter() - self.start - self.eval_seconds
        begin = time.perf_counter()
        trajs = self.sampler.collect()
        steps = self.runner.env_steps
        for run, curve in enumerate(self.curves):
            returns = [t.return_ for t in trajs if t.env_index // self.n_eval == run]
            value = float(np.mean(returns))
            curve.append((steps, round(value, 1)))
            if self.reached[run] is None and value >= THRESHOLD:
                self.reached[run] = (steps, train_seconds)
        self.last = (steps, train_seconds)
        if all(r is not None for r in self.reached):
            self.runner.request_stop()
        self.eval_seconds += time.perf_counter() - begin
        return trajs


class _StartClock(Callback):
    def __init__(self, threshold: SeedsThreshold) -> None:
        self.threshold = threshold

    def on_train_start(self, runner: Any) -> None:
        self.threshold.start = time.perf_counter()


def run_ours(n_seeds: int, h: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    """Seeds 0 .. n_seeds - 1 as one program: the JAX SAC on the seed axis.

    Returns each seed's result (its steps to THRESHOLD; as seconds the
    program's training seconds at that evaluation) and the program's training
    seconds until its last evaluation.
    """
    from parllel.jax.agents import build_sac_agent
    from parllel.jax.algos import (
        SAC,
        EntropyCoefficient,
        SeededSAC,
        build_sac_optimizers,
    )
    from parllel.jax.seeds import SeededHandler, SeedStack
    from parllel.replays.per_run import PerRunReplay
    from parllel.runners import RunSettings
    from parllel.runners.seed_runs import start_seed_runs
    from parllel.runners.seeds import SeedsRunner

    n_eval = h["eval_episodes"]
    with tempfile.TemporaryDirectory() as run_root:
        runs = start_seed_runs(
            RunSettings(run_root=run_root, console=None),
            "pendulum-sac",
            _SeedsConfig(n_seeds, h),
            seeds=n_seeds,
            master=0,
            n_envs=1,
            n_eval_envs=n_eval,
        )
        cage = build_cage(
            make_env,
            n_seeds,
            parallel="serial",
            options=CageOptions(seed=runs.env_seeds),
        )
        stack = SeedStack(
            [
                build_sac_agent(
                    cage.spaces.observation,
                    cage.spaces.action,
                    seed=seeds.torch,
                    hidden_sizes=h["hidden"],
                )
                for seeds in runs.seeds
            ]
        )
        actions = [seeds.actions for seeds in runs.seeds]
        handler = SeededHandler(stack, 1, seeds=actions)
        replay_tree = build_replay_tree(cage, handler, 1, h["buffer_size"])
        replay = PerRunReplay(
            replay_tree,
            h["batch_size"],
            [np.random.default_rng(seeds.replay) for seeds in runs.seeds],
            learning_starts=h["learning_starts"],
            discount=h["gamma"],
        )
        sampler = FeedForwardSampler(cage, handler, replay_tree)
        eval_sampler, eval_cage = build_eval_sampler(
            make_env,
            SeededHandler(stack, n_eval, seeds=actions),
            n_seeds * n_eval,
            n_seeds * n_eval,
            seed=runs.eval_env_seeds,
        )
        sacs = [
            SAC(
                agent,
                build_sac_optimizers(h["learning_rate"]),
                EntropyCoefficient(1.0),
                seed=seeds.torch,
                tau=h["tau"],
                replay_ratio=1.0,
            )
            for agent, seeds in zip(stack.agents, runs.seeds)
        ]
        seeded = SeededSAC(sacs, stack, seeds=[s.master for s in runs.seeds])
        threshold = SeedsThreshold(eval_sampler, n_seeds, n_eval)
        runner = SeedsRunner(
            sampler,
            seeded,
            h["total_steps"],
            runs.seed_runs(lambda k: {}),
            replay=replay,
            eval_sampler=threshold,
            eval_interval_steps=h["eval_interval"],
            eval_envs_per_run=n_eval,
            log_interval_steps=h["eval_interval"],
            handle_interrupt=False,
            callbacks=[
                AttributeSchedule(
                    seeded, "random_actions", lambda step: step < h["learning_starts"]
                ),
                _StartClock(threshold),
            ],
        )
        threshold.runner = runner
        try:
            runner.run()
        finally:
            for run in runner.runs:
                if run.logger is not None:
                    run.logger.close()
            cage.close()
            eval_cage.close()
            replay_tree.close()
    results = [
        _result(reached, threshold.last, curve)
        for reached, curve in zip(threshold.reached, threshold.curves)
    ]
    return results, threshold.last[1]


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
    load_start = list(os.getloadavg())
    quick = args.quick
    h = dict(HYPER)
    n_seeds = args.seeds
    if args.quick:
        h.update(total_steps=600, eval_interval=300, eval_episodes=2)
        h.update(learning_starts=64, batch_size=64, hidden=(32, 32))
        n_seeds = 2
    # parllel's seeds: one program on the seed axis; then SB3's runs
    ours, ours_program_s = run_ours(n_seeds, h)
    for seed, run in enumerate(ours):
        print(f"seed {seed} ours {run}", file=sys.stderr, flush=True)
    sb3 = []
    for seed in range(n_seeds):
        theirs = run_sb3(seed, h)
        if theirs is not None:
            sb3.append(theirs)
            print(f"seed {seed} sb3  {theirs}", file=sys.stderr, flush=True)

    # a run that never reached -200 counts as never (inf steps)
    def to_target(runs: list[dict[str, Any]], key: str) -> list[float]:
        return [r[key] if r["reached"] else math.inf for r in runs]

    ours_steps = max(r["steps"] for r in ours) * n_seeds  # the program's env steps
    result: dict[str, Any] = {
        "ours_all_seeds_time_to_m200_s": round(ours_program_s, 2),
        "ours_steps_to_m200": finite_or_none(
            statistics.median(to_target(ours, "steps"))
        ),
        "ours_ms_per_step": round(1e3 * ours_program_s / ours_steps, 3),
        "ours_reached": [r["reached"] for r in ours],
        "ours_steps_per_seed": [r["steps"] for r in ours],
        "sb3_reached": [r["reached"] for r in sb3],
        "sb3_steps_per_seed": [r["steps"] for r in sb3],
        "seeds": n_seeds,
        "quick": quick,
        "load_average_start_end": [load_start, list(os.getloadavg())],
    }
    result.update(
        steps_to_m200_ratio=None,
        steps_to_m200_ratio_ci=[None, None],
        all_seeds_time_to_m200_ratio=None,
        ms_per_step_ratio=None,
        sb3_all_seeds_time_to_m200_s=None,
        sb3_steps_to_m200=None,
        sb3_ms_per_step=None,
    )
    if sb3:
        # every run until it reached -200 (or its full training), summed
        sb3_seconds = sum(r["seconds"] for r in sb3)
        sb3_steps = sum(r["steps"] for r in sb3)
        result["sb3_all_seeds_time_to_m200_s"] = round(sb3_seconds, 2)
        result["all_seeds_time_to_m200_ratio"] = round(ours_program_s / sb3_seconds, 3)
        result["sb3_steps_to_m200"] = finite_or_none(
            statistics.median(to_target(sb3, "steps"))
        )
        result["sb3_ms_per_step"] = round(1e3 * sb3_seconds / sb3_steps, 3)
        result["ms_per_step_ratio"] = round(
            result["ours_ms_per_step"] / result["sb3_ms_per_step"], 3
        )
        ratio, low, high = median_ratio_interval(
            to_target(ours, "steps"), to_target(sb3, "steps")
        )
        result["steps_to_m200_ratio"] = finite_or_none(ratio)
        result["steps_to_m200_ratio_ci"] = [finite_or_none(low), finite_or_none(high)]
        print(
            f"steps_to_m200_ratio: {ratio:.3f} [{low:.3f}, {high:.3f}]: "
            f"{verdict(low, high)}"
        )
        print(
            f"all seeds to -200, ours (one program) / sb3 (summed runs): "
            f"{ours_program_s:.1f} / {sb3_seconds:.1f} s"
        )
    print_result(result)


if __name__ == "__main__":
    main()
