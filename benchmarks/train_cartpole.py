"""Steps and wall time to solve CartPole-v1: parllel PPO vs Stable-Baselines3 PPO, over many seeds.

Contenders with the same hyperparameters: ``ours`` (parllel: all seeds
trained as **one program** on the seed axis, docs/seeds.md: the JAX PPO,
one cage of every seed's envs, one vmapped update of every seed), ``sb3``
(one run per seed, as its users run seeds); ``--async`` adds ``ours_async``
(parllel's torch PPO, one run per seed, with a background sampler,
``--max-lag`` 1: the next batch is collected while PPO trains on this one).

Both sides: 8 envs, 32 steps per env per batch (256 samples), one minibatch
of 256, 20 epochs, gamma 0.98, GAE lambda 0.8, learning rate 1e-3 and clip
range 0.2 both decaying linearly to 0 over 100k steps, advantages normalized
(sample std), value loss coefficient 0.5 on the MSE, gradient norm clipped at
0.5, no entropy bonus, separate 64x64 tanh policy and value networks
initialized like SB3's (orthogonal, gains sqrt(2) / 0.01 / 1), Adam with eps
1e-5 (SB3's default for PPO; ``--fused-adam`` switches SB3 and
``ours_async`` to torch's fused Adam), torch pinned to one thread. Seeds 0
.. ``--seeds`` - 1 (20 by default): ours' program first, then SB3's (and
``ours_async``'s) runs, interleaved per seed.

Evaluation: after every update that crosses a multiple of 5,000 env steps
(the same batch boundaries, 5,120, 10,240, ... on both sides), 10
deterministic episodes on 10 separate envs (one episode each). A run stops at
the first evaluation with a mean return >= 475 (``--full``: trains all 100k
steps) or at 100k steps; one that never got there counts as ``inf`` steps.
Per run: **steps to 475** (the env steps of that evaluation) and **wall time
per 100k steps** (training wall clock, evaluations excluded, over the env
steps trained until then; for a seed of ours its share, ``1 / K``, of the
program's wall clock).

The seed axis trains every seed in one program, so a seed cannot stop
alone: the program runs until every seed solved (or 100k steps), each seed's
steps to 475 are those of its own first solving evaluation (evaluated
every 5,000 steps, as a separate run would be), and its wall time is the
program's. What is fair to compare is the wall time of the whole
experiment: ``ours_all_seeds_wall_s`` (the program's training seconds,
evaluations excluded, until its last seed solved) against
``sb3_all_seeds_wall_s`` (the sum of SB3's runs' training seconds, each
until it solved), their ratio ``all_seeds_wall_ratio``; and the wall time
per env step over all seeds (``wall_per_step_ratio``: ours' program seconds
per env step of all its seeds over SB3's summed seconds per summed step; one
program has no per-seed spread, so no interval). Steps to 475 stay per seed.
Ours' clock includes JAX's compilation of the vmapped policy step and update
(once per program, seconds on a CPU): the cost its user waits for too.

Per contender the median over seeds; against SB3 the ratio of medians with a
95% percentile-bootstrap interval (seeds resampled per contender). "Fewer
steps" or "faster" is claimed only where the interval excludes 1.

Last line: one JSON object with ``steps_to_475_median_ratio``,
``steps_to_475_ratio_ci`` ([low, high]), ``all_seeds_wall_ratio``,
``wall_per_step_ratio``, ``seeds``, the medians and per-seed figures of
each contender and, with ``--async``, ``async_steps_to_475_median_ratio``
and ``async_wall_per_step_ratio`` (with intervals: per-seed runs) for
``ours_async``.
Usage: python benchmarks/train_cartpole.py [--quick] [--seeds N] [--async]
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
from _training import training_sampler  # noqa: E402

from parllel.builders import (
    add_advantage_estimation,
    build_eval_sampler,
    build_sample_tree,
)
from parllel.cages import (
    CageOptions,
    EnvSpaces,  # noqa: E402
    build_cage,
)
from parllel.runners import Callback, OnPolicyRunner  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402
from parllel.schedules import linear_schedule  # noqa: E402
from parllel.seeding import Seeds, seed_everything  # noqa: E402
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import ActorCriticAgent  # noqa: E402
from parllel.torch.algos import PPO, ActorCriticEvaluator  # noqa: E402
from parllel.torch.models import build_actor_critic  # noqa: E402
from parllel.transforms import Compose  # noqa: E402

ENV_ID = "CartPole-v1"
SOLVED = 475.0
MAX_EPISODE_STEPS = 500  # CartPole-v1's time limit
HYPERPARAMETERS = dict(
    n_envs=8,
    n_steps=32,
    batch_size=256,
    epochs=20,
    gamma=0.98,
    gae_lambda=0.8,
    learning_rate=1e-3,
    clip_range=0.2,
    total_steps=100_000,
    eval_interval=5_000,
    eval_episodes=10,
)


def make_env() -> gym.Env:
    return gym.make(ENV_ID)


class Curve:
    """Evaluation points ``(env_steps, train_seconds, mean_return)`` of one run."""

    def __init__(self) -> None:
        self.points: list[tuple[int, float, float]] = []
        self.start = time.perf_counter()
        self.eval_seconds = 0.0

    def train_seconds(self) -> float:
        return time.perf_counter() - self.start - self.eval_seconds

    def first_solved(self) -> tuple[int, float] | tuple[None, float]:
        for steps, seconds, mean_return in self.points:
            if mean_return >= SOLVED:
                return steps, seconds
        return None, math.inf

    def solved(self) -> bool:
        return bool(self.points) and self.points[-1][2] >= SOLVED

    def seconds_per_100k(self) -> float:
        """Training seconds per 100k env steps, up to the solving evaluation
        (or the last one)."""
        steps, seconds = self.first_solved()
        if steps is None:
            steps, seconds = self.points[-1][0], self.points[-1][1]
        return seconds / steps * 100_000


# -- parllel -----------------------------------------------------------------


class _StartClock(Callback):
    def __init__(self, curve: Curve) -> None:
        self.curve = curve

    def on_train_start(self, runner: Any) -> None:
        self.curve.start = time.perf_counter()


class _TimedEvalSampler:
    """Wraps an EvalSampler: its time is excluded, its result recorded; with
    ``stop_when_solved`` the run stops at the first solving evaluation."""

    def __init__(
        self, sampler: Any, curve: Curve, runner_ref: list, stop_when_solved: bool
    ) -> None:
        self.sampler, self.curve, self.runner_ref = sampler, curve, runner_ref
        self.stop_when_solved = stop_when_solved

    def collect(self) -> list:
        train_seconds = self.curve.train_seconds()
        start = time.perf_counter()
        # The first episode of every eval env (as SB3's evaluate_policy
        # counts them): EvalSampler returns episodes in the order they end,
        # so its first n would favour short ones. Every env ends its first
        # episode within MAX_EPISODE_STEPS steps.
        first: dict[int, Any] = {}
        for traj in self.sampler.collect():
            first.setdefault(traj.env_index, traj)
        trajs = list(first.values())
        mean_return = float(np.mean([t.return_ for t in trajs]))
        self.curve.points.append(
            (self.runner_ref[0].env_steps, train_seconds, mean_return)
        )
        self.curve.eval_seconds += time.perf_counter() - start
        if self.stop_when_solved and self.curve.solved():
            self.runner_ref[0].request_stop()
        return trajs


def build_model(spaces: Any) -> tuple[Any, Any]:
    """64x64 separate tanh policy and value MLPs, initialized like SB3's
    (orthogonal: gains sqrt(2) for the trunks, 0.01 and 1 for the heads)."""
    return build_actor_critic(
        spaces.observation,
        spaces.action,
        hidden_sizes=(64, 64),
        shared_trunk=False,
        orthogonal_init=True,
    )


def build_sampler(
    seed: int, hp: dict, parallel: str, agent: Any = None, weights: Any = None
) -> FeedForwardSampler:
    """The training sampler: ``agent``'s, or (in a background process) one
    whose new agent follows the learner's ``weights``."""
    torch.set_num_threads(1)
    cage = build_cage(
        make_env, hp["n_envs"], parallel=parallel, options=CageOptions(seed=seed)
    )
    if agent is None:
        agent = ActorCriticAgent(*build_model(cage.spaces))
    handler = TorchHandler(agent, n_envs=cage.n_envs)
    if weights is not None:
        handler.follow_weights(weights)
    sample_tree = build_sample_tree(cage, handler, hp["n_steps"])
    transform = Compose(
        add_advantage_estimation(
            sample_tree, hp["gamma"], hp["gae_lambda"], normalize=True
        )
    )
    return FeedForwardSampler(cage, handler, sample_tree, transform=transform)


