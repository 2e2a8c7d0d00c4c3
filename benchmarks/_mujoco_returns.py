"""Returns over many seeds, and the 1M-step run, for ``train_mujoco.py``.

parllel's JAX PPO trains its K seeds in ONE program, as a user runs them
(``examples/mujoco/train_ppo.py --backend jax --seeds K``: one cage of K x 8
envs, statistics per run, one vmapped update); SB3 and SBX train each seed as
a separate run, as their users do. Every run's return is the mean of its last
100 training episodes (raw rewards): the example's last ``train/return_mean``,
SB3's and SBX's ``ep_info_buffer``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _mujoco_sb3 import Timed

ROOT = Path(__file__).resolve().parents[1]
PPO_EXAMPLE = ROOT / "examples" / "mujoco" / "train_ppo.py"


def run_ppo_example(run_root: Path, *flags: str) -> float:
    """Wall seconds of ``examples/mujoco/train_ppo.py --backend jax`` with
    ``flags`` (a fresh process, as a user starts it), writing under ``run_root``."""
    command = [
        sys.executable, str(PPO_EXAMPLE), "--backend", "jax", "--console", "plain",
        "--run-root", str(run_root), *flags,
    ]  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def final_returns(run_root: Path) -> list[float]:
    """The last ``train/return_mean`` of every seed's run directory (``seed*``)
    under ``run_root`` (a ``--seeds`` group's own logs are left out)."""
    from parllel.logging.csv_sink import read_progress

    values = []
    for csv in sorted(run_root.rglob("seed*/logs/progress.csv")):
        column = read_progress(csv).get("train/return_mean")
        if column is not None and len(column):
            values.append(float(column[-1]))
    return values


def jax_seed_returns(
    seeds: int, steps: int, extra: tuple[str, ...] = ()
) -> tuple[list[float], float]:
    """Every run's final return of one ``--seeds`` program, and its wall seconds."""
    with tempfile.TemporaryDirectory() as temporary:
        wall = run_ppo_example(
            Path(temporary), "--seeds", str(seeds), "--total-steps", str(steps),
            "--eval-episodes", "1", *extra,
        )  # fmt: skip
        returns = final_returns(Path(temporary))
    if len(returns) != seeds:
        raise RuntimeError(f"--seeds {seeds} wrote {len(returns)} returns, not {seeds}")
    return returns, wall


def separate_returns(
    run: Callable[[int], Timed], seeds: int
) -> tuple[list[float], float]:
    """Each seed's final return (mean of its last 100 training episodes), one
    run after another, and their summed wall seconds."""
    returns, wall = [], 0.0
    for seed in range(seeds):
        timed = run(seed)
        returns.append(float(np.mean(timed.returns)) if timed.returns else np.nan)
        wall += timed.seconds
        print(f"  seed {seed}: return {returns[-1]:.1f}", flush=True)
    return returns, wall


def ppo_1m_minutes(steps: int, extra: tuple[str, ...] = ()) -> float:
    """Minutes of one run of the JAX example over ``steps`` env steps (its
    default 999,424 is CleanRL's 1M-step run), start to exit."""
    with tempfile.TemporaryDirectory() as temporary:
        return (
            run_ppo_example(Path(temporary), "--total-steps", str(steps), *extra) / 60
        )
