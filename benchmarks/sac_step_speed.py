"""µs per SAC gradient step: torch eager against parllel's JAX SAC, and the
step against its FLOP floor.

HalfCheetah shapes (observation 17, action 6), 256x256 ReLU actor and twin
Q, batch 256, Adam, learned alpha, ``policy_delay=1`` (critic, actor and
alpha step from the same parameters). Contenders, interleaved, each on one
thread (torch ``set_num_threads(1)``; XLA without its multi-threaded Eigen
and with one intra-op thread):

- ``torch_eager``: :meth:`parllel.torch.algos.SAC.update` on a torch batch;
- ``jax``: one :meth:`parllel.jax.algos.SAC.update_batches` call of one
  update (``K = 1``: the call, its dispatch and the metrics' host copy);
- ``jax_scan8``: one call of eight updates (``lax.scan``), per update.

The floor: the update's matmul FLOPs (counted layer by layer below: the
target's actor and target-critic forwards, the critics' forward and backward,
the actor's forward, the critics' forward and backward to the action, the
actor's backward) at the rate one thread multiplies ``[256, 256] @ [256,
256]`` in the same run (the faster of torch and XLA). ``sac_update_vs_flop_floor``
is the best contender's µs over the floor's (the median over repeats of
their ratio, the floor measured in every repeat, since the load of a shared
machine varies).

Last line: one JSON object with ``sac_step_us_torch_eager``,
``sac_step_us_jax``, ``sac_step_us_jax_scan8``, ``matmul_gflops``,
``sac_update_mflop``, ``sac_update_xla_mflop`` (XLA's own count of the
compiled step), ``sac_floor_us``, ``sac_update_vs_flop_floor`` and
``jax_compile_seconds``.
Usage: python benchmarks/sac_step_speed.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402

pin_threads()

import gymnasium as gym  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from parllel.jax.agents.sac_agent import build_sac_agent as build_jax_agent  # noqa: E402
from parllel.jax.algos.sac import SAC as JaxSAC  # noqa: E402
from parllel.jax.algos.sac import SacBatch  # noqa: E402
from parllel.jax.algos.sac_setup import (  # noqa: E402
    EntropyCoefficient as JaxAlpha,
)
from parllel.jax.algos.sac_setup import build_sac_optimizers  # noqa: E402
from parllel.replays.transitions import ReplayBatch  # noqa: E402
from parllel.torch.agents import build_sac_agent  # noqa: E402
from parllel.torch.algos import SAC, EntropyCoefficient, build_sac_optimizer  # noqa: E402

OBS, ACT, HIDDEN = 17, 6, 256


def replay_batch(batch_size: int, rng: np.random.Generator) -> ReplayBatch:
    """A HalfCheetah-shaped replay batch of numpy arrays."""
    n = batch_size
    return ReplayBatch(
        observation=rng.normal(size=(n, OBS)).astype(np.float32),
        action=rng.uniform(-1, 1, (n, ACT)).astype(np.float32),
        reward=rng.normal(size=n).astype(np.float32),
        next_observation=rng.normal(size=(n, OBS)).astype(np.float32),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        discount=np.full(n, 0.99, np.float32),
        n_steps=np.ones(n, np.int64),
        indices=np.arange(n),
        weights=np.ones(n, np.float32),
    )


def update_macs(batch_size: int, hidden: int = HIDDEN) -> int:
    """Multiply-adds of the matmuls of one fused SAC update (see the docstring)."""
    actor_forward = OBS * hidden + hidden * hidden + 2 * hidden * ACT
    q_forward = (OBS + ACT) * hidden + hidden * hidden + hidden
    q_weight_grads = q_forward
    q_input_grads_to_hidden = hidden * hidden + hidden  # not the first layer's
    q_input_grads_to_action = q_forward  # through every layer, to the input
    actor_backward = actor_forward + hidden * hidden + 2 * hidden * ACT
    per_sample = (
        actor_forward + 2 * q_forward  # target: actor at s', target critics
        + 2 * (q_forward + q_weight_grads + q_input_grads_to_hidden)  # critic loss
        + actor_forward + 2 * (q_forward + q_input_grads_to_action)  # actor loss
        + actor_backward
    )  # fmt: skip
    return per_sample * batch_size


def matmul_seconds() -> dict[str, Callable[[], object]]:
    """Torch's and XLA's ``[256, 256] @ [256, 256]`` on one thread."""
    a = np.random.default_rng(0).normal(size=(256, 256)).astype(np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(a.T.copy())
    ja, jb = jnp.asarray(a), jnp.asarray(a.T)
    mm = jax.jit(lambda x, y: jnp.dot(x, y))
    mm(ja, jb).block_until_ready()
    return {
        "torch": lambda: torch.mm(ta, tb),
        "xla": lambda: mm(ja, jb).block_until_ready(),
    }


def _median(fn: Callable[[], object], repeats: int, number: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def torch_step(batch: ReplayBatch) -> Callable[[], object]:
    """One torch eager SAC update."""
    torch.manual_seed(0)
    space = gym.spaces.Box(-1, 1, (OBS,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (ACT,), np.float32)
    agent = build_sac_agent(space, action_space, hidden_sizes=(HIDDEN, HIDDEN))
    alpha = EntropyCoefficient(1.0)
    sac = SAC(agent, build_sac_optimizer(agent, alpha, 3e-4), alpha)
    torch_batch = ReplayBatch(*(torch.as_tensor(np.asarray(x)) for x in batch))
    sac.update(torch_batch)
    return lambda: sac.update(torch_batch)


def jax_steps(
    batch: ReplayBatch, count: int
) -> tuple[Callable[[], object], float, float]:
    """One call of ``count`` JAX SAC updates, its compile seconds and XLA's
    FLOP count of one update."""
    space = gym.spaces.Box(-1, 1, (OBS,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (ACT,), np.float32)
    agent = build_jax_agent(space, action_space, seed=0, hidden_sizes=(HIDDEN, HIDDEN))
    sac = JaxSAC(agent, build_sac_optimizers(3e-4), JaxAlpha(1.0), seed=1)
    batches = SacBatch.stack([batch] * count)
    start = time.perf_counter()
    sac.update_batches(batches)
    compile_s = time.perf_counter() - start
    lowered = sac._with_keys.lower(sac._state(), batches, sac.key)
    cost = lowered.compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    flops = float(cost.get("flops", float("nan"))) / count
    return (lambda: sac.update_batches(batches)), compile_s, flops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repeats")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 15)
    number = 5 if args.quick else 20
    batch = replay_batch(256, np.random.default_rng(0))
    contenders = {"torch_eager": (torch_step(batch), 1)}
    jax_one, compile_s, xla_flops = jax_steps(batch, 1)
    jax_eight, _, _ = jax_steps(batch, 8)
    contenders["jax"] = (jax_one, 1)
    contenders["jax_scan8"] = (jax_eight, 8)
    matmuls = matmul_seconds()
    mflop = 2 * update_macs(256) / 1e6
    times: dict[str, list[float]] = {name: [] for name in contenders}
    floors: list[float] = []  # µs of the floor, measured in every repeat
    rates: list[float] = []
    for _ in range(repeats):  # interleaved, the floor with them (the load varies)
        best = min(_median(fn, 3, 50) for fn in matmuls.values())
        rates.append(2 * 256**3 / best / 1e9)
        floors.append(mflop / rates[-1] * 1e3)
        for name, (fn, per_call) in contenders.items():
            calls = max(1, number // per_call)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / (calls * per_call))
    us = {name: statistics.median(t) * 1e6 for name, t in times.items()}
    best_name = min(us, key=us.__getitem__)
    vs_floor = statistics.median(
        t * 1e6 / floor for t, floor in zip(times[best_name], floors)
    )
    gflops = statistics.median(rates)
    floor_us = statistics.median(floors)
    result = {f"sac_step_us_{name}": round(value, 1) for name, value in us.items()}
    result.update(
        matmul_gflops=round(gflops, 2),
        sac_update_mflop=round(mflop, 1),
        sac_update_xla_mflop=round(xla_flops / 1e6, 1),
        sac_floor_us=round(floor_us, 1),
        sac_update_vs_flop_floor=round(vs_floor, 3),
        sac_update_vs_flop_floor_contender=best_name,
        sac_jax_vs_torch_eager=round(us["jax"] / us["torch_eager"], 3),
        jax_compile_seconds=round(compile_s, 2),
    )
    print_result(result)


if __name__ == "__main__":
    main()
