"""Benchmark generalized advantage estimation implementations.

Times GAE (gamma 0.99, lambda 0.95, float32, ~1% terminations and ~1%
truncations bootstrapped from ``final_value``) at several ``[T, B]`` sizes:

- ``numba``: parllel's checked ``generalized_advantage_estimation`` with
  preallocated outputs (validation included; what ``EstimateAdvantage`` runs);
- ``numpy_loop``: a reverse loop over ``T``, vectorized over ``B``;
- ``python_loop``: scalar nested loops;
- ``torchrl``: ``torchrl.objectives.value.functional.generalized_advantage_estimate``
  on pre-converted ``[B, T, 1]`` tensors, one torch thread (``null`` if torchrl
  does not import).

``gae_2048x16_vs_memcpy`` divides the bare kernel's time
(``gae_2048x16_kernel_us``, no argument checks) by the time of moving the same
bytes: one ``np.copyto`` of every array the kernel reads or writes
(``gae_2048x16_memcpy_us``), the memory-bound limit. ``jit_compile_s`` is the first call's time in a
fresh process with an empty numba cache (normal runs load the cached kernel).
``vtrace_{T}x{B}_numba_us`` times the checked ``vtrace`` (same batch,
log-ratios drawn from N(0, 0.3), preallocated outputs) and
``vtrace_2048x16_vs_gae`` divides it by the checked GAE's time.
The last printed line is one JSON object with these figures.

Usage: ``python benchmarks/transforms_bench.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

SIZES = ((128, 8), (2048, 16), (1024, 64))
GAMMA, LAMBDA = 0.99, 0.95
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

from _common import median_time  # noqa: E402

from parllel.transforms.functional import (  # noqa: E402
    generalized_advantage_estimation,
    vtrace,
)
from parllel.transforms.kernels.gae import gae_kernel  # noqa: E402


def make_batch(n_steps: int, n_envs: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 batch with ~1% terminations and ~1% truncations."""
    rng = np.random.default_rng(seed)
    shape = (n_steps, n_envs)
    terminated = rng.random(shape) < 0.01
    return {
        "reward": rng.normal(size=shape).astype(np.float32),
        "value": rng.normal(size=shape).astype(np.float32),
        "terminated": terminated,
        "truncated": (rng.random(shape) < 0.01) & ~terminated,
        "bootstrap_value": rng.normal(size=n_envs).astype(np.float32),
        "final_value": rng.normal(size=shape).astype(np.float32),
    }


def gae_numpy_loop(batch: dict[str, np.ndarray], advantage: np.ndarray) -> None:
    """Reverse loop over T, vectorized over B, same semantics as the kernel."""
    reward, value = batch["reward"], batch["value"]
    terminated, truncated = batch["terminated"], batch["truncated"]
    final_value = batch["final_value"]
    following_value = batch["bootstrap_value"]
    following_adv = np.zeros_like(following_value)
    for t in range(len(reward) - 1, -1, -1):
        next_value = np.where(
            terminated[t], 0.0, np.where(truncated[t], final_value[t], following_value)
        )
        carry = np.where(terminated[t] | truncated[t], 0.0, following_adv)
        following_adv = (
            reward[t] + GAMMA * next_value - value[t] + GAMMA * LAMBDA * carry
        )
        advantage[t] = following_adv
        following_value = value[t]


def gae_python_loop(batch: dict[str, np.ndarray], advantage: np.ndarray) -> None:
    """Scalar loops over B and T."""
    reward, value = batch["reward"], batch["value"]
    terminated, truncated = batch["terminated"], batch["truncated"]
    final_value, bootstrap = batch["final_value"], batch["bootstrap_value"]
    n_steps, n_envs = reward.shape
    for b in range(n_envs):
        following_adv = 0.0
        following_value = float(bootstrap[b])
        for t in range(n_steps - 1, -1, -1):
            if terminated[t, b]:
                next_value, carry = 0.0, 0.0
            elif truncated[t, b]:
                next_value, carry = float(final_value[t, b]), 0.0
            else:
                next_value, carry = following_value, following_adv
            v = float(value[t, b])
            following_adv = (
                float(reward[t, b]) + GAMMA * next_value - v + GAMMA * LAMBDA * carry
            )
            advantage[t, b] = following_adv
            following_value = v


def torchrl_runner(batch: dict[str, np.ndarray]) -> Callable[[], object] | None:
    """A closure running torchrl's GAE on the batch, or None if unavailable."""
    try:
        import torch
        from torchrl.objectives.value.functional import generalized_advantage_estimate
    except Exception:  # noqa: BLE001 - any import failure means "absent"
        return None
    torch.set_num_threads(1)

    def to_torch(x: np.ndarray) -> torch.Tensor:  # [T, B] -> [B, T, 1]
        return torch.from_numpy(np.ascontiguousarray(x.T)).unsqueeze(-1)

    following = np.concatenate([batch["value"][1:], batch["bootstrap_value"][None]])
    next_value = np.where(batch["truncated"], batch["final_value"], following)
    tensors = {
        "state_value": to_torch(batch["value"]),
        "next_state_value": to_torch(next_value.astype(np.float32)),
        "reward": to_torch(batch["reward"]),
        "done": to_torch(batch["terminated"] | batch["truncated"]),
        "terminated": to_torch(batch["terminated"]),
    }
    return lambda: generalized_advantage_estimate(GAMMA, LAMBDA, **tensors)


