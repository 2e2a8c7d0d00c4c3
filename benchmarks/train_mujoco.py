"""Wall clock of PPO and SAC on HalfCheetah: parllel vs Stable-Baselines3, same work.

**PPO** with CleanRL's MuJoCo settings on both sides: 8 envs x 256 steps
(2048 samples per update), 10 epochs of 32 minibatches, Adam (eps 1e-5)
with learning rate 3e-4 decaying linearly to 0, gamma 0.99, GAE lambda 0.95,
clip range 0.2 for the ratio and the value, value term 0.25 x MSE, gradient
norm 0.5, advantages standardized per minibatch, observation and reward
normalization clipped at 10 (SB3: ``VecNormalize``), separate 64x64 tanh
networks with orthogonal initialization, log-std 0. Contenders: ``ours``
(parllel, sampling and learning take turns, ``--parallel`` cages), ``sb3``
(``DummyVecEnv`` or ``SubprocVecEnv``: ``--sb3-vec auto`` times both on
random actions first and takes the faster) and ``ours_async`` (parllel with
a ``BackgroundSampler``, max_lag 1: the next batch is collected while PPO
trains on this one). ``--repeats`` runs each over ``--steps`` env steps
(100k), interleaved (ours, sb3, ours_async, ours, ...) so they see the same
load; repeat ``i`` uses seed ``i``. Per run: wall time per env step of the
training call (``runner.run()`` / ``model.learn()``) and its phases, sampling
and update (parllel: the runner's phase timings; SB3: ``collect_rollouts``
and ``train``).

**SAC** on both sides with CleanRL's settings (one env, one update per step,
batch 256, replay 1M, gamma 0.99, tau 0.005, learning rate 3e-4 for the actor
and 1e-3 for critics and temperature, alpha learned from 1, 5,000 random
steps first, 256x256 ReLU networks, log-std clipped to [-20, 2] as SB3's)
for ``--sac-steps`` (50k) on ``--sac-seeds`` seeds (2) each: wall time per
step and the final return (mean of the last ``--last-episodes`` training
episodes, raw rewards).

Both sides use torch's default Adam (``--fused-adam``: fused on both; the
parllel examples use fused), torch on one thread. Ratios are parllel over
SB3 (median over runs, 95% bootstrap interval over the runs). Last line: one
JSON object with ``ppo_wall_ratio`` and ``sac_wall_ratio`` among others.
Usage: python benchmarks/train_mujoco.py [--quick] [--steps N] [--repeats N]
       [--sac-steps N] [--sac-seeds N] [--sb3-vec auto|dummy|subproc]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402
from _mujoco_sb3 import Timed, run_ppo, run_sac, vec_step_seconds  # noqa: E402
from _stats import finite_or_none, median_ratio_interval, verdict  # noqa: E402
from _training import training_sampler  # noqa: E402

from parllel.cages import (
    CageOptions,
    EnvSpaces,  # noqa: E402
    build_cages,
)
from parllel.patterns import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_normalization,
    build_replay_tree,
    build_sample_tree,
)
from parllel.replays import UniformReplay  # noqa: E402
from parllel.runners import Callback, OffPolicyRunner, OnPolicyRunner  # noqa: E402
from parllel.runners.off_policy import AttributeSchedule  # noqa: E402
from parllel.runtime import Seeds, seed_everything  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import ActorCriticAgent, build_sac_agent  # noqa: E402
from parllel.torch.algos import (  # noqa: E402
    PPO,
    SAC,
    ActorCriticEvaluator,
    EntropyCoefficient,
    linear_schedule,
)
from parllel.torch.models import build_actor_critic  # noqa: E402
from parllel.transforms import Compose  # noqa: E402

PPO_HP: dict[str, Any] = dict(
    env_id="HalfCheetah-v4",
    n_envs=8,
    n_steps=256,
    minibatches=32,
    epochs=10,
    gamma=0.99,
    gae_lambda=0.95,
    learning_rate=3e-4,
    clip_range=0.2,
    clip=10.0,
    total_steps=100_000,
    episode_steps=None,
)
SAC_HP: dict[str, Any] = dict(
    env_id="HalfCheetah-v4",
    total_steps=50_000,
    replay_size=1_000_000,
    batch_size=256,
    learning_starts=5_000,
    gamma=0.99,
    tau=0.005,
    policy_lr=3e-4,
    q_lr=1e-3,
    episode_steps=None,
)


def make_env(env_id: str, episode_steps: int | None, clip_actions: bool) -> gym.Env:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        env = gym.make(env_id, max_episode_steps=episode_steps)
    return gym.wrappers.ClipAction(env) if clip_actions else env


class _Record(Callback):
    """Adds the runner's sample/update seconds and the episodes' returns to ``timed``."""

    def __init__(self, timed: Timed) -> None:
        self.timed = timed

    def on_collect_end(self, runner: Any, batch: Any, traj_infos: list) -> None:
        self.timed.returns.extend(float(t.return_) for t in traj_infos)

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        seconds = runner.phase_times.take()["seconds"]  # no logger reads them
        for phase in ("sample", "update"):
            self.timed.add(phase, seconds.get(phase, 0.0))


def _timed_run(runner: Any, timed: Timed) -> Timed:
    start = time.perf_counter()
    runner.run()
    timed.seconds = time.perf_counter() - start
    timed.steps = int(runner.env_steps)
    return timed


# -- parllel PPO ---------------------------------------------------------------


def build_ppo_model(spaces: Any) -> tuple[Any, Any]:
    return build_actor_critic(
        spaces.observation,
        spaces.action,
        hidden_sizes=(64, 64),
        shared_trunk=False,
        init_log_std=0.0,
        orthogonal_init=True,
    )


def build_ppo_sampler(
    hp: dict, seed: int, parallel: str, agent: Any = None, weights: Any = None
) -> FeedForwardSampler:
    """The training sampler: ``agent``'s, or (in a background process) one
    whose new agent follows the learner's ``weights``."""
    torch.set_num_threads(1)
    factory = functools.partial(make_env, hp["env_id"], hp["episode_steps"], True)
    cage = build_cages(
        factory, hp["n_envs"], parallel=parallel, options=CageOptions(seed=seed)
    )
    if agent is None:
        agent = ActorCriticAgent(*build_ppo_model(cage.spaces))
    handler = TorchHandler(agent, n_envs=cage.n_envs)
    if weights is not None:
        handler.follow_weights(weights)
    tree = build_sample_tree(cage, handler, hp["n_steps"])
    normalizer = add_obs_normalization(tree, clip=hp["clip"])
    transform = Compose(
        add_reward_normalization(tree, hp["gamma"], clip=hp["clip"])
        + add_advantage_estimation(tree, hp["gamma"], hp["gae_lambda"])
    )
    return FeedForwardSampler(
        cage, handler, tree, transform=transform, observation_normalizer=normalizer
    )


