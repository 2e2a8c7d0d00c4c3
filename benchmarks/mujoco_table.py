"""Reproduce CleanRL's MuJoCo PPO table with ``examples/mujoco/train_ppo.py``.

CleanRL's ``ppo_continuous_action.py`` at 1M steps, 3 seeds, mean final
training-episode return +- population std (v4 envs): HalfCheetah 1442.6 +-
46.0, Hopper 2382.9 +- 271.7, Walker2d 2288.0 +- 571.8. This script runs the
example with its defaults for every env and seed (``--preset cleanrl`` with
``--exact``), ``--jobs`` runs at a time, each in its own process, then reads
every run's ``logs/progress.csv``: the final ``train/return_mean`` (mean of
the last 100 training episodes, raw rewards) and the wall time. Per env: the
mean and population std over seeds and the two-sided comparison with the
published figures: the difference of the means with its 95% Welch interval
(the published table gives only mean, std and 3 seeds; with CleanRL's own
runs ``benchmarks/reproduce_cleanrl.py`` bootstraps both sides). An
interval that contains 0 shows no difference; one above or below 0 shows a
difference, whichever way. Writes the learning curves (mean +- std over
seeds per env) to ``--plot`` and ends with one JSON line.

``--collect DIR`` skips training and reads the run directories already in
DIR (their config.json says env and seed). Wall times are only comparable
when each run had a core to itself: ``--jobs 1`` on an idle machine.

Usage: python benchmarks/mujoco_table.py [--quick] [--envs ...] [--seeds N]
       [--steps N] [--jobs N] [--exact] [--run-root DIR] [--collect DIR]
       [--plot PNG]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_result  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mujoco" / "train_ppo.py"
CLEANRL = {  # env: (mean, population std) of CleanRL's published 1M-step table
    "HalfCheetah-v4": (1442.6, 46.0),
    "Hopper-v4": (2382.9, 271.7),
    "Walker2d-v4": (2288.0, 571.8),
}
RETURN = "train/return_mean"
CLEANRL_SEEDS = 3


def welch_interval(
    values: list[float], mean: float, population_std: float, n: int
) -> tuple[float, float, float]:
    """``mean(values) - mean`` and its 95% Welch interval, against a published
    mean, population std and seed count."""
    from scipy import stats

    ours = np.asarray(values, dtype=np.float64)
    var_a = float(np.var(ours, ddof=1)) / ours.size
    var_b = population_std**2 * n / (n - 1) / n  # the sample variance, over n
    diff = float(ours.mean()) - mean
    dof = (var_a + var_b) ** 2 / (var_a**2 / (ours.size - 1) + var_b**2 / (n - 1))
    half = float(stats.t.ppf(0.975, dof)) * math.sqrt(var_a + var_b)
    return diff, diff - half, diff + half


def train(
    env_id: str, seed: int, steps: int | None, run_root: Path, quick: bool, exact: bool
) -> None:
    """Run the example once (its own process) into ``run_root``."""
    command = [sys.executable, str(EXAMPLE), "--env-id", env_id, "--seed", str(seed)]
    command += ["--preset", "cleanrl"] if exact else []
    command += ["--console", "plain", "--run-root", str(run_root)]
    command += ["--quick"] if quick else []
    command += ["--total-steps", str(steps)] if steps else []
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{env_id} seed {seed} failed:\n{done.stderr[-2000:]}")
    print(f"{env_id} seed {seed}: done", flush=True)


def read_run(run_dir: Path) -> dict[str, Any] | None:
    """Env, seed, curve, final return and wall time of one run directory."""
    config_path, progress = run_dir / "config.json", run_dir / "logs" / "progress.csv"
    if not (config_path.is_file() and progress.is_file()):
        return None
    config = json.loads(config_path.read_text())
    config = config.get("config", config)
    with progress.open() as file:
        rows = [r for r in csv.DictReader(file) if r.get(RETURN)]
    if not rows:
        return None
    last = rows[-1]
    return {
        "env_id": config["env_id"],
        "seed": int(config["seed"]),
        "steps": [int(float(r["step"])) for r in rows],
        "returns": [float(r[RETURN]) for r in rows],
        "final_return": float(last[RETURN]),
        "wall_s": float(last["time/elapsed_s"]),
        "env_steps": int(float(last["step"])),
    }


def table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per env: mean, population std and the interval against the published
    figures, over the runs' final returns."""
    rows: dict[str, Any] = {}
    for env_id in sorted({r["env_id"] for r in runs}):
        mine = sorted(
            (r for r in runs if r["env_id"] == env_id), key=lambda r: r["seed"]
        )
        finals = [r["final_return"] for r in mine]
        mean = statistics.fmean(finals)
        std = statistics.pstdev(finals)  # population, as the published table
        row: dict[str, Any] = {
            "seeds": [r["seed"] for r in mine],
            "final_returns": [round(f, 1) for f in finals],
            "mean": round(mean, 1),
            "std": round(std, 1),
            "wall_s": [round(r["wall_s"], 1) for r in mine],
            "env_steps": [r["env_steps"] for r in mine],
        }
        if env_id in CLEANRL and len(finals) > 1:
            ref_mean, ref_std = CLEANRL[env_id]
            diff, low, high = welch_interval(finals, ref_mean, ref_std, CLEANRL_SEEDS)
            row.update(
                cleanrl=[ref_mean, ref_std],
                diff_ci=[round(diff, 1), round(low, 1), round(high, 1)],
                contains_0=low <= 0.0 <= high,
            )
        rows[env_id] = row
    return rows


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Learning curves: mean +- std over seeds per env, CleanRL's goal dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({r["env_id"] for r in runs})
    fig, axes = plt.subplots(
        1, len(envs), figsize=(4.5 * len(envs), 3.5), squeeze=False
    )
    for ax, env_id in zip(axes[0], envs):
        mine = [r for r in runs if r["env_id"] == env_id]
        n = min(len(r["steps"]) for r in mine)
        steps = np.array(mine[0]["steps"][:n])
        curves = np.array([r["returns"][:n] for r in mine])
        mean, std = curves.mean(axis=0), curves.std(axis=0)
        ax.plot(steps, mean, label=f"parllel ({len(mine)} seeds)")
        ax.fill_between(steps, mean - std, mean + std, alpha=0.25)
        if env_id in CLEANRL:
            ref_mean, ref_std = CLEANRL[env_id]
            ax.axhline(ref_mean, color="k", lw=0.8, label="CleanRL final mean")
            ax.axhspan(ref_mean - ref_std, ref_mean + ref_std, color="k", alpha=0.1)
        ax.set(title=env_id, xlabel="env steps", ylabel="training return (last 100)")
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny runs (seconds)")
    parser.add_argument("--envs", nargs="+", default=list(CLEANRL))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--steps", type=int, default=None, help="default: the example's"
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time")
    parser.add_argument(
        "--exact", action="store_true", help="the example's --preset cleanrl"
    )
    parser.add_argument(
        "--run-root",
        type=Path,
        default=None,
        help="default: runs/mujoco-table (--quick: a temporary directory)",
    )
    parser.add_argument("--collect", type=Path, default=None, help="only read DIR")
    parser.add_argument("--plot", type=Path, default=None, help="curves PNG")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        if args.quick:
            args.envs, args.seeds = args.envs[:1], 2
            args.run_root = args.run_root or Path(scratch)
        run(args, args.collect or args.run_root or Path("runs/mujoco-table"))


