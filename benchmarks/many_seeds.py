"""K seeds in one program against one seed and against K separate processes.

PPO on HalfCheetah-v4 with CleanRL's settings (examples/mujoco/train_ppo.py
--backend jax: 8 envs x 256 steps per batch, 10 epochs x 32 minibatches,
observation and reward normalization per run), a fixed number of env steps
per run. Every figure is the wall time of the example script started as a
user starts it (a fresh process: imports, env creation, compilation
included; JAX's persistent compilation cache off, so every run compiles):

- ``ppo_seeds{K}_wall_s``: ``--seeds K`` (K = 4, 8), one program, with
  ``--parallel auto`` (its K x 8 envs stepped as ``build_cage`` measures
  best: on 2 cores, half in the main process and half in one worker) and
  the runs' updates split over one JAX CPU device per core
  (``parllel.jax.seed_devices``);
- ``ppo_seeds1_wall_s``: one ordinary run (``--seeds 1``, the example's
  defaults: its 8 envs stepped in the main process);
- ``ppo_separate8_wall_s``: 8 ordinary runs (``--seed 0`` .. ``--seed 7``)
  started at once as 8 processes, until the last one ends;

and the ratios ``ppo_seeds8_vs_seeds1_wall``, ``ppo_seeds4_vs_seeds1_wall``
and ``ppo_seeds8_vs_8_separate_runs_wall``. Each run's final
``train/return_mean`` is read from its ``progress.csv``: their medians
(``ppo_seeds8_return_median``, ``ppo_separate8_return_median``, each with
its bootstrap interval, and ``ppo_seeds8_minus_separate8_return``: the
difference of the medians, its interval and verdict) say whether the seeds
learned what separate runs learn. The single and separate runs
evaluate once at the end (one episode), the seed runs do not.

SAC on Pendulum-v1 (examples/pendulum/train_sac.py --backend jax: one env
per run, one update per env step after 256 random steps, 256x256 networks,
no early stop): ``sac_seeds{K}_wall_s`` for ``--seeds K`` (K = 1, 8) and
the ratio ``sac_seeds8_vs_seeds1_wall``, a fixed number of env steps per run
(``--sac-steps``); ``sac_seeds8_return_median`` is the median over the 8 runs
of their final training return.

A torch seed axis (issue #37: "torch via torch.func as well if the
measurements say it pays"): one PPO minibatch update of 8 stacked 64x64
actor-critics (HalfCheetah's sizes, 64 samples per run) as 8 sequential
eager torch updates, as one ``torch.func`` ``vmap`` update and as one
``jax.jit(jax.vmap(...))`` update (``_torch_func_seeds.py``):
``torch_func_seeds8_vs_8_sequential`` and ``torch_func_seeds8_vs_jax_seeds8``
(ratios of ms per update of all 8 runs).

    python benchmarks/many_seeds.py            # 20 PPO batches, 2,000 SAC steps per run
    python benchmarks/many_seeds.py --quick    # a smoke run (K = 2 for 4 and 8)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import pin_threads, print_result, ratio
from _stats import difference_verdict, median_difference_interval, median_interval
from _torch_func_seeds import measure as measure_torch_func

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "mujoco" / "train_ppo.py"
SAC_SCRIPT = ROOT / "examples" / "pendulum" / "train_sac.py"


def _command(
    run_root: Path, quick: bool, steps: int, *flags: str, script: Path = SCRIPT
) -> list[str]:
    return [
        sys.executable,
        str(script),
        *(["--quick"] if quick else []),
        "--backend",
        "jax",
        "--total-steps",
        str(steps),
        "--console",
        "plain",
        "--run-root",
        str(run_root),
        "--eval-episodes",
        "1",
        *flags,
    ]


def _environment() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
        # every run compiles, as on a first run: no run loads another's programs
        "PARLLEL_JAX_CACHE_DIR": "off",
    }


def timed(commands: list[list[str]]) -> float:
    """Wall seconds of ``commands`` started at once, until the last ends."""
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            command,
            env=_environment(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    for process in processes:
        _, stderr = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(commands[0])} failed:\n{stderr[-3000:]}")
    return time.perf_counter() - start


def final_returns(run_root: Path) -> list[float]:
    """The last ``train/return_mean`` of every run directory under ``run_root``."""
    from parllel.logging.csv_sink import read_progress

    values = []
    for csv in sorted(run_root.rglob("seed*/logs/progress.csv")) + sorted(
        p for p in run_root.glob("*-2*/logs/progress.csv") if "seeds" not in str(p)
    ):
        column = read_progress(csv).get("train/return_mean")
        if column is not None and len(column):
            values.append(float(column[-1]))
    return values


def median(values: list[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None


def interval(values: list[float]) -> list[float] | None:
    """The median's 95% bootstrap interval (None under 2 runs)."""
    if len(values) < 2:
        return None
    _, low, high = median_interval(values)
    return [round(low, 1), round(high, 1)]