def run_ours_ppo(
    hp: dict, seed: int, parallel: str, fused_adam: bool, max_lag: int | None
) -> Timed:
    """One PPO run; with ``max_lag`` the sampler runs in a background process."""
    seed_everything(Seeds.from_master(seed, n_envs=hp["n_envs"]))
    probe = make_env(hp["env_id"], None, True)
    model, distribution = build_ppo_model(
        EnvSpaces(probe.observation_space, probe.action_space)
    )
    probe.close()
    agent = ActorCriticAgent(model, distribution)
    args = (hp, seed, parallel)
    with training_sampler(build_ppo_sampler, args, agent, hp["n_envs"], max_lag) as (
        sampler,
        publisher,
    ):
        optimizer = torch.optim.Adam(
            model.parameters(), lr=hp["learning_rate"], eps=1e-5, fused=fused_adam
        )
        ppo = PPO(
            ActorCriticEvaluator(model, distribution),
            optimizer,
            learning_rate=linear_schedule(hp["learning_rate"], 0.0),
            clip_range=hp["clip_range"],
            value_clip_range=hp["clip_range"],
            value_loss_coef=0.5,  # x parllel's 0.5 x MSE
            max_grad_norm=0.5,
            epochs=hp["epochs"],
            minibatches=hp["minibatches"],
            normalize_advantage=True,
        )
        timed = Timed()
        runner = OnPolicyRunner(
            sampler, ppo, hp["total_steps"], callbacks=[_Record(timed)],
            publisher=publisher,
        )  # fmt: skip
        return _timed_run(runner, timed)