def run(args: argparse.Namespace, root: Path) -> None:
    """Train (unless collecting), tabulate, plot and print the JSON line."""
    started = time.perf_counter()
    if args.collect is None:
        root.mkdir(parents=True, exist_ok=True)
        jobs = [(e, s) for e in args.envs for s in range(args.seeds)]
        with ThreadPoolExecutor(args.jobs) as pool:
            for future in [
                pool.submit(train, e, s, args.steps, root, args.quick, args.exact)
                for e, s in jobs
            ]:
                future.result()
    runs = [r for d in sorted(root.iterdir()) if d.is_dir() and (r := read_run(d))]
    if not runs:
        sys.exit(f"no finished runs in {root}")
    rows = table(runs)
    for env_id, row in rows.items():
        versus = (
            f" minus CleanRL's {row['diff_ci'][0]} [{row['diff_ci'][1]}, "
            f"{row['diff_ci'][2]}]" if "diff_ci" in row else ""
        )  # fmt: skip
        print(f"{env_id}: {row['mean']} +- {row['std']} over seeds {row['seeds']} "
              f"{row['final_returns']}, wall {row['wall_s']} s{versus}")  # fmt: skip
    if args.plot:
        plot(runs, args.plot)
        print(f"curves: {args.plot}")
    print_result(
        {
            "table": rows,
            "all_intervals_contain_0": all(
                row.get("contains_0", False) for row in rows.values()
            ),
            "seconds": round(time.perf_counter() - started, 1),
            "quick": args.quick,
        }
    )


if __name__ == "__main__":
    main()