def difference(ours: list[float], theirs: list[float]) -> dict[str, object] | None:
    """``median(ours) - median(theirs)``, its 95% bootstrap interval and what
    the interval allows one to say (None under 2 runs a side)."""
    if len(ours) < 2 or len(theirs) < 2:
        return None
    diff, low, high = median_difference_interval(ours, theirs)
    return {
        "diff": round(diff, 1),
        "interval": [round(low, 1), round(high, 1)],
        "verdict": difference_verdict(low, high),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny smoke run")
    parser.add_argument(
        "--batches", type=int, default=20, help="PPO batches per run (2048 steps each)"
    )
    parser.add_argument(
        "--sac-steps", type=int, default=2_000, help="SAC env steps per run"
    )
    parser.add_argument(
        "--skip-ppo", action="store_true", help="measure SAC only (no PPO keys)"
    )
    args = parser.parse_args()
    # --quick: one batch of the example's --quick preset per run, and K = 2
    # stands in for 4 and 8 (the keys are there; the figures mean nothing)
    steps = 256 if args.quick else args.batches * 2048
    stand_in = {1: 1, 4: 2, 8: 2} if args.quick else {1: 1, 4: 4, 8: 8}
    result: dict[str, object] = {"steps_per_run": steps, "quick": args.quick}
    pin_threads()  # torch on one thread (the update timings in this process)
    result.update(measure_torch_func(8, repeats=5 if args.quick else 100))
    result.update(measure_sac(args.quick, args.sac_steps, stand_in[8]))
    if not args.skip_ppo:
        result.update(measure_ppo(args.quick, steps, stand_in))
    print_result(result)


def measure_sac(quick: bool, steps: int, K: int) -> dict[str, object]:
    """SAC Pendulum: ``--seeds K`` (K = 8, or its stand-in) against one run."""
    steps = 400 if quick else steps
    # a small replay (every run keeps all its steps) and one evaluation at the end
    flags = ["--target-return", "None", "--replay-size", str(steps + 1)]
    flags += ["--eval-interval-steps", str(steps)]
    result: dict[str, object] = {"sac_steps_per_run": steps}
    walls = {}
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        for k in (1, K):
            walls[k] = timed(
                [
                    _command(
                        root / f"sac{k}",
                        quick,
                        steps,
                        *flags,
                        "--seeds",
                        str(k),
                        script=SAC_SCRIPT,
                    )
                ]
            )
        result["sac_seeds1_wall_s"] = round(walls[1], 2)
        result["sac_seeds8_wall_s"] = round(walls[K], 2)
        result["sac_seeds8_return_median"] = median(final_returns(root / f"sac{K}"))
    result["sac_seeds8_vs_seeds1_wall"] = ratio(walls[K], walls[1])
    return result


def measure_ppo(quick: bool, steps: int, stand_in: dict[int, int]) -> dict[str, object]:
    """PPO HalfCheetah: ``--seeds`` 1, 4, 8 and 8 separate processes."""
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        walls: dict[int, float] = {}
        for K in (1, 4, 8):
            measured = stand_in[K]
            if measured not in walls:
                run_root = root / f"seeds{measured}"
                flags = ["--seeds", str(measured)]
                if measured > 1:  # the K x 8 envs: stepped where build_cage finds best
                    flags += ["--parallel", "auto"]
                walls[measured] = timed([_command(run_root, quick, steps, *flags)])
            walls[K] = walls[measured]
            result[f"ppo_seeds{K}_wall_s"] = round(walls[K], 2)
        returns = final_returns(root / f"seeds{stand_in[8]}")
        result["ppo_seeds8_return_median"] = median(returns)
        result["ppo_seeds8_return_interval"] = interval(returns)
        separate_root = root / "separate"
        separate = timed(
            [
                _command(separate_root, quick, steps, "--seed", str(seed))
                for seed in range(stand_in[8])
            ]
        )
        result["ppo_separate8_wall_s"] = round(separate, 2)
        separate_returns = final_returns(separate_root)
        result["ppo_separate8_return_median"] = median(separate_returns)
        result["ppo_separate8_return_interval"] = interval(separate_returns)
        result["ppo_seeds8_minus_separate8_return"] = difference(
            returns, separate_returns
        )
    result["ppo_seeds8_vs_seeds1_wall"] = ratio(walls[8], walls[1])
    result["ppo_seeds4_vs_seeds1_wall"] = ratio(walls[4], walls[1])
    result["ppo_seeds8_vs_8_separate_runs_wall"] = ratio(walls[8], separate)
    return result


if __name__ == "__main__":
    main()