def run_parllel(
    seed: int,
    hp: dict,
    parallel: str,
    fused_adam: bool,
    stop_when_solved: bool,
    max_lag: int | None = None,
) -> Curve:
    """One training run; with ``max_lag`` the sampler runs in a background
    process (asynchronous sampling) with that lag bound."""
    torch.manual_seed(seed)
    seeds = Seeds.from_master(seed, n_envs=hp["n_envs"])
    seed_everything(seeds)
    env = make_env()
    model, distribution = build_model(
        EnvSpaces(env.observation_space, env.action_space)
    )
    env.close()
    agent = ActorCriticAgent(model, distribution)
    args = (seed, hp, parallel)
    with training_sampler(build_sampler, args, agent, hp["n_envs"], max_lag) as (
        sampler,
        publisher,
    ):
        n_eval = hp["eval_episodes"]
        eval_sampler, eval_cage = build_eval_sampler(
            make_env,
            TorchHandler(agent, n_envs=n_eval),
            n_eval,
            n_episodes=n_eval * MAX_EPISODE_STEPS,  # never reached: max_steps ends it
            seed=seed + 1000,
            max_steps=MAX_EPISODE_STEPS,
        )
        optimizer = torch.optim.Adam(
            model.parameters(), lr=hp["learning_rate"], eps=1e-5, fused=fused_adam
        )
        batch = hp["n_envs"] * hp["n_steps"]
        ppo = PPO(
            ActorCriticEvaluator(model, distribution),
            optimizer,
            learning_rate=linear_schedule(hp["learning_rate"], 0.0),
            clip_range=linear_schedule(hp["clip_range"], 0.0),
            epochs=hp["epochs"],
            minibatches=batch // hp["batch_size"],
            # parllel's value loss is 0.5 * MSE; SB3's value term is vf_coef (0.5)
            # * MSE, so coefficient 1.0 gives the same loss
            value_loss_coef=1.0,
            # normalized over the batch above (SB3 normalizes its minibatch, here
            # the same batch of 256)
            normalize_advantage=False,
        )
        curve, runner_ref = Curve(), []
        runner = OnPolicyRunner(
            sampler,
            ppo,
            hp["total_steps"],
            eval_sampler=_TimedEvalSampler(
                eval_sampler, curve, runner_ref, stop_when_solved
            ),
            eval_interval_steps=hp["eval_interval"],
            callbacks=[_StartClock(curve)],
            publisher=publisher,
        )
        runner_ref.append(runner)
        try:
            runner.run()
        finally:
            eval_cage.close()
    return curve