# -- parllel SAC ---------------------------------------------------------------


def run_ours_sac(hp: dict, seed: int, fused_adam: bool) -> Timed:
    """One SAC run as ``examples/mujoco/train_sac.py`` (log-std bounds as SB3's)."""
    seeds = Seeds.from_master(seed, n_envs=1)
    seed_everything(seeds)
    factory = functools.partial(make_env, hp["env_id"], hp["episode_steps"], False)
    cage = build_cages(
        factory, 1, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = build_sac_agent(cage.spaces.observation, cage.spaces.action)
    handler = TorchHandler(agent, n_envs=1, seed=seeds.actions)
    tree = build_replay_tree(
        cage, handler, 1, hp["replay_size"], observation_dtype=np.float32
    )
    replay = UniformReplay(
        tree, hp["batch_size"], np.random.default_rng(seeds.replay),
        learning_starts=hp["learning_starts"], discount=hp["gamma"],
    )  # fmt: skip
    alpha = EntropyCoefficient(1.0)
    optimizer = torch.optim.Adam(
        [
            {"params": agent.actor.parameters(), "lr": hp["policy_lr"]},
            {"params": agent.critic.parameters()},
            {"params": [alpha.log_alpha]},
        ],
        lr=hp["q_lr"],
        fused=fused_adam,
    )
    sac = SAC(agent, optimizer, alpha, tau=hp["tau"], replay_ratio=1.0)
    timed = Timed()
    warmup = AttributeSchedule(
        agent, "random_actions", lambda step: step < hp["learning_starts"]
    )
    runner = OffPolicyRunner(
        FeedForwardSampler(cage, handler, tree), replay, sac, hp["total_steps"],
        callbacks=[warmup, _Record(timed)],
    )  # fmt: skip
    try:
        return _timed_run(runner, timed)
    finally:
        cage.close()
        tree.close()


# -- summary ---------------------------------------------------------------------


def summarize(name: str, runs: list[Timed], last: int) -> dict[str, Any]:
    """Medians over runs: microseconds per env step (total and per phase), return."""
    us = [1e6 * r.seconds / r.steps for r in runs]
    out: dict[str, Any] = {
        f"{name}_us_per_step": round(statistics.median(us), 1),
        f"{name}_us_per_step_runs": [round(u, 1) for u in us],
    }
    for phase in ("sample", "update"):
        values = [1e6 * r.phases.get(phase, 0.0) / r.steps for r in runs]
        out[f"{name}_{phase}_us_per_step"] = round(statistics.median(values), 1)
    returns = [float(np.mean(r.returns[-last:])) if r.returns else np.nan for r in runs]
    out[f"{name}_final_return_runs"] = [finite_or_none(x, 1) for x in returns]
    out[f"{name}_final_return_mean"] = finite_or_none(float(np.mean(returns)), 1)
    out[f"_{name}_us"] = us
    return out


def compare(result: dict[str, Any], ours: str, theirs: str, key: str) -> None:
    """``key`` = median ratio of ``ours``' wall time per step to ``theirs``'."""
    ratio, low, high = median_ratio_interval(
        result[f"_{ours}_us"], result[f"_{theirs}_us"]
    )
    result[key] = finite_or_none(ratio)
    result[f"{key}_ci"] = [finite_or_none(low), finite_or_none(high)]
    print(f"{key} ({ours} / {theirs}): {ratio:.3f} [{low:.3f}, {high:.3f}]: "
          f"{verdict(low, high)}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--steps", type=int, default=100_000, help="PPO env steps")
    parser.add_argument("--repeats", type=int, default=3, help="PPO runs each")
    parser.add_argument("--sac-steps", type=int, default=50_000)
    parser.add_argument("--sac-seeds", type=int, default=2)
    parser.add_argument("--last-episodes", type=int, default=10)
    parser.add_argument("--parallel", default="serial", choices=["serial", "process"])
    parser.add_argument(
        "--sb3-vec", default="auto", choices=["auto", "dummy", "subproc"]
    )
    parser.add_argument("--max-lag", type=int, default=1)
    parser.add_argument(
        "--fused-adam", action="store_true", help="fused Adam, both sides"
    )
    args = parser.parse_args()
    pin_threads()
    load_start = list(os.getloadavg())
    ppo_hp, sac_hp = dict(PPO_HP, total_steps=args.steps), dict(SAC_HP)
    sac_hp["total_steps"] = args.sac_steps
    vec_steps = 200
    if args.quick:
        ppo_hp.update(n_envs=2, total_steps=256, n_steps=32, minibatches=4,
                      epochs=2, episode_steps=64)  # fmt: skip
        sac_hp.update(total_steps=300, learning_starts=100, batch_size=64,
                      replay_size=10_000, episode_steps=64)  # fmt: skip
        args.repeats, args.sac_seeds, vec_steps = 1, 1, 5
    result: dict[str, Any] = {
        "ppo_hyperparameters": ppo_hp, "sac_hyperparameters": sac_hp,
        "parallel": args.parallel, "fused_adam": args.fused_adam,
        "repeats": args.repeats, "sac_seeds": args.sac_seeds, "max_lag": args.max_lag,
    }  # fmt: skip
    vec = args.sb3_vec
    if vec == "auto":
        step_ms = {
            v: 1e3 * vec_step_seconds(ppo_hp["env_id"], ppo_hp["n_envs"], vec_steps, v)
            for v in ("dummy", "subproc")
        }
        result["sb3_vec_step_ms"] = {k: round(v, 3) for k, v in step_ms.items()}
        vec = min(step_ms, key=step_ms.__getitem__)
    result["sb3_vec"] = vec
    print(f"SB3 vector env: {vec}", flush=True)

    contenders = {
        "ours_ppo": lambda s: run_ours_ppo(
            ppo_hp, s, args.parallel, args.fused_adam, None
        ),
        "sb3_ppo": lambda s: run_ppo(ppo_hp, s, vec, args.fused_adam),
        "ours_async_ppo": lambda s: run_ours_ppo(
            ppo_hp, s, args.parallel, args.fused_adam, args.max_lag
        ),
    }
    runs: dict[str, list[Timed]] = {name: [] for name in contenders}
    for seed in range(args.repeats):
        for name, run in contenders.items():
            runs[name].append(run(seed))
            t = runs[name][-1]
            print(f"{name} seed {seed}: {1e6 * t.seconds / t.steps:.1f} us/step "
                  f"({t.steps} steps, {t.seconds:.1f} s)", flush=True)  # fmt: skip
    sac_contenders = {
        "ours_sac": lambda s: run_ours_sac(sac_hp, s, args.fused_adam),
        "sb3_sac": lambda s: run_sac(sac_hp, s, args.fused_adam),
    }
    runs.update({name: [] for name in sac_contenders})
    for seed in range(args.sac_seeds):
        for name, run in sac_contenders.items():
            runs[name].append(run(seed))
            t = runs[name][-1]
            print(f"{name} seed {seed}: {1e6 * t.seconds / t.steps:.1f} us/step, "
                  f"return {np.mean(t.returns[-args.last_episodes:]) if t.returns else None}",
                  flush=True)  # fmt: skip
    for name, timed in runs.items():
        result.update(summarize(name, timed, args.last_episodes))
    compare(result, "ours_ppo", "sb3_ppo", "ppo_wall_ratio")
    compare(result, "ours_async_ppo", "sb3_ppo", "ppo_async_wall_ratio")
    compare(result, "ours_async_ppo", "ours_ppo", "ppo_async_vs_sync")
    compare(result, "ours_sac", "sb3_sac", "sac_wall_ratio")
    for key in [k for k in result if k.startswith("_")]:
        del result[key]
    result["load_average_start_end"] = [load_start, list(os.getloadavg())]
    print_result(result)


if __name__ == "__main__":
    main()
