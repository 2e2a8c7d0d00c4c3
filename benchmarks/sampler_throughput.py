"""Full ``collect_batch()`` steps/s: parllel samplers vs hand-written gymnasium loops.

CartPole-v1, 64 envs, T = 128, a 2x64 MLP actor-critic on CPU (torch pinned to
one thread); every contender does the same work per batch: policy inference
(sampled action, log-prob, value) for every step, env stepping, storing into
preallocated ``[T, B]`` buffers, the bootstrap value and GAE. Contenders:

- ``ff_serial``: FeedForwardSampler + SerialCage;
- ``ff_process``: FeedForwardSampler + ProcessCage (best of a few layouts:
  the main process steps a share of the envs and one worker the rest, fixed
  or load-balanced, or two workers);
- ``alternating_process``: AlternatingSampler + two ProcessCages (one worker
  each; best of: separate cores, both workers sharing one core while the
  main process infers, and the same with the main process pinned to the
  other core, see ``parllel.builders.build_alternating_cages``);
- ``gym_sync`` / ``gym_async``: the CleanRL-style loop over a gymnasium
  ``SyncVectorEnv`` / ``AsyncVectorEnv`` filling preallocated torch buffers,
  GAE in a reverse loop as in CleanRL's ``ppo.py``.

Alternating sampling pays only when inference costs about as much as env
stepping: the second part uses the ``cpu200us`` synthetic env (8 envs) and a
policy whose per-sample cost is calibrated so that inference for all 8 envs
takes about as long as stepping them serially (recalibrated before every
repeat; the medians of both times are reported), and compares
AlternatingSampler with the best FeedForwardSampler process layout.

Last line: one JSON object with ``cartpole_{contender}_sps``,
``cartpole_best_vs_best_gym_loop``, ``cpu200us_*`` figures and
``alternating_vs_feedforward``. Usage: python benchmarks/sampler_throughput.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import make_cartpole, pin_threads, print_result  # noqa: E402
from synthetic_envs import CpuBoundEnv, busy_iterations  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.agents import AgentStep  # noqa: E402
from parllel.builders import build_alternating_cages  # noqa: E402
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage  # noqa: E402
from parllel.samplers import (  # noqa: E402
    AlternatingSampler,
    FeedForwardSampler,
    sample_tree_from_examples,
)
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import ActorCriticAgent  # noqa: E402
from parllel.torch.distributions import Categorical  # noqa: E402
from parllel.torch.distributions.base import DistParams  # noqa: E402
from parllel.torch.models import build_actor_critic  # noqa: E402
from parllel.transforms import EstimateAdvantage  # noqa: E402

GAMMA, LAMBDA = 0.99, 0.95


def cartpole_agent() -> ActorCriticAgent:
    torch.manual_seed(0)
    space = make_cartpole()
    return ActorCriticAgent(
        *build_actor_critic(space.observation_space, space.action_space)
    )


# -- parllel contenders ---------------------------------------------------------
def run_sampler(make_cages, make_agent, sampler_type, T, B, batches) -> float:
    """Steps/s of ``collect_batch()`` after one untimed warm-up batch."""
    cages = make_cages()
    try:
        handler = TorchHandler(make_agent(), B)
        example = handler.example_outputs(cages[0].example[fields.OBSERVATION])
        with sample_tree_from_examples(cages[0].example, example, T, B) as tree:
            gae = EstimateAdvantage(tree, GAMMA, LAMBDA)
            sampler = sampler_type(cages, handler, tree, transform=gae)
            sampler.collect_batch()
            start = time.perf_counter()
            for _ in range(batches):
                sampler.collect_batch()
            elapsed = time.perf_counter() - start
    finally:
        for cage in cages:
            cage.close()
    return batches * T * B / elapsed


def run_alternating(factory, kwargs, make_agent, T, B, batches, layout) -> float:
    """Steps/s of AlternatingSampler on :func:`build_alternating_cages` halves."""
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        return run_sampler(
            lambda: build_alternating_cages(factory, B, kwargs, options=CageOptions(seed=0), **layout),
            make_agent, AlternatingSampler, T, B, batches,
        )  # fmt: skip
    finally:
        if affinity is not None:  # undo pin_main_process for the next contender
            os.sched_setaffinity(0, affinity)


# Layouts tried per contender; the best median is reported (with its name).
FF_LAYOUTS = {
    "main+1worker": lambda B: {
        "layout": ProcessLayout(main_process_envs=B // 2, n_workers=1)
    },
    # the main process also runs inference, so give the worker more envs
    "main3/8+1worker": lambda B: {
        "layout": ProcessLayout(main_process_envs=(3 * B) // 8, n_workers=1)
    },
    "2workers": lambda B: {"layout": ProcessLayout(envs_per_worker=B // 2)},
    # envs move to whichever process finishes its share sooner (inference
    # and stepping share the main process's core)
    "main+1worker+rebalance": lambda B: {
        "layout": ProcessLayout(main_process_envs=B // 2, n_workers=1, rebalance=True)
    },
}
ALTERNATING_LAYOUTS = {
    # one worker per half, cage defaults: two workers + the main process
    # exceed 2 cores, so idle workers block at once
    "separate": {"share_core": False},
    # both workers on the last core, polling; only one steps at a time
    "shared_core": {"share_core": True},
    # ... and the main process (inference) pinned to the other core
    "shared_core_pinned_main": {"share_core": True, "pin_main_process": True},
}


def contenders(
    factory, kwargs, make_agent, T, B, batches, serial: bool, quick: bool = False
) -> dict:
    """Name -> zero-argument callable returning steps/s for one env setting.

    ``quick``: one layout of each kind (the tests' smoke run).
    """
    runs = {}
    ff_layouts, alternating_layouts = FF_LAYOUTS, ALTERNATING_LAYOUTS
    if quick:
        ff_layouts = dict(list(FF_LAYOUTS.items())[:1])
        alternating_layouts = dict(list(ALTERNATING_LAYOUTS.items())[:1])
    if serial:
        runs["ff_serial"] = lambda: run_sampler(
            lambda: [SerialCage(factory, B, kwargs, options=CageOptions(seed=0))],
            make_agent, FeedForwardSampler, T, B, batches,
        )  # fmt: skip
    for name, layout in ff_layouts.items():
        runs[f"ff_process[{name}]"] = partial(
            run_sampler,
            lambda layout=layout: [ProcessCage(factory, B, kwargs, options=CageOptions(seed=0), **layout(B))],
            make_agent, FeedForwardSampler, T, B, batches,
        )  # fmt: skip
    for name, layout in alternating_layouts.items():
        runs[f"alternating_process[{name}]"] = partial(
            run_alternating, factory, kwargs, make_agent, T, B, batches, layout
        )
    return runs


def measure(
    runs: dict, repeats: int, prefix: str, result: dict, before_repeat=None
) -> None:
    """Interleaved repeats; write medians and the best layout per contender."""
    samples: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(repeats):  # interleaved, so drift hits every contender alike
        if before_repeat is not None:
            before_repeat()
        for key, run in runs.items():
            samples[key].append(run())
    medians = {key: statistics.median(values) for key, values in samples.items()}
    for key, value in medians.items():
        print(f"{prefix} {key:>34}: {value:10.0f} steps/s")
        base = key.split("[")[0]
        if "[" in key:
            result[
                f"{prefix}_{base}_{key.split('[')[1][:-1].replace('+', '_').replace('/', '_')}_sps"
            ] = round(value, 1)
        if value >= result.get(f"{prefix}_{base}_sps", 0):
            result[f"{prefix}_{base}_sps"] = round(value, 1)
            if "[" in key:
                result[f"{prefix}_{base}_layout"] = key.split("[")[1][:-1]


# -- the CleanRL-style loop -------------------------------------------------------
def run_gym_loop(kind: str, T: int, B: int, batches: int) -> float:
    """SyncVectorEnv/AsyncVectorEnv + torch policy filling preallocated [T, B] buffers."""
    fns = [make_cartpole for _ in range(B)]
    envs = (
        gym.vector.SyncVectorEnv(fns)
        if kind == "sync"
        else gym.vector.AsyncVectorEnv(fns)
    )
    agent = cartpole_agent()
    model, distribution = agent.model, agent.distribution
    model.eval()
    obs_shape = envs.single_observation_space.shape
    observations = torch.zeros((T, B) + obs_shape)  # [T, B, 4]
    actions = torch.zeros((T, B), dtype=torch.long)
    log_probs = torch.zeros((T, B))
    rewards = torch.zeros((T, B))
    dones = torch.zeros((T, B))
    values = torch.zeros((T, B))
    next_obs, _ = envs.reset(seed=0)
    next_obs = torch.as_tensor(next_obs)
    next_done = torch.zeros(B)

    def batch() -> None:
        nonlocal next_obs, next_done
        for t in range(T):  # rollout
            observations[t] = next_obs
            dones[t] = next_done
            with torch.no_grad():
                out = model(next_obs)
                action = distribution.sample(out.dist_params)
                log_probs[t] = distribution.log_likelihood(action, out.dist_params)
                values[t] = out.value
            actions[t] = action
            obs, reward, terminated, truncated, _ = envs.step(action.numpy())
            rewards[t] = torch.as_tensor(reward)
            next_obs = torch.as_tensor(obs)
            next_done = torch.as_tensor(
                np.logical_or(terminated, truncated), dtype=torch.float32
            )
        with torch.no_grad():  # bootstrap and GAE, as in CleanRL's ppo.py
            next_value = model(next_obs).value
            advantages = torch.zeros_like(rewards)
            last = 0
            for t in reversed(range(T)):
                if t == T - 1:
                    not_done, following = 1.0 - next_done, next_value
                else:
                    not_done, following = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + GAMMA * following * not_done - values[t]
                advantages[t] = last = delta + GAMMA * LAMBDA * not_done * last
            _ = advantages + values  # returns

    try:
        batch()  # warm-up
        start = time.perf_counter()
        for _ in range(batches):
            batch()
        elapsed = time.perf_counter() - start
    finally:
        envs.close()
    return batches * T * B / elapsed


# -- a policy whose cost scales with the batch, for the cpu200us env ---------------
class TokenPolicy(nn.Module):
    """Each observation is lifted into ``tokens`` learned tokens, run through an
    MLP per token and mean-pooled; cost is proportional to batch x tokens."""

    def __init__(self, tokens: int, width: int = 256) -> None:
        super().__init__()
        self.tokens = nn.Parameter(torch.randn(tokens, width) * 0.1)
        self.lift = nn.Linear(4, width)
        self.mix = nn.Sequential(nn.Tanh(), nn.Linear(width, width), nn.Tanh())
        self.policy = nn.Linear(width, 2)
        self.value_head = nn.Linear(width, 1)

    def forward(self, observation: torch.Tensor):
        hidden = self.lift(observation)[:, None, :] + self.tokens  # [N, K, W]
        pooled = self.mix(hidden).mean(1)  # [N, W]
        return self.policy(pooled), self.value_head(pooled).squeeze(-1)


class TokenAgent:
    """Torch :class:`~parllel.agents.Agent` around :class:`TokenPolicy`."""

    def __init__(self, policy: TokenPolicy) -> None:
        self.policy = policy
        self.distribution = Categorical(2)

    def initial_state(self, n_envs: int) -> None:
        return None

    def step(self, observation, prev_action, prev_reward, state) -> AgentStep:
        logits, value = self.policy(observation)
        params = DistParams(logits)
        action = self.distribution.sample(params)
        info = {
            fields.LOG_PROB: self.distribution.log_likelihood(action, params),
            fields.VALUE: value,
        }
        return AgentStep(action, info)

    def value(self, observation, prev_action, prev_reward, state):
        return self.policy(observation)[1]

    def set_mode(self, mode: str) -> None:
        self.policy.train(mode == "train")


def seconds_per_call(fn, repeats: int = 30) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired_seconds(env, policy, pairs: int = 15) -> tuple[float, float, float]:
    """Medians of interleaved timings, so that both see the same machine speed.

    Returns seconds for one serial step of 8 ``cpu200us`` envs, policy inference
    for 8 observations and for 4.
    """
    x8, x4 = torch.zeros(8, 4), torch.zeros(4, 4)
    envs, full, half = [], [], []
    with torch.no_grad():
        for _ in range(pairs):
            envs.append(8 * seconds_per_call(lambda: env.step(0), 5))
            full.append(seconds_per_call(lambda: policy(x8), 3))
            half.append(seconds_per_call(lambda: policy(x4), 3))
    return statistics.median(envs), statistics.median(full), statistics.median(half)


def calibrate_tokens(
    iterations: int, tokens: int = 8
) -> tuple[int, tuple[float, float, float]]:
    """Tokens making inference for 8 envs take as long as stepping them serially.

    Fixed-point iterations from ``tokens`` (per-call overhead is not per
    token) on timings interleaved with the env's; returns the tokens and the
    final :func:`paired_seconds`.
    """
    env = CpuBoundEnv(iterations=iterations)
    env.reset(seed=0)
    for _ in range(5):
        times = paired_seconds(env, TokenPolicy(tokens), pairs=5)
        if abs(times[1] / times[0] - 1) < 0.03:
            break
        tokens = max(1, round(tokens * times[0] / times[1]))
    return tokens, paired_seconds(env, TokenPolicy(tokens))


# -- main -----------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    pin_threads()
    repeats = args.repeats or (1 if args.quick else 5)
    T, B, batches = (16, 8, 1) if args.quick else (128, 64, 8)
    result: dict[str, float | str] = {}

    runs = contenders(
        make_cartpole, None, cartpole_agent, T, B, batches, serial=True,
        quick=args.quick,
    )  # fmt: skip
    runs["gym_sync"] = lambda: run_gym_loop("sync", T, B, batches)
    runs["gym_async"] = lambda: run_gym_loop("async", T, B, batches)
    measure(runs, repeats, "cartpole", result)
    ours = max(
        result[f"cartpole_{k}_sps"]
        for k in ("ff_serial", "ff_process", "alternating_process")
    )
    gym_best = max(result["cartpole_gym_sync_sps"], result["cartpole_gym_async_sps"])
    result["cartpole_best_vs_best_gym_loop"] = round(ours / gym_best, 3)

    # the machine's speed drifts, and not alike for env code and torch: the
    # policy is recalibrated before every repeat (both contenders of a repeat
    # use the same one); the reported times are medians over the repeats
    iterations = busy_iterations(200e-6)
    policy_tokens = [8]
    calibrations: list[tuple[float, float, float]] = []

    def recalibrate() -> None:
        tokens, times = calibrate_tokens(iterations, policy_tokens[-1])
        policy_tokens.append(tokens)
        calibrations.append(times)

    def make_agent() -> TokenAgent:
        torch.manual_seed(0)
        return TokenAgent(TokenPolicy(policy_tokens[-1]))

    cpu_T, cpu_batches = (8, 1) if args.quick else (64, 4)
    runs = contenders(
        CpuBoundEnv, {"iterations": iterations}, make_agent, cpu_T, 8, cpu_batches,
        serial=False, quick=args.quick,
    )  # fmt: skip
    measure(runs, repeats, "cpu200us", result, before_repeat=recalibrate)
    for j, name in enumerate(("env_step", "inference", "inference_half")):
        median = statistics.median(times[j] for times in calibrations)
        result[f"cpu200us_{name}_ms"] = round(median * 1e3, 3)
    result["cpu200us_policy_tokens"] = statistics.median(policy_tokens[1:])
    result["alternating_vs_feedforward"] = round(
        result["cpu200us_alternating_process_sps"] / result["cpu200us_ff_process_sps"],
        3,
    )
    print_result(result)


if __name__ == "__main__":
    main()