def median_us(fn: Callable[[], object], repeats: int, target_s: float) -> float:
    """Median microseconds per call over ``repeats`` timed runs."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(target_s / once))
    return median_time(fn, repeats, number) * 1e6


def jit_compile_seconds() -> float:
    """First-call time of the GAE kernel in a fresh process with an empty cache."""
    code = (
        "import time, numpy as np\n"
        "from parllel.transforms.functional import generalized_advantage_estimation as g\n"
        "x = np.zeros((4, 2), np.float32); f = np.zeros((4, 2), bool)\n"
        "s = time.perf_counter()\n"
        "g(x, x, f, f, x[0], x, gamma=0.9, gae_lambda=0.9)\n"
        "print(time.perf_counter() - s)\n"
    )
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, PYTHONPATH=REPO_ROOT)
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run the benchmark and print the JSON summary as the last line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="one short repeat per figure"
    )
    args = parser.parse_args()
    repeats, target_s = (1, 0.0) if args.quick else (7, 0.05)
    python_target = 0.0 if args.quick else 0.2

    results: dict[str, float | None] = {}
    for n_steps, n_envs in SIZES:
        batch = make_batch(n_steps, n_envs)
        advantage = np.empty_like(batch["reward"])
        returns = np.empty_like(batch["reward"])
        prefix = f"gae_{n_steps}x{n_envs}"

        def ours(batch=batch, advantage=advantage, returns=returns):
            generalized_advantage_estimation(
                **batch,
                gamma=GAMMA,
                gae_lambda=LAMBDA,
                advantage_out=advantage,
                return_out=returns,
            )

        ours()  # load (or compile) the kernel before timing
        reference = advantage.copy()
        results[f"{prefix}_numba_us"] = median_us(ours, repeats, target_s)
        log_ratio = (
            np.random.default_rng(1)
            .normal(0, 0.3, (n_steps, n_envs))
            .astype(np.float32)
        )

        def ours_vtrace(
            batch=batch, log_ratio=log_ratio, returns=returns, advantage=advantage
        ):
            vtrace(
                **batch,
                log_ratio=log_ratio,
                gamma=GAMMA,
                trace_lambda=LAMBDA,
                return_out=returns,
                advantage_out=advantage,
            )

        ours_vtrace()
        vtrace_us = median_us(ours_vtrace, repeats, target_s)
        results[f"vtrace_{n_steps}x{n_envs}_numba_us"] = vtrace_us
        if (n_steps, n_envs) == (2048, 16):
            results["vtrace_2048x16_vs_gae"] = vtrace_us / results[f"{prefix}_numba_us"]
        results[f"{prefix}_numpy_loop_us"] = median_us(
            lambda b=batch, a=advantage: gae_numpy_loop(b, a), repeats, target_s
        )
        np.testing.assert_allclose(advantage, reference, rtol=1e-4, atol=1e-4)
        results[f"{prefix}_python_loop_us"] = median_us(
            lambda b=batch, a=advantage: gae_python_loop(b, a),
            min(repeats, 3),
            python_target,
        )
        np.testing.assert_allclose(advantage, reference, rtol=1e-4, atol=1e-4)
        run_torchrl = torchrl_runner(batch)
        if run_torchrl is None:
            results[f"{prefix}_torchrl_us"] = None
        else:
            out = run_torchrl()[0].squeeze(-1).numpy().T
            np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3)
            results[f"{prefix}_torchrl_us"] = median_us(run_torchrl, repeats, target_s)
        if (n_steps, n_envs) == (2048, 16):
            # The memory-bound limit: move the same bytes the kernel moves,
            # one np.copyto per array it reads or writes.
            arrays = [*batch.values(), advantage, returns]
            twins = [np.empty_like(a) for a in arrays]

            def memcpy_all(arrays=arrays, twins=twins):
                for target, source in zip(twins, arrays):
                    np.copyto(target, source)

            memcpy = median_us(memcpy_all, repeats, target_s)

            def kernel_only(batch=batch, advantage=advantage, returns=returns):
                gae_kernel(
                    batch["reward"],
                    batch["value"],
                    batch["terminated"],
                    batch["truncated"],
                    batch["bootstrap_value"],
                    batch["final_value"],
                    GAMMA,
                    LAMBDA,
                    True,
                    1,
                    advantage,
                    returns,
                )

            kernel_us = median_us(kernel_only, repeats, target_s)
            numba_us = results[f"{prefix}_numba_us"]
            results["gae_2048x16_kernel_us"] = kernel_us
            results["gae_2048x16_memcpy_us"] = memcpy
            results["gae_2048x16_numpy_loop_vs_numba"] = (
                results[f"{prefix}_numpy_loop_us"] / numba_us
            )
            results["gae_2048x16_vs_memcpy"] = kernel_us / memcpy
        for key, value in results.items():
            if key.startswith((prefix, f"vtrace_{n_steps}x{n_envs}")):
                print(f"{key:36s} {'absent' if value is None else f'{value:12.1f}'}")
    results["jit_compile_s"] = jit_compile_seconds()
    print(
        json.dumps(
            {k: (None if v is None else round(v, 3)) for k, v in results.items()}
        )
    )


if __name__ == "__main__":
    main()