# -- parllel, every seed in one program (the seed axis) ----------------------------


@dataclasses.dataclass
class _SeedsConfig:
    """What the seed axis's group directory records."""

    seeds: int
    hyperparameters: dict


class _SeedsEvalSampler:
    """Wraps the seed axis's eval sampler: each run's mean over the first
    episode of each of its eval envs goes to its curve (evaluations excluded
    from the program's clock); with ``stop_when_solved`` the program stops
    once every run has solved."""

    def __init__(
        self,
        sampler: Any,
        clock: Curve,
        curves: list[Curve],
        n_eval: int,
        runner_ref: list,
        stop_when_solved: bool,
    ) -> None:
        self.sampler, self.clock, self.curves = sampler, clock, curves
        self.n_eval, self.runner_ref = n_eval, runner_ref
        self.stop_when_solved = stop_when_solved

    def collect(self) -> list:
        train_seconds = self.clock.train_seconds()
        start = time.perf_counter()
        first: dict[int, Any] = {}
        for traj in self.sampler.collect():
            first.setdefault(traj.env_index, traj)
        steps = self.runner_ref[0].env_steps
        for run, curve in enumerate(self.curves):
            envs = range(run * self.n_eval, (run + 1) * self.n_eval)
            mean_return = float(np.mean([first[env].return_ for env in envs]))
            curve.points.append((steps, train_seconds, mean_return))
        self.clock.eval_seconds += time.perf_counter() - start
        if self.stop_when_solved and all(
            c.first_solved()[0] is not None for c in self.curves
        ):
            self.runner_ref[0].request_stop()
        return list(first.values())


