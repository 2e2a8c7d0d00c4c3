"""Wall clock of PPO and SAC on HalfCheetah: parllel (torch, JAX) vs SB3 and SBX.

**PPO**, CleanRL's MuJoCo settings on every side (8 envs x 256 steps, 10
epochs x 32 minibatches, Adam eps 1e-5, lr 3e-4 to 0 linearly, clip 0.2 for
ratio and value, value term 0.25 x MSE, grad norm 0.5, observation and reward
normalization clipped at 10, separate 64x64 tanh networks, orthogonal init,
log-std 0). Contenders, interleaved per repeat so they see the same load:
``ours`` (parllel torch), ``sb3`` (``--sb3-vec auto`` picks the faster
vector env), ``ours_async`` (torch, ``BackgroundSampler`` max_lag 1),
``ours_jax`` (parllel sampling, ``parllel.jax`` PPO: the whole update one
compiled call) and ``sbx`` (SBX's PPO on SB3's vector env and
``VecNormalize``; where SBX cannot take a setting the run prints it).
parllel's PPO cage is ``--parallel auto`` (the layout ``build_cage``
measures: serial, or envs split between the main process and workers; the
run prints the one it took), like ``--sb3-vec auto``: each side's faster.
**SAC** (one env, one update per step, batch 256, 256x256 ReLU, actor lr
3e-4, critics and alpha 1e-3, alpha from 1, 5,000 random steps): ``ours``,
``sb3``, ``ours_jax``, ``sbx``. Per run: wall per env step of the training
call and its phases (sampling, update; the first update apart: a JIT
compiles there). Ratios: median over runs with a 95% bootstrap interval.
``ppo_1m_minutes``: ours_jax's first update plus its later wall per step x 1M.

JAX's compiled programs go to a fresh persistent compilation cache
(``parllel.jax.compilation_cache``, as the JAX examples use it), the same
for ``ours_jax`` and ``sbx``: the first repeat of each compiles (cold,
``*_us_per_step_runs[0]``), later repeats load; ``--no-compile-cache``
compiles in every run.

Learners take ``--learner-threads`` (1) threads on every side: torch's, and
XLA's (``configure_cpu_backend``, which also runs JAX's compiled calls on
the calling thread, as the JAX examples do, for SBX as for parllel);
``--only sac --learner-threads 2`` times SAC with the learner on both cores, every side.
``--return-seeds K`` compares PPO's final returns (mean of the last 100
training episodes) over K seeds per side at ``--return-steps``: parllel's JAX
seeds in one program (``examples/mujoco/train_ppo.py --backend jax --seeds
K``), SB3's and SBX's as separate runs; medians, intervals, the difference's
verdict. ``--ppo-1m`` times two 1M-step runs of that example's JAX path
(``--parallel`` as PPO's timing): the first compiles (cold cache), the
second loads the programs the first stored (warm).
Last line: one JSON object (``ppo_wall_ratio``, ``ppo_jax_wall_ratio``,
``ppo_jax_vs_sbx``, ``sac_wall_ratio``, ``sac_jax_wall_ratio``,
``sac_jax_vs_sbx``, ``ppo_1m_minutes`` among others).
Usage: python benchmarks/train_mujoco.py [--quick] [--steps N] [--repeats N]
       [--sac-steps N] [--sac-seeds N] [--return-seeds K] [--ppo-1m]
       [--ppo-contenders NAME ...] [--sac-contenders NAME ...]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pin_threads, print_result  # noqa: E402
from _mujoco_ours import run_ours_ppo, run_ours_sac  # noqa: E402
from _mujoco_returns import (  # noqa: E402
    jax_seed_returns,
    ppo_1m_minutes,
    separate_returns,
)
from _mujoco_sb3 import Timed, run_ppo, run_sac, vec_step_seconds  # noqa: E402
from _stats import (  # noqa: E402
    difference_verdict,
    finite_or_none,
    median_difference_interval,
    median_interval,
    median_ratio_interval,
    verdict,
)

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


# -- threads -------------------------------------------------------------------


def set_learner_threads(threads: int) -> None:
    """The learner's threads on every side: torch's, and XLA's, with JAX's
    CPU backend as the JAX examples set it (compiled calls on the calling
    thread); before JAX's first computation, for SBX's runs as for ours."""
    from parllel.jax.cpu_backend import configure_cpu_backend

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    configure_cpu_backend(threads=threads)
    torch.set_num_threads(threads)


def chosen(
    parser: argparse.ArgumentParser, flag: str, contenders: dict, names: list | None
) -> dict:
    """The contenders ``names`` picks (all if None); an unknown name is an error."""
    if names is None:
        return contenders
    unknown = set(names) - set(contenders)
    if unknown:
        parser.error(f"{flag} {sorted(unknown)}: not among {sorted(contenders)}")
    return {name: contenders[name] for name in names}


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
    firsts = [r.firsts.get("update", 0.0) for r in runs]
    out[f"{name}_first_update_s"] = round(statistics.median(firsts), 2)
    later = [1e6 * (r.seconds - f) / r.steps for r, f in zip(runs, firsts)]
    out[f"{name}_us_per_step_after_first_update"] = round(statistics.median(later), 1)
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


def interleaved(
    contenders: dict[str, Any], seeds: int, last: int
) -> dict[str, list[Timed]]:
    """Every contender once per seed, in turn (all see the same load)."""
    runs: dict[str, list[Timed]] = {name: [] for name in contenders}
    for seed in range(seeds):
        for name, run in contenders.items():
            t = run(seed)
            runs[name].append(t)
            ret = np.mean(t.returns[-last:]) if t.returns else None
            print(f"{name} seed {seed}: {1e6 * t.seconds / t.steps:.1f} us/step "
                  f"({t.steps} steps, {t.seconds:.1f} s; sample "
                  f"{t.phases.get('sample', 0):.1f} s, update "
                  f"{t.phases.get('update', 0):.1f} s), return {ret}",
                  flush=True)  # fmt: skip
    return runs


def ppo_1m_estimate(runs: list[Timed], result: dict[str, Any]) -> None:
    """``ppo_1m_minutes``: ours_jax's first update (its compile) plus its wall
    per step after it x 1M, with a bootstrap interval over the runs."""
    minutes = [
        (
            r.firsts.get("update", 0.0)
            + 1e6 * (r.seconds - r.firsts.get("update", 0.0)) / r.steps
        )
        / 60
        for r in runs
    ]
    value, low, high = median_interval(minutes)
    result["ppo_1m_minutes"] = round(value, 2)
    result["ppo_1m_minutes_ci"] = [round(low, 2), round(high, 2)]
    print(f"ppo_1m_minutes (ours_jax: first update + later wall/step x 1M): {value:.2f} "
          f"[{low:.2f}, {high:.2f}]", flush=True)  # fmt: skip


# -- returns over many seeds ---------------------------------------------------


def compare_returns(
    args: argparse.Namespace, ppo_hp: dict, vec: str, result: dict[str, Any]
) -> None:
    """PPO's final returns over ``--return-seeds`` seeds per side: parllel's
    JAX seeds in one program, SB3's and SBX's as separate runs."""
    from _mujoco_sbx import run_sbx_ppo

    K, hp = args.return_seeds, dict(ppo_hp, total_steps=args.return_steps)
    extra = ("--quick",) if args.quick else ()
    print(f"returns: {K} seeds x {hp['total_steps']} steps per side", flush=True)
    returns, walls = {}, {}
    returns["ours_jax"], walls["ours_jax"] = jax_seed_returns(
        K, hp["total_steps"], extra + ("--parallel", args.parallel)
    )
    print(f"  ours_jax ({K} seeds, one program): {returns['ours_jax']}", flush=True)
    print("  sb3:", flush=True)
    returns["sb3"], walls["sb3"] = separate_returns(
        lambda s: run_ppo(hp, s, vec, args.fused_adam), K
    )
    print("  sbx:", flush=True)
    returns["sbx"], walls["sbx"] = separate_returns(
        lambda s: run_sbx_ppo(hp, s, vec), K
    )
    result.update(return_seeds=K, return_steps=hp["total_steps"])
    for side, values in returns.items():
        median, low, high = median_interval(values)
        result[f"ppo_return_median_{side}"] = finite_or_none(median, 1)
        result[f"ppo_return_median_{side}_ci"] = [
            finite_or_none(low, 1), finite_or_none(high, 1)
        ]  # fmt: skip
        result[f"ppo_return_runs_{side}"] = [finite_or_none(v, 1) for v in values]
        result[f"ppo_return_wall_s_{side}"] = round(walls[side], 1)
        print(f"ppo_return_median_{side}: {median:.1f} [{low:.1f}, {high:.1f}]")
    for peer in ("sb3", "sbx"):
        diff, low, high = median_difference_interval(returns["ours_jax"], returns[peer])
        key = f"ppo_return_ours_jax_minus_{peer}"
        result[key] = finite_or_none(diff, 1)
        result[f"{key}_ci"] = [finite_or_none(low, 1), finite_or_none(high, 1)]
        result[f"{key}_verdict"] = difference_verdict(low, high)
        print(f"{key}: {diff:.1f} [{low:.1f}, {high:.1f}]: "
              f"{difference_verdict(low, high)}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds)")
    parser.add_argument("--steps", type=int, default=100_000, help="PPO env steps")
    parser.add_argument("--repeats", type=int, default=3, help="PPO runs each")
    parser.add_argument("--sac-steps", type=int, default=50_000)
    parser.add_argument("--sac-seeds", type=int, default=2)
    parser.add_argument("--last-episodes", type=int, default=10)
    parser.add_argument(
        "--parallel", default="auto", choices=["auto", "serial", "process"],
        help="parllel's PPO cage (auto: the measured layout, as --sb3-vec auto)",
    )  # fmt: skip
    parser.add_argument(
        "--sb3-vec", default="auto", choices=["auto", "dummy", "subproc"]
    )
    parser.add_argument("--max-lag", type=int, default=1)
    parser.add_argument(
        "--fused-adam", action="store_true", help="fused Adam, both sides"
    )
    parser.add_argument(
        "--return-seeds", type=int, default=0,
        help="PPO returns over this many seeds per side (0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--return-steps", type=int, default=100_000, help="env steps per return run"
    )
    parser.add_argument(
        "--ppo-1m", action="store_true",
        help="time one 1M-step run of examples/mujoco/train_ppo.py --backend jax",
    )  # fmt: skip
    parser.add_argument(
        "--learner-threads", type=int, default=1, help="torch and XLA threads"
    )
    parser.add_argument(
        "--ppo-contenders", nargs="+", default=None,
        help="PPO contenders to time (default: all; e.g. ours_jax_ppo sb3_ppo sbx_ppo)",
    )  # fmt: skip
    parser.add_argument(
        "--sac-contenders", nargs="+", default=None,
        help="SAC contenders to time (default: all; e.g. ours_jax_sac sbx_sac)",
    )  # fmt: skip
    parser.add_argument(
        "--no-compile-cache", action="store_true",
        help="JAX compiles in every run (no persistent compilation cache)",
    )  # fmt: skip
    parser.add_argument(
        "--only", choices=["timing", "ppo", "sac", "returns", "ppo-1m"],
        help="one part: PPO and SAC timing, PPO timing, SAC timing, returns, "
        "the 1M-step run",
    )  # fmt: skip
    args = parser.parse_args()
    pin_threads()
    set_learner_threads(args.learner_threads)
    from _mujoco_jax import run_jax_ppo, run_jax_sac  # after the CPU backend is set

    from parllel.jax.compilation_cache import CACHE_ENV, enable_compilation_cache

    # one fresh cache for this run's JAX programs, the examples it starts too
    cache = "off" if args.no_compile_cache else tempfile.mkdtemp(prefix="jax-cache-")
    if cache != "off":
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
    os.environ[CACHE_ENV] = cache
    enable_compilation_cache()
    from _mujoco_sbx import (
        SBX_PPO_DIFFERENCES,
        SBX_SAC_DIFFERENCES,
        run_sbx_ppo,
        run_sbx_sac,
    )

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
        args.return_seeds, args.return_steps = 2, 512  # the example's --quick preset
    result: dict[str, Any] = {
        "ppo_hyperparameters": ppo_hp, "sac_hyperparameters": sac_hp,
        "parallel": args.parallel, "fused_adam": args.fused_adam,
        "repeats": args.repeats, "sac_seeds": args.sac_seeds, "max_lag": args.max_lag,
        "learner_threads": args.learner_threads,
        "compile_cache": not args.no_compile_cache,
        "sbx_differences": [SBX_PPO_DIFFERENCES, SBX_SAC_DIFFERENCES],
    }  # fmt: skip
    print(f"{SBX_PPO_DIFFERENCES}\n{SBX_SAC_DIFFERENCES}", flush=True)
    vec = args.sb3_vec
    timing = args.only in (None, "timing", "sac")  # SAC's timing
    if vec == "auto" and args.only in (None, "timing", "ppo", "returns"):
        step_ms = {
            v: 1e3 * vec_step_seconds(ppo_hp["env_id"], ppo_hp["n_envs"], vec_steps, v)
            for v in ("dummy", "subproc")
        }
        result["sb3_vec_step_ms"] = {k: round(v, 3) for k, v in step_ms.items()}
        vec = min(step_ms, key=step_ms.__getitem__)
    result["sb3_vec"] = vec
    print(f"SB3 vector env: {vec}", flush=True)

    runs: dict[str, list[Timed]] = {}
    if args.only in (None, "timing", "ppo"):
        contenders = {
            "ours_ppo": lambda s: run_ours_ppo(
                ppo_hp, s, args.parallel, args.fused_adam, None
            ),
            "sb3_ppo": lambda s: run_ppo(ppo_hp, s, vec, args.fused_adam),
            "ours_async_ppo": lambda s: run_ours_ppo(
                ppo_hp, s, args.parallel, args.fused_adam, args.max_lag
            ),
            "ours_jax_ppo": lambda s: run_jax_ppo(ppo_hp, s, args.parallel),
            "sbx_ppo": lambda s: run_sbx_ppo(ppo_hp, s, vec),
        }
        contenders = chosen(parser, "--ppo-contenders", contenders, args.ppo_contenders)
        runs.update(interleaved(contenders, args.repeats, args.last_episodes))
    sac_contenders = {
        "ours_sac": lambda s: run_ours_sac(sac_hp, s, args.fused_adam),
        "sb3_sac": lambda s: run_sac(sac_hp, s, args.fused_adam),
        "ours_jax_sac": lambda s: run_jax_sac(sac_hp, s),
        "sbx_sac": lambda s: run_sbx_sac(sac_hp, s),
    }
    sac_contenders = chosen(
        parser, "--sac-contenders", sac_contenders, args.sac_contenders
    )
    if timing:
        runs.update(interleaved(sac_contenders, args.sac_seeds, args.last_episodes))
    for name, timed in runs.items():
        result.update(summarize(name, timed, args.last_episodes))
    for ours, theirs, key in (
        ("ours_ppo", "sb3_ppo", "ppo_wall_ratio"),
        ("ours_async_ppo", "sb3_ppo", "ppo_async_wall_ratio"),
        ("ours_async_ppo", "ours_ppo", "ppo_async_vs_sync"),
        ("ours_jax_ppo", "sb3_ppo", "ppo_jax_wall_ratio"),
        ("ours_jax_ppo", "sbx_ppo", "ppo_jax_vs_sbx"),
    ):
        if ours in runs and theirs in runs:
            compare(result, ours, theirs, key)
    if "ours_jax_ppo" in runs:
        ppo_1m_estimate(runs["ours_jax_ppo"], result)
    for ours, theirs, key in (
        ("ours_sac", "sb3_sac", "sac_wall_ratio"),
        ("ours_jax_sac", "sb3_sac", "sac_jax_wall_ratio"),
        ("ours_jax_sac", "sbx_sac", "sac_jax_vs_sbx"),
    ):
        if timing and ours in runs and theirs in runs:
            compare(result, ours, theirs, key)
    for key in [k for k in result if k.startswith("_")]:
        del result[key]
    if args.return_seeds and args.only in (None, "returns"):
        compare_returns(args, ppo_hp, vec, result)
    if args.ppo_1m and args.only in (None, "ppo-1m"):
        steps = 512 if args.quick else 999_424
        extra = ("--quick",) if args.quick else ()
        # the first run fills this benchmark's fresh compilation cache (cold);
        # the second loads it, as a user's later runs do (warm)
        for label in ("",) if args.no_compile_cache else ("", "_warm"):
            minutes = ppo_1m_minutes(steps, extra + ("--parallel", args.parallel))
            result[f"ppo_1m_minutes_measured{label}"] = round(minutes, 2)
            print(f"ppo_1m_minutes_measured{label} ({steps} steps, the example's JAX "
                  f"path, --parallel {args.parallel}, start to exit): {minutes:.2f}",
                  flush=True)  # fmt: skip
        result["ppo_1m_measured_steps"] = steps
    result["load_average_start_end"] = [load_start, list(os.getloadavg())]
    print_result(result)


if __name__ == "__main__":
    main()
