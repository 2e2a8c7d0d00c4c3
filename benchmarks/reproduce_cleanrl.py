"""CleanRL's MuJoCo PPO table, reproduced like for like.

Runs, one at a time, each in its own process:

- ``cleanrl``: CleanRL's own ``ppo_continuous_action.py`` (``--cleanrl-script``)
  in its own Python (``--cleanrl-python``, with the gymnasium and mujoco it
  needs); nothing is fetched at run time;
- ``exact``: ``examples/mujoco/train_ppo.py --preset cleanrl`` (with
  ``--backend``: JAX (the default: the update compiled whole) or torch; each
  record names its backend, and a cell pools both);
- ``default``: the example's defaults;
- ``default_truncation``: the defaults with ``--truncation-as-termination``
  (HalfCheetah only);
- ``exact_bootstrap``: the exact mode with truncations bootstrapped
  (HalfCheetah only).

The metric is the published table's: at the end of each run the mean of the
last 100 training episodes' raw returns (CleanRL's printed
``episodic_return`` lines; parllel's final ``train/return_mean``), then the
mean and the population std over seeds. The comparison is two-sided: the
difference of the means with a 95% percentile bootstrap interval (each side's
seeds resampled independently); an interval containing 0 shows no
difference. Each finished run is appended to ``--results`` (JSONL) as it
finishes, and runs already there are skipped, so the script resumes where it
stopped. Seeds run in the outer loop, so a stopped run leaves every cell
with about as many seeds.

Getting CleanRL's script (never committed here) and its environment::

    git --git-dir=<mirror of github:vwxyzjn/cleanrl> show \\
        HEAD:cleanrl/ppo_continuous_action.py > /tmp/cleanrl_ppo_continuous_action.py
    python3.11 -m venv /tmp/cleanrl-venv
    /tmp/cleanrl-venv/bin/pip install gymnasium==0.28.1 mujoco==2.3.3 \\
        "numpy<2" torch==2.13.0 tyro tensorboard imageio

Usage: python benchmarks/reproduce_cleanrl.py [--quick] [--envs ...]
       [--sides ...] [--seeds N] [--halfcheetah-seeds N] [--steps N]
       [--backend torch|jax] [--cleanrl-script PY --cleanrl-python PYTHON] [--results JSONL]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_result  # noqa: E402
from _stats import mean_difference_interval  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mujoco" / "train_ppo.py"
RESULTS = ROOT / "benchmarks" / "results" / "reproduce_cleanrl.jsonl"
PUBLISHED = {  # CleanRL's published 1M-step table: mean, population std, 3 seeds
    "HalfCheetah-v4": (1442.6, 46.0),
    "Hopper-v4": (2382.9, 271.7),
    "Walker2d-v4": (2288.0, 571.8),
}
KEYS = {"HalfCheetah-v4": "halfcheetah", "Hopper-v4": "hopper", "Walker2d-v4": "walker"}
SIDES = ("cleanrl", "exact", "default", "default_truncation", "exact_bootstrap")
HALFCHEETAH_ONLY = ("default_truncation", "exact_bootstrap")
PARLLEL_FLAGS = {
    "exact": ["--preset", "cleanrl"],
    "default": [],
    "default_truncation": ["--truncation-as-termination"],
    "exact_bootstrap": ["--preset", "cleanrl", "--no-truncation-as-termination"],
}
EPISODE = re.compile(r"episodic_return=\[?(-?[0-9.eE+-]+)\]?")
LAST = 100  # episodes in the published metric
# --quick: a few thousand steps, both sides (CleanRL: 2 iterations of 1,024)
QUICK_CLEANRL = [
    "--num-steps",
    "1024",
    "--update-epochs",
    "1",
    "--num-minibatches",
    "4",
]


def one_thread_env() -> dict[str, str]:
    """The environment of a run: torch and BLAS on one thread (parllel's
    examples also size XLA's pool to one thread, configure_cpu_backend)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONWARNINGS"] = "ignore"
    return env


def run_cleanrl(args: argparse.Namespace, env_id: str, seed: int) -> list[float]:
    """CleanRL's script once; the raw returns of its training episodes."""
    command = [str(args.cleanrl_python), str(args.cleanrl_script)]
    command += ["--env-id", env_id, "--seed", str(seed), "--no-cuda"]
    command += ["--total-timesteps", str(args.steps)]
    command += QUICK_CLEANRL if args.quick else []
    with tempfile.TemporaryDirectory() as scratch:  # its tensorboard runs/ dir
        done = subprocess.run(
            command, cwd=scratch, capture_output=True, text=True, env=one_thread_env()
        )
    if done.returncode != 0:
        raise RuntimeError(
            f"CleanRL {env_id} seed {seed} failed:\n{done.stderr[-3000:]}"
        )
    return [float(m.group(1)) for m in EPISODE.finditer(done.stdout)]


def run_parllel(
    args: argparse.Namespace, side: str, env_id: str, seed: int, run_root: Path
) -> tuple[float, int]:
    """The example once; its final ``train/return_mean`` and episode count."""
    command = [sys.executable, str(EXAMPLE), *PARLLEL_FLAGS[side]]
    command += ["--env-id", env_id, "--seed", str(seed), "--console", "plain"]
    command += ["--run-root", str(run_root), "--backend", args.backend]
    command += ["--quick"] if args.quick else ["--total-steps", str(args.steps)]
    before = set(run_root.iterdir()) if run_root.is_dir() else set()
    done = subprocess.run(command, capture_output=True, text=True, env=one_thread_env())
    if done.returncode != 0:
        raise RuntimeError(
            f"{side} {env_id} seed {seed} failed:\n{done.stderr[-3000:]}"
        )
    (run_dir,) = set(run_root.iterdir()) - before
    with (run_dir / "logs" / "progress.csv").open() as file:
        rows = [r for r in csv.DictReader(file) if r.get("train/return_mean")]
    if not rows:
        raise RuntimeError(f"{run_dir}: no training episode finished")
    return float(rows[-1]["train/return_mean"]), int(float(rows[-1]["train/episodes"]))


def run_one(
    args: argparse.Namespace, side: str, env_id: str, seed: int, run_root: Path
) -> dict[str, Any]:
    """One run of one cell: its final return, episodes, wall time and load."""
    load, start = os.getloadavg()[0], time.perf_counter()
    if side == "cleanrl":
        returns = run_cleanrl(args, env_id, seed)
        if not returns:
            raise RuntimeError(f"CleanRL {env_id} seed {seed}: no episode finished")
        final, episodes = float(np.mean(returns[-LAST:])), len(returns)
    else:
        final, episodes = run_parllel(args, side, env_id, seed, run_root)
    return {
        "env_id": env_id, "side": side, "seed": seed, "steps": args.steps,
        "backend": "torch" if side == "cleanrl" else args.backend,
        "quick": args.quick, "final_return": round(final, 2), "episodes": episodes,
        "wall_s": round(time.perf_counter() - start, 1),
        "load_start": round(load, 2), "load_end": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def read_results(path: Path) -> list[dict[str, Any]]:
    """The finished runs recorded in ``path`` (none if it does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plan(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(side, env, seed) of every run, seeds in the outer loop."""
    jobs = []
    most = max(args.halfcheetah_seeds, args.seeds)
    for seed in range(1, most + 1):
        for env_id in args.envs:
            halfcheetah = env_id.startswith("HalfCheetah")
            if seed > (args.halfcheetah_seeds if halfcheetah else args.seeds):
                continue
            for side in args.sides:
                if side in HALFCHEETAH_ONLY and not halfcheetah:
                    continue
                jobs.append((side, env_id, seed))
    return jobs


def finals(
    results: Sequence[dict[str, Any]], env_id: str, side: str
) -> dict[int, float]:
    """``{seed: final return}`` of one cell."""
    return {
        int(r["seed"]): float(r["final_return"])
        for r in results
        if r["env_id"] == env_id and r["side"] == side
    }


def interval(ours: Sequence[float], theirs: Sequence[float]) -> dict[str, Any] | None:
    """Difference of means with its 95% bootstrap interval; None under 2 seeds
    a side (no interval to speak of)."""
    if len(ours) < 2 or len(theirs) < 2:
        return None
    diff, low, high = mean_difference_interval(ours, theirs)
    return {
        "diff": round(diff, 1), "low": round(low, 1), "high": round(high, 1),
        "seeds": [len(ours), len(theirs)], "contains_0": low <= 0.0 <= high,
    }  # fmt: skip


def summarize(results: Sequence[dict[str, Any]], envs: Sequence[str]) -> dict:
    """Per env and side: the seeds, mean and population std; the intervals."""
    table: dict[str, Any] = {}
    for env_id in envs:
        row: dict[str, Any] = {}
        if env_id in PUBLISHED:
            row["cleanrl_published"] = {"mean": PUBLISHED[env_id][0],
                                        "std": PUBLISHED[env_id][1], "seeds": 3}  # fmt: skip
        for side in SIDES:
            cell = finals(results, env_id, side)
            if cell:
                values = list(cell.values())
                row[side] = {
                    "mean": round(float(np.mean(values)), 1),
                    "std": round(float(np.std(values)), 1),  # population, as the table
                    "seeds": sorted(cell),
                    "finals": [round(cell[s], 1) for s in sorted(cell)],
                    "backends": sorted(
                        {r.get("backend", "torch") for r in results
                         if r["env_id"] == env_id and r["side"] == side}
                    ),
                }  # fmt: skip
        table[env_id] = row
    result: dict[str, Any] = {"table": table}
    for env_id, key in KEYS.items():
        exact = list(finals(results, env_id, "exact").values())
        cleanrl = list(finals(results, env_id, "cleanrl").values())
        result[f"{key}_exact_vs_cleanrl_diff_ci"] = interval(exact, cleanrl)
    cheetah = "HalfCheetah-v4"
    result["halfcheetah_truncation_effect"] = interval(
        list(finals(results, cheetah, "default").values()),
        list(finals(results, cheetah, "default_truncation").values()),
    )
    result["seeds"] = {
        env_id: {side: cell["seeds"] for side, cell in row.items() if side in SIDES}
        for env_id, row in table.items()
    }
    return result


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true",
        help="a check of the pipeline, not a comparison: 2 seeds of the first "
        "env, CleanRL's script for 2,048 steps, parllel's --quick preset "
        "(episodes cut at 64 steps); no exact_bootstrap",
    )  # fmt: skip
    parser.add_argument("--envs", nargs="+", default=list(PUBLISHED),
                        help="default: the published table's three")  # fmt: skip
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES),
                        help="default: all (the list above says what each is)")  # fmt: skip
    parser.add_argument(
        "--seeds", type=int, default=3, help="seeds of Hopper, Walker2d (default 3)"
    )
    parser.add_argument("--halfcheetah-seeds", type=int, default=5,
                        help="(default 5)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=1_000_000,
                        help="CleanRL's total_timesteps (default 1,000,000: its "
                        "488 iterations of 2,048)")  # fmt: skip
    parser.add_argument(
        "--backend", choices=("torch", "jax"), default="jax",
        help="parllel's learner (default jax, as the documented table; the same "
        "math: tests/jax pins JAX PPO to torch's)",
    )  # fmt: skip
    parser.add_argument("--cleanrl-script", type=Path, default=None,
                        help="CleanRL's ppo_continuous_action.py (above: how to get "
                        "it); without it CleanRL's side is skipped")  # fmt: skip
    parser.add_argument("--cleanrl-python", type=Path, default=None,
                        help="the Python of its venv (gymnasium 0.28.1, mujoco 2.3.3)")  # fmt: skip
    parser.add_argument("--results", type=Path, default=None,
                        help=f"JSONL of finished runs (default {RESULTS}; "
                        "--quick: a temporary file)")  # fmt: skip
    parser.add_argument("--run-root", type=Path, default=None,
                        help="parllel's run directories (default: temporary)")  # fmt: skip
    args = parser.parse_args(argv)
    if (args.cleanrl_script is None) != (args.cleanrl_python is None):
        parser.error("give --cleanrl-script and --cleanrl-python together")
    if args.cleanrl_script is not None and not args.cleanrl_script.is_file():
        parser.error(f"--cleanrl-script {args.cleanrl_script}: no such file "
                     "(the module docstring says how to get it)")  # fmt: skip
    if args.cleanrl_python is not None and not os.access(args.cleanrl_python, os.X_OK):
        parser.error(f"--cleanrl-python {args.cleanrl_python}: no such executable "
                     "(the venv the module docstring makes)")  # fmt: skip
    if args.quick:
        args.envs, args.seeds, args.halfcheetah_seeds = args.envs[:1], 2, 2
        args.sides = [s for s in args.sides if s != "exact_bootstrap"]
        args.steps = 2048  # CleanRL's side; parllel's runs its --quick preset
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    if args.cleanrl_script is None and "cleanrl" in args.sides:
        print("CleanRL's side skipped: no --cleanrl-script/--cleanrl-python given",
              flush=True)  # fmt: skip
        args.sides = [s for s in args.sides if s != "cleanrl"]
    with tempfile.TemporaryDirectory() as scratch:
        results_path = args.results or (
            Path(scratch) / "results.jsonl" if args.quick else RESULTS
        )
        run_root = args.run_root or Path(scratch) / "runs"
        run_root.mkdir(parents=True, exist_ok=True)
        results_path.parent.mkdir(parents=True, exist_ok=True)
        results = [r for r in read_results(results_path) if r["quick"] == args.quick]
        done = {(r["side"], r["env_id"], r["seed"], r["steps"]) for r in results}
        jobs = plan(args)
        todo = [job for job in jobs if (*job, args.steps) not in done]
        if len(todo) < len(jobs):  # a finished cell, either backend
            print(f"{len(jobs) - len(todo)} of the {len(jobs)} runs already in "
                  f"{results_path}: skipped", flush=True)  # fmt: skip
        for side, env_id, seed in todo:
            record = run_one(args, side, env_id, seed, run_root)
            with results_path.open("a") as file:  # kept as soon as it finishes
                file.write(json.dumps(record, sort_keys=True) + "\n")
            results.append(record)
            print(f"{side} {env_id} seed {seed}: {record['final_return']} "
                  f"({record['episodes']} episodes, {record['wall_s']} s, "
                  f"load {record['load_start']}-{record['load_end']})", flush=True)  # fmt: skip
        summary = summarize([r for r in results if r["steps"] == args.steps], args.envs)
    for env_id, row in summary["table"].items():
        for side, cell in row.items():
            print(f"{env_id} {side}: {cell['mean']} +- {cell['std']} "
                  f"(seeds {cell['seeds']})")  # fmt: skip
    for key, value in summary.items():
        if key.endswith(("_ci", "_effect")):
            print(f"{key}: {value}")
    if args.quick:
        print("--quick: tiny runs whose episodes differ by side (parllel's cut at "
              "64 steps): the figures check the pipeline and compare nothing")  # fmt: skip
    print_result(dict(summary, quick=args.quick, results=str(results_path)))


if __name__ == "__main__":
    main()