def run_parllel_seeds(
    n_seeds: int, hp: dict, parallel: str, stop_when_solved: bool
) -> tuple[list[Curve], float]:
    """Seeds 0 .. n_seeds - 1 as one program (JAX PPO on the seed axis).

    Returns each seed's curve (its evaluations; as seconds its share of the
    program's training seconds, ``1 / n_seeds``) and the program's training
    seconds until its last evaluation.
    """
    from parllel.jax.agents import build_actor_critic_agent
    from parllel.jax.algos import PPO as JaxPPO
    from parllel.jax.algos import SeededPPO, adam
    from parllel.jax.seeds import SeededHandler, SeedStack
    from parllel.runners import RunSettings
    from parllel.runners.seed_runs import start_seed_runs
    from parllel.runners.seeds import SeedsRunner

    B, n_eval = hp["n_envs"], hp["eval_episodes"]
    with tempfile.TemporaryDirectory() as run_root:
        runs = start_seed_runs(
            RunSettings(run_root=run_root, console=None),
            "cartpole-ppo",
            _SeedsConfig(n_seeds, hp),
            seeds=n_seeds,
            master=0,
            n_envs=B,
            n_eval_envs=n_eval,
        )
        cage = build_cage(
            make_env,
            n_seeds * B,
            parallel=parallel,
            options=CageOptions(seed=runs.env_seeds),
        )
        stack = SeedStack(
            [
                build_actor_critic_agent(
                    cage.spaces.observation,
                    cage.spaces.action,
                    seed=seeds.torch,
                    hidden_sizes=(64, 64),
                    shared_trunk=False,
                    orthogonal_init=True,
                )
                for seeds in runs.seeds
            ]
        )
        actions = [seeds.actions for seeds in runs.seeds]
        handler = SeededHandler(stack, B, seeds=actions)
        sample_tree = build_sample_tree(cage, handler, hp["n_steps"])
        transform = Compose(  # GAE per column; advantages normalized in the update
            add_advantage_estimation(sample_tree, hp["gamma"], hp["gae_lambda"])
        )
        sampler = FeedForwardSampler(cage, handler, sample_tree, transform=transform)
        eval_sampler, eval_cage = build_eval_sampler(
            make_env,
            SeededHandler(stack, n_eval, seeds=actions),
            n_seeds * n_eval,
            n_episodes=n_seeds * n_eval * MAX_EPISODE_STEPS,  # max_steps ends it
            seed=runs.eval_env_seeds,
            max_steps=MAX_EPISODE_STEPS,
        )
        batch = B * hp["n_steps"]
        ppos = [
            JaxPPO(
                agent,
                adam(hp["learning_rate"], eps=1e-5),
                learning_rate=linear_schedule(hp["learning_rate"], 0.0),
                clip_range=linear_schedule(hp["clip_range"], 0.0),
                epochs=hp["epochs"],
                minibatches=batch // hp["batch_size"],
                value_loss_coef=1.0,  # SB3's vf_coef 0.5 on the MSE, as ``ours``
                normalize_advantage=True,  # per minibatch (one here), per seed
                seed=seeds.torch,
            )
            for agent, seeds in zip(stack.agents, runs.seeds)
        ]
        seeded = SeededPPO(
            ppos, stack, envs_per_run=B, seeds=[s.master for s in runs.seeds]
        )
        clock, curves, runner_ref = Curve(), [Curve() for _ in runs.seeds], []
        runner = SeedsRunner(
            sampler,
            seeded,
            hp["total_steps"],
            runs.seed_runs(lambda k: {}),
            eval_sampler=_SeedsEvalSampler(
                eval_sampler, clock, curves, n_eval, runner_ref, stop_when_solved
            ),
            eval_interval_steps=hp["eval_interval"],
            eval_envs_per_run=n_eval,
            log_interval_steps=hp["eval_interval"],
            handle_interrupt=False,
            callbacks=[_StartClock(clock)],
        )
        runner_ref.append(runner)
        try:
            runner.run()
        finally:
            for run in runner.runs:
                if run.logger is not None:
                    run.logger.close()
            cage.close()
            eval_cage.close()
            sample_tree.close()
    program_seconds = curves[0].points[-1][1]
    for curve in curves:  # each seed's share of the program's time
        curve.points = [(n, t / n_seeds, r) for n, t, r in curve.points]
    return curves, program_seconds


