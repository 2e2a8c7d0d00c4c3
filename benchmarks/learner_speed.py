"""Learner speed: optimizer implementations and torch.compile on the PPO and SAC updates.

Times one PPO update (CartPole-sized: 64x64 actor-critic MLP, a [128, 8]
batch, 4 epochs of 4 minibatches) and one SAC gradient step (Pendulum-sized:
256x256 actor and twin Q, a batch of 256) with:

- ``forloop``: ``torch.optim.Adam(foreach=False)`` (a Python loop over
  parameters);
- ``foreach``: ``Adam(foreach=True)`` (multi-tensor kernels);
- ``fused``: ``Adam(fused=True)`` (one fused kernel per step);
- ``compiled``: the models wrapped in ``torch.compile`` (with the fastest of
  the three optimizers above); its one-off compile time is reported apart
  (``--quick`` traces with the ``eager`` backend, without generating code).

Torch is pinned to one thread; every figure is the median over repeats of the
seconds per update, contenders interleaved. Last line: one JSON object with
``{algo}_{variant}_ms`` per update, ``{algo}_best`` and
``{algo}_best_vs_forloop``, ``{algo}_compile_seconds``.
Usage: python benchmarks/learner_speed.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from _common import pin_threads, print_result

pin_threads()

import torch  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.replays.transitions import ReplayBatch  # noqa: E402
from parllel.torch.agents import build_sac_agent  # noqa: E402
from parllel.torch.algos import PPO, SAC, ActorCriticEvaluator  # noqa: E402
from parllel.torch.algos.sac_setup import EntropyCoefficient  # noqa: E402
from parllel.torch.models import build_actor_critic  # noqa: E402

OPTIMIZERS = {
    "forloop": {"foreach": False},
    "foreach": {"foreach": True},
    "fused": {"fused": True},
}


def ppo_batch(T: int, B: int, rng: np.random.Generator) -> dict[str, Any]:
    """A CartPole-shaped PPO batch (numpy arrays, as a sampler's tree gives)."""
    return {
        fields.OBSERVATION: rng.normal(size=(T, B, 4)).astype(np.float32),
        fields.ACTION: rng.integers(0, 2, (T, B)),
        fields.ADVANTAGE: rng.normal(size=(T, B)).astype(np.float32),
        fields.RETURN: rng.normal(size=(T, B)).astype(np.float32),
        fields.AGENT_INFO: {
            fields.LOG_PROB: np.full((T, B), np.log(0.5), np.float32),
            fields.VALUE: rng.normal(size=(T, B)).astype(np.float32),
        },
    }


def ppo_update(variant: str, quick: bool) -> tuple[Callable[[], None], float]:
    """One PPO update callable for ``variant``, and its compile seconds."""
    torch.manual_seed(0)
    T, B = (16, 4) if quick else (128, 8)
    model, distribution = build_actor_critic(
        gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2)
    )
    options = OPTIMIZERS.get(variant, OPTIMIZERS[best_of(variant)])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, **options)
    if variant.startswith("compiled"):
        model = torch.compile(model, backend=compile_backend(quick))
    ppo = PPO(
        ActorCriticEvaluator(model, distribution), optimizer, epochs=4, minibatches=4
    )
    batch = ppo_batch(T, B, np.random.default_rng(0))
    start = time.perf_counter()
    ppo.optimize(batch)  # warm-up (compiles)
    return (lambda: ppo.optimize(batch)), time.perf_counter() - start


def sac_update(variant: str, quick: bool) -> tuple[Callable[[], None], float]:
    """One SAC gradient step callable for ``variant``, and its compile seconds."""
    torch.manual_seed(0)
    size = 32 if quick else 256
    observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    agent = build_sac_agent(
        observation_space,
        gym.spaces.Box(-2, 2, (1,), np.float32),
        hidden_sizes=(size, size),
    )
    alpha = EntropyCoefficient(1.0)
    options = OPTIMIZERS.get(variant, OPTIMIZERS[best_of(variant)])
    groups = [agent.actor.parameters(), agent.critic.parameters(), [alpha.log_alpha]]
    optimizer = torch.optim.Adam(
        [{"params": list(group)} for group in groups], lr=3e-4, **options
    )
    if variant.startswith("compiled"):
        agent.actor = torch.compile(agent.actor, backend=compile_backend(quick))
        agent.critic = torch.compile(agent.critic, backend=compile_backend(quick))
    sac = SAC(agent, optimizer, alpha)
    n = 256
    rng = np.random.default_rng(0)
    batch = ReplayBatch(
        observation=torch.as_tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
        action=torch.as_tensor(rng.uniform(-2, 2, (n, 1)), dtype=torch.float32),
        reward=torch.as_tensor(rng.normal(size=n), dtype=torch.float32),
        next_observation=torch.as_tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
        terminated=torch.zeros(n, dtype=torch.bool),
        truncated=torch.zeros(n, dtype=torch.bool),
        discount=torch.full((n,), 0.99),
        n_steps=torch.ones(n, dtype=torch.int64),
        indices=torch.arange(n),
        weights=torch.ones(n),
    )
    start = time.perf_counter()
    sac.update(batch)  # warm-up (compiles)
    return (lambda: sac.update(batch)), time.perf_counter() - start


def compile_backend(quick: bool) -> str:
    """inductor (generated kernels); ``--quick`` traces only (seconds, not tens)."""
    return "eager" if quick else "inductor"


_BEST: dict[str, str] = {}


def best_of(variant: str) -> str:
    """The optimizer the compiled variant uses (the fastest measured, else fused)."""
    return _BEST.get(variant, "fused")


def measure(
    build: Callable[[str, bool], tuple[Callable[[], None], float]],
    variants: list[str],
    repeats: int,
    number: int,
    quick: bool,
) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms per update of each variant (interleaved repeats); compile seconds."""
    updates, compile_seconds = {}, {}
    for variant in variants:
        updates[variant], compile_seconds[variant] = build(variant, quick)
    samples: dict[str, list[float]] = {variant: [] for variant in variants}
    for _ in range(repeats):
        for variant, update in updates.items():
            start = time.perf_counter()
            for _ in range(number):
                update()
            samples[variant].append((time.perf_counter() - start) / number * 1e3)
    return {v: statistics.median(s) for v, s in samples.items()}, compile_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 7)
    result: dict[str, Any] = {"torch": torch.__version__}
    for algo, build, number in (("ppo", ppo_update, 3), ("sac", sac_update, 30)):
        number = 1 if args.quick else number
        eager, _ = measure(build, list(OPTIMIZERS), repeats, number, args.quick)
        best = min(eager, key=eager.__getitem__)
        _BEST["compiled"] = best
        compiled, seconds = measure(build, ["compiled"], repeats, number, args.quick)
        times = {**eager, f"compiled_{best}": compiled["compiled"]}
        for variant, ms in times.items():
            print(f"{algo:>4} {variant:>17}: {ms:8.2f} ms per update", flush=True)
            result[f"{algo}_{variant}_ms"] = round(ms, 3)
        winner = min(times, key=times.__getitem__)
        result[f"{algo}_best"] = winner
        result[f"{algo}_best_vs_forloop"] = round(eager["forloop"] / times[winner], 3)
        result[f"{algo}_compile_seconds"] = round(seconds["compiled"], 2)
        print(
            f"{algo:>4} best: {winner} ({result[f'{algo}_best_vs_forloop']}x the for-loop Adam)"
        )
    print_result(result)


if __name__ == "__main__":
    main()