# -- Stable-Baselines3 -----------------------------------------------------------


def run_sb3(seed: int, hp: dict, fused_adam: bool, stop_when_solved: bool) -> Curve:
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    n_eval = hp["eval_episodes"]
    eval_env = make_vec_env(ENV_ID, n_envs=n_eval, seed=seed + 1000)
    curve = Curve()

    class EvalEveryInterval(BaseCallback):
        """Evaluates between updates, at the batch boundaries parllel uses."""

        def __init__(self) -> None:
            super().__init__()
            self.next_eval = hp["eval_interval"]

        def _evaluate(self) -> None:
            train_seconds = curve.train_seconds()
            start = time.perf_counter()
            mean_return, _ = evaluate_policy(
                self.model, eval_env, n_eval_episodes=n_eval, deterministic=True
            )
            curve.points.append((self.num_timesteps, train_seconds, float(mean_return)))
            curve.eval_seconds += time.perf_counter() - start

        def _on_training_start(self) -> None:
            curve.start = time.perf_counter()

        def _on_rollout_start(self) -> None:  # after the previous update
            if self.num_timesteps >= self.next_eval:
                interval = hp["eval_interval"]
                self.next_eval = (self.num_timesteps // interval + 1) * interval
                self._evaluate()

        def _on_step(self) -> bool:
            return not (stop_when_solved and curve.solved())

        def _on_training_end(self) -> None:
            if not curve.points or curve.points[-1][0] != self.num_timesteps:
                if not curve.solved():
                    self._evaluate()

    env = make_vec_env(ENV_ID, n_envs=hp["n_envs"], seed=seed)
    lr, clip = hp["learning_rate"], hp["clip_range"]
    model = SB3PPO(
        "MlpPolicy",
        env,
        n_steps=hp["n_steps"],
        batch_size=hp["batch_size"],
        n_epochs=hp["epochs"],
        gamma=hp["gamma"],
        gae_lambda=hp["gae_lambda"],
        learning_rate=lambda remaining: lr * remaining,
        clip_range=lambda remaining: clip * remaining,
        ent_coef=0.0,
        policy_kwargs=dict(optimizer_kwargs=dict(eps=1e-5, fused=fused_adam)),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.learn(hp["total_steps"], callback=EvalEveryInterval())
    env.close()
    eval_env.close()
    return curve


# -- summary ---------------------------------------------------------------------


def summarize(name: str, curves: list[Curve]) -> dict[str, Any]:
    """Medians and per-seed figures of one contender."""
    steps = [
        math.inf if c.first_solved()[0] is None else c.first_solved()[0] for c in curves
    ]
    per_100k = [c.seconds_per_100k() for c in curves]
    return {
        f"{name}_steps_to_475_median": finite_or_none(statistics.median(steps)),
        f"{name}_seconds_per_100k_median": finite_or_none(statistics.median(per_100k)),
        f"{name}_unsolved": sum(math.isinf(s) for s in steps),
        f"{name}_per_seed": [
            {
                "steps_to_475": finite_or_none(s),
                "seconds_per_100k": finite_or_none(w),
                "curve": [(n, round(t, 3), round(r, 1)) for n, t, r in c.points],
            }
            for s, w, c in zip(steps, per_100k, curves)
        ],
        f"_{name}_steps": steps,
        f"_{name}_per_100k": per_100k,
    }


def compare(result: dict[str, Any], name: str, prefix: str) -> None:
    """Ratios of ``name``'s medians to SB3's with their bootstrap intervals."""
    for key, figure in (("steps_to_475", "steps"), ("wall_per_step", "per_100k")):
        ratio, low, high = median_ratio_interval(
            result[f"_{name}_{figure}"], result[f"_sb3_{figure}"]
        )
        label = f"{prefix}{key}"
        result[
            f"{label}_median_ratio" if key == "steps_to_475" else f"{label}_ratio"
        ] = finite_or_none(ratio)
        result[f"{label}_ratio_ci"] = [finite_or_none(low), finite_or_none(high)]
        print(
            f"{name} / sb3 {key}: {ratio:.3f} [{low:.3f}, {high:.3f}]: "
            f"{verdict(low, high)}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--parallel", default="serial", choices=["serial", "process"])
    parser.add_argument(
        "--async", dest="with_async", action="store_true", help="add ours_async"
    )
    parser.add_argument(
        "--max-lag", type=int, default=1, help="policy lag bound of ours_async"
    )
    parser.add_argument(
        "--full", action="store_true", help="train all 100k steps, solved or not"
    )
    parser.add_argument(
        "--fused-adam", action="store_true", help="torch's fused Adam, both sides"
    )
    args = parser.parse_args()
    pin_threads()
    load_start = list(os.getloadavg())
    hp = dict(HYPERPARAMETERS)
    if args.quick:
        hp.update(total_steps=1024, eval_interval=512, eval_episodes=2, epochs=2)
        args.seeds, args.with_async = 2, True
    stop = not args.full
    result: dict[str, Any] = {
        "hyperparameters": hp,
        "parallel": args.parallel,
        "fused_adam": args.fused_adam,
        "seeds": args.seeds,
        "stop_when_solved": stop,
    }
    # parllel's seeds: one program on the seed axis, before SB3's runs
    ours, ours_program_s = run_parllel_seeds(args.seeds, hp, args.parallel, stop)
    for seed, curve in enumerate(ours):
        print(f"ours seed {seed}: steps to 475 {curve.first_solved()[0]}", flush=True)
    contenders = {"sb3": lambda seed: run_sb3(seed, hp, args.fused_adam, stop)}
    if args.with_async:
        contenders["ours_async"] = lambda seed: run_parllel(
            seed, hp, args.parallel, args.fused_adam, stop, max_lag=args.max_lag
        )
        result["max_lag"] = args.max_lag
    curves: dict[str, list[Curve]] = {"ours": ours, **{name: [] for name in contenders}}
    for seed in range(args.seeds):
        for name, run in contenders.items():
            curve = run(seed)
            curves[name].append(curve)
            steps, _ = curve.first_solved()
            print(
                f"{name} seed {seed}: steps to 475 {steps}, "
                f"{curve.seconds_per_100k():.1f} s per 100k steps",
                flush=True,
            )
    for name, runs in curves.items():
        result.update(summarize(name, runs))
    compare(result, "ours", "")
    sb3_seconds = sum(
        c.first_solved()[1] if c.first_solved()[0] is not None else c.points[-1][1]
        for c in curves["sb3"]
    )
    result["ours_all_seeds_wall_s"] = round(ours_program_s, 2)
    result["sb3_all_seeds_wall_s"] = round(sb3_seconds, 2)
    result["all_seeds_wall_ratio"] = finite_or_none(ours_program_s / sb3_seconds)
    print(
        f"all seeds' training wall, ours (one program) / sb3 (summed runs): "
        f"{ours_program_s:.1f} / {sb3_seconds:.1f} s",
        flush=True,
    )
    if args.with_async:
        compare(result, "ours_async", "async_")
    for key in [k for k in result if k.startswith("_")]:
        del result[key]
    result["load_average_start_end"] = [load_start, list(os.getloadavg())]
    print_result(result)


if __name__ == "__main__":
    main()
